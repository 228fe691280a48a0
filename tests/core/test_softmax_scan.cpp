// logsumexp, softmax, log_softmax, argmax and cumsum x axes x dtypes x view kinds.
#include "common.hpp"

using namespace rtest;

namespace {

const Shape kShape = {2, 3, 4};
using Vals = std::vector<double>;

double lse(const Vals& v) {
  double m = *std::max_element(v.begin(), v.end()), s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

// out[i] = g(the values along `axis` through i, position of i on that axis): for the ops that
// keep the shape (softmax, log_softmax, cumsum).
template <class G>
NDArray along_axis(const NDArray& a, int64_t axis, DType t, G g) {
  int64_t d = ref::norm_axis(axis, a.ndim());
  NDArray out(a.shape, t);
  ref::for_each_index(a.shape, [&](const ref::Index& i) {
    Vals line;
    ref::Index j(i);
    for (j[d] = 0; j[d] < a.shape[d]; ++j[d]) line.push_back(a[j]);
    out[i] = ref::wrap(g(line, i[d]), t);
  });
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(logsumexp_axes_keepdim) {
  uint64_t seed = 1;
  const std::vector<std::optional<std::vector<int64_t>>> axis_sets = {std::nullopt, std::vector<int64_t>{1},
                                                                      std::vector<int64_t>{-1},
                                                                      std::vector<int64_t>{0, 2}};
  for (DType dt : kFloats)
    for (ViewKind k : kAllKinds)
      for (size_t ai = 0; ai < axis_sets.size(); ++ai)
        for (bool keep : {false, true})
          guarded(std::string("logsumexp dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k) + " axes#" +
                      std::to_string(ai) + " keepdim=" + (keep ? "1" : "0"),
                  [&] {
                    Built x = build(k, kShape, dt, Domain::Any, ++seed);
                    ravel::Axes ax = axis_sets[ai] ? ravel::Axes(*axis_sets[ai]) : ravel::Axes::every();
                    check_tensor(x.t.logsumexp(ax, keep), ref::reduce(x.r, axis_sets[ai], keep, dt, lse));
                  });
  // Stable for large inputs: logsumexp([1000, 1000]) = 1000 + log 2 (naive exp overflows).
  auto big = Tensor::from_vector<float>({1000.f, 1000.f}, {2}).logsumexp().item<float>();
  BOOST_TEST(big == 1000.f + std::log(2.f), boost::test_tools::tolerance(1e-5f));
}

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax) {
  uint64_t seed = 50;
  for (DType dt : kFloats)
    for (ViewKind k : kAllKinds)
      for (int64_t axis : {0, 1, -1})
        guarded(std::string("softmax dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k) +
                    " axis=" + std::to_string(axis),
                [&] {
                  Built x = build(k, kShape, dt, Domain::Any, ++seed);
                  check_tensor(x.t.softmax(axis), along_axis(x.r, axis, dt, [&](const Vals& v, int64_t p) {
                                 return std::exp(v[p] - lse(v));
                               }));
                  check_tensor(x.t.log_softmax(axis), along_axis(x.r, axis, dt, [&](const Vals& v, int64_t p) {
                                 return v[p] - lse(v);
                               }));
                });
  // Rows of a softmax sum to one, also for large logits.
  auto s = Tensor::from_vector<float>({1000.f, 0.f, -1000.f, 5.f}, {2, 2}).softmax(-1).sum(-1).to_vector<float>();
  for (float v : s) BOOST_TEST(v == 1.0f, boost::test_tools::tolerance(1e-5f));
}

BOOST_AUTO_TEST_CASE(argmax_first_maximum) {
  uint64_t seed = 90;
  for (DType dt : kNumeric)
    for (ViewKind k : kAllKinds)
      for (std::optional<int64_t> axis : {std::optional<int64_t>{}, std::optional<int64_t>{0},
                                          std::optional<int64_t>{1}, std::optional<int64_t>{-1}})
        for (bool keep : {false, true}) {
          if (!axis && keep) continue;  // keepdim with a flattened argmax: not specified
          guarded(std::string("argmax dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k) +
                      " axis=" + (axis ? std::to_string(*axis) : "none") + " keepdim=" + (keep ? "1" : "0"),
                  [&] {
                    // Domain::Prod has many ties, so "first maximum" matters.
                    Built x = build(k, kShape, dt, Domain::Prod, ++seed);
                    NDArray want;
                    if (!axis) {  // np.argmax(x): index into the flattened (row-major) array
                      size_t best = 0;
                      for (size_t p = 1; p < x.r.v.size(); ++p)
                        if (x.r.v[p] > x.r.v[best]) best = p;
                      want = NDArray({}, DType::I64, {double(best)});
                    } else {
                      want = ref::reduce(
                          along_axis(x.r, *axis, DType::I64,
                                     [](const Vals& v, int64_t) {
                                       return double(std::max_element(v.begin(), v.end()) - v.begin());
                                     }),
                          std::vector<int64_t>{*axis}, keep, DType::I64, [](const Vals& v) { return v[0]; });
                    }
                    check_tensor(x.t.argmax(axis, keep), want);
                  });
        }
  // np.argmax([[1, 5, 5], [7, 7, 0]], axis=1) -> [1 0]; np.argmax of the same -> 3
  auto t = Tensor::from_vector<int32_t>({1, 5, 5, 7, 7, 0}, {2, 3});
  BOOST_TEST(t.argmax(1).to_vector<int64_t>() == (std::vector<int64_t>{1, 0}), boost::test_tools::per_element());
  BOOST_TEST(t.argmax().item<int64_t>() == 3);
  BOOST_TEST((t.argmax().dtype() == DType::I64));
}

BOOST_AUTO_TEST_CASE(cumsum_every_axis) {
  uint64_t seed = 130;
  for (DType dt : kNumeric)
    for (ViewKind k : kAllKinds)
      for (int64_t axis : {0, 1, 2, -1})
        guarded(std::string("cumsum dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k) +
                    " axis=" + std::to_string(axis),
                [&] {
                  Built x = build(k, kShape, dt, Domain::Any, ++seed);
                  // Integer cumsums accumulate in i64 (NumPy's and PyTorch's accumulator).
                  const DType out = dt == DType::U8 || dt == DType::I32 ? DType::I64 : dt;
                  check_tensor(x.t.cumsum(axis), along_axis(x.r, axis, out, [](const Vals& v, int64_t p) {
                                 double s = 0;
                                 for (int64_t q = 0; q <= p; ++q) s += v[q];
                                 return s;
                               }));
                });
  // np.cumsum([1, 2, 3, 4]) -> [ 1  3  6 10]
  BOOST_TEST(Tensor::from_vector<int64_t>({1, 2, 3, 4}, {4}).cumsum().to_vector<int64_t>() ==
                 (std::vector<int64_t>{1, 3, 6, 10}),
             boost::test_tools::per_element());
}
