// Reductions sum/max/min/prod/mean/var x axis sets x keepdim x dtypes x view kinds.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include "common.hpp"

namespace bdata = boost::unit_test::data;
using namespace rtest;

namespace {

const Shape kShape = {2, 3, 4};
using Vals = std::vector<double>;
using AxesOpt = std::optional<std::vector<int64_t>>;

// nullopt = every axis (Axes::every() in Ravel).
const std::vector<AxesOpt> kAxisSets = {std::nullopt, std::vector<int64_t>{0}, std::vector<int64_t>{1},
                                        std::vector<int64_t>{-1}, std::vector<int64_t>{0, 2},
                                        std::vector<int64_t>{-2, -1}, std::vector<int64_t>{0, 1, 2}};

std::string axes_text(const AxesOpt& a) {
  if (!a) return "all";
  std::string s = "{";
  for (size_t k = 0; k < a->size(); ++k) s += (k ? "," : "") + std::to_string((*a)[k]);
  return s + "}";
}
ravel::Axes to_axes(const AxesOpt& a) { return a ? ravel::Axes(*a) : ravel::Axes::every(); }

struct ReduceRow {
  std::string name;
  std::vector<DType> dtypes;
  Domain domain;
  std::function<Tensor(const Tensor&, ravel::Axes, bool)> op;
  std::function<double(const Vals&, DType)> f;
  std::function<DType(DType)> out = [](DType t) { return t; };
};
std::ostream& operator<<(std::ostream& o, const ReduceRow& r) { return o << r.name; }

double vsum(const Vals& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double vmean(const Vals& v) { return vsum(v) / static_cast<double>(v.size()); }
double vvar(const Vals& v, int64_t correction) {
  double m = vmean(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(static_cast<int64_t>(v.size()) - correction);
}

std::vector<ReduceRow> rows() {
  return {
      // Bool sums count the trues, as i64 (NumPy).
      {"sum", kAllDTypes, Domain::Any, [](const Tensor& x, ravel::Axes a, bool k) { return x.sum(a, k); },
       [](const Vals& v, DType) { return vsum(v); },
       [](DType t) { return t == DType::Bool || t == DType::U8 || t == DType::I32 ? DType::I64 : t; }},  // NumPy's accumulator
      // bool max = any, bool min = all.
      {"max", kAllDTypes, Domain::Any, [](const Tensor& x, ravel::Axes a, bool k) { return x.max(a, k); },
       [](const Vals& v, DType) { return *std::max_element(v.begin(), v.end()); }},
      {"min", kAllDTypes, Domain::Any, [](const Tensor& x, ravel::Axes a, bool k) { return x.min(a, k); },
       [](const Vals& v, DType) { return *std::min_element(v.begin(), v.end()); }},
      // Bool products are i64 (docs/dtypes.md), i.e. "all" as 0/1.
      {"prod", kAllDTypes, Domain::Prod, [](const Tensor& x, ravel::Axes a, bool k) { return x.prod(a, k); },
       [](const Vals& v, DType) {
         double p = 1;
         for (double x : v) p *= x;
         return p;
       },
       [](DType t) { return t == DType::Bool || t == DType::U8 || t == DType::I32 ? DType::I64 : t; }},  // NumPy's accumulator
      // mean and var of integers (and bools) give f32 (docs/dtypes.md).
      {"mean(int/bool -> f32)", kBoolInts, Domain::Any, [](const Tensor& x, ravel::Axes a, bool k) { return x.mean(a, k); },
       [](const Vals& v, DType) { return vmean(v); }, [](DType) { return DType::F32; }},
      {"var(int -> f32)", kInts, Domain::Any, [](const Tensor& x, ravel::Axes a, bool k) { return x.var(a, k); },
       [](const Vals& v, DType) { return vvar(v, 1); }, [](DType) { return DType::F32; }},
      {"mean", kFloats, Domain::Any, [](const Tensor& x, ravel::Axes a, bool k) { return x.mean(a, k); },
       [](const Vals& v, DType) { return vmean(v); }},
      {"var(correction=1)", kFloats, Domain::Any, [](const Tensor& x, ravel::Axes a, bool k) { return x.var(a, k); },
       [](const Vals& v, DType) { return vvar(v, 1); }},
      {"var(correction=0)", kFloats, Domain::Any,
       [](const Tensor& x, ravel::Axes a, bool k) { return x.var(a, k, 0); },
       [](const Vals& v, DType) { return vvar(v, 0); }},
  };
}

}  // namespace

BOOST_DATA_TEST_CASE(reduction, bdata::make(rows()), row) {
  uint64_t seed = 7;
  for (DType dt : row.dtypes)
    for (ViewKind kind : kAllKinds) {
      // Every axis set on the contiguous and permuted inputs; a representative subset on the
      // other kinds keeps the run short.
      bool full = kind == ViewKind::Contiguous || kind == ViewKind::Permuted;
      Built x = build(kind, kShape, dt, row.domain, ++seed);
      for (size_t ai = 0; ai < kAxisSets.size(); ++ai) {
        if (!full && ai != 0 && ai != 2 && ai != 4) continue;
        for (bool keep : {false, true})
          guarded(row.name + " dtype=" + ravel::dtype_name(dt) + " view=" + kind_name(kind) +
                      " axes=" + axes_text(kAxisSets[ai]) + " keepdim=" + (keep ? "true" : "false"),
                  [&] {
                    NDArray want = ref::reduce(x.r, kAxisSets[ai], keep, row.out(dt),
                                               [&](const Vals& v) { return row.f(v, dt); });
                    check_tensor(row.op(x.t, to_axes(kAxisSets[ai]), keep), want);
                  });
      }
    }
}

BOOST_AUTO_TEST_CASE(reduce_shapes_and_defaults) {
  auto x = Tensor::arange(24).reshape({2, 3, 4});
  BOOST_TEST(x.sum().shape() == Shape{});              // np.arange(24).reshape(2,3,4).sum().shape == ()
  BOOST_TEST(x.sum().item<int64_t>() == 276);           // 23*24/2
  BOOST_TEST(x.sum(1).shape() == (Shape{2, 4}));
  BOOST_TEST(x.sum(1, true).shape() == (Shape{2, 1, 4}));
  BOOST_TEST(x.sum(ravel::all_axes, true).shape() == (Shape{1, 1, 1}));  // every axis, spelled out
  BOOST_TEST(x.sum({}, true).shape() == x.shape());  // {} is no axes, as numpy axis=()
  BOOST_TEST(x.max(-1).to_vector<int64_t>() == (std::vector<int64_t>{3, 7, 11, 15, 19, 23}),
             boost::test_tools::per_element());
  // np.arange(24).reshape(2,3,4).min(axis=(0,2)) -> [0 4 8]
  BOOST_TEST(x.min({0, 2}).to_vector<int64_t>() == (std::vector<int64_t>{0, 4, 8}), boost::test_tools::per_element());
  // bool sum is an i64 count: np.array([True, False, True]).sum() -> 2 (int64)
  std::vector<uint8_t> b = {1, 0, 1};
  auto bs = Tensor::from_data(b.data(), DType::Bool, {3}).sum();
  BOOST_TEST((bs.dtype() == DType::I64));
  BOOST_TEST(bs.item<int64_t>() == 2);
  // np.var([1., 2., 3., 4.]) == 1.25; ddof=1 -> 1.6666666666666667
  auto v = Tensor::from_vector<double>({1, 2, 3, 4}, {4});
  BOOST_TEST(v.var(ravel::all_axes, false, 0).item<double>() == 1.25, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(v.var().item<double>() == 5.0 / 3.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(v.mean().item<double>() == 2.5);
  // Reducing a size-0 axis gives the identity: np.zeros((0, 3)).sum(0) -> [0. 0. 0.], prod -> 1
  auto e = Tensor::zeros({0, 3});
  BOOST_TEST(e.sum(0).to_vector<float>() == (std::vector<float>{0, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(e.prod(0).to_vector<float>() == (std::vector<float>{1, 1, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(max_propagates_nan) {
  // np.max([1., nan, 3.]) -> nan (the ABI's MAX reduce: "NaN propagates")
  auto x = Tensor::from_vector<float>({1.f, std::nanf(""), 3.f}, {3});
  BOOST_TEST(std::isnan(x.max().item<float>()));
}

// Integer sums and products accumulate in i64 (NumPy's and PyTorch's
// accumulator); an i32 sum past 2^31 wrapped silently before.
BOOST_AUTO_TEST_CASE(integer_sums_accumulate_in_i64) {
  const Tensor big = Tensor::full({3}, 2147483647.0, DType::I32);
  const Tensor s = big.sum();
  BOOST_TEST((s.dtype() == DType::I64));
  BOOST_TEST(s.item<int64_t>() == int64_t{3} * 2147483647);
  BOOST_TEST(big.sum({0}, true).shape() == (Shape{1}));
  BOOST_TEST(Tensor::full({2}, 65536.0, DType::I32).prod().item<int64_t>() == int64_t{1} << 32);
  BOOST_TEST(Tensor::full({4}, 200.0, DType::U8).sum().item<int64_t>() == 800);  // u8 no longer wraps at 256
  BOOST_TEST((Tensor::full({3}, 1.0, DType::Bool).sum().dtype() == DType::I64));
  const Tensor c = Tensor::full({3}, 2147483647.0, DType::I32).cumsum(0);
  BOOST_TEST((c.dtype() == DType::I64));
  BOOST_TEST(c.to_vector<int64_t>() == (std::vector<int64_t>{2147483647, 4294967294, 6442450941}));
  BOOST_TEST((Tensor::full({2}, 1.5, DType::F32).sum().dtype() == DType::F32));  // floats keep theirs
}

// A C++ scalar an integer tensor cannot hold is a float scalar (PyTorch: i32 + 3e9 is f32), not
// a wrapped integer; one it can hold keeps the tensor's dtype.
BOOST_AUTO_TEST_CASE(out_of_range_scalars_promote_to_float) {
  const Tensor i = Tensor::from_vector<int32_t>({1, -2}, {2});
  const Tensor a = i + 3e9;
  BOOST_TEST((a.dtype() == DType::F32));
  BOOST_TEST(a.to_vector<float>() == (std::vector<float>{3e9f + 1, 3e9f - 2}));
  BOOST_TEST(((i + 2147483647.0).dtype() == DType::I32));
  BOOST_TEST(((i * -2147483648.0).dtype() == DType::I32));
  BOOST_TEST(((i - 2147483649.0).dtype() == DType::F32));
  const Tensor l = Tensor::from_vector<int64_t>({1}, {1});
  BOOST_TEST(((l + 9223372036854775808.0).dtype() == DType::F32));  // 2^63
  BOOST_TEST(((l + 4611686018427387904.0).dtype() == DType::I64));  // 2^62
  const Tensor u = Tensor::from_vector<uint8_t>({5}, {1});
  BOOST_TEST(((u - 1.0).dtype() == DType::U8));   // wraps as PyTorch's u8 does
  BOOST_TEST(((u + -1.0).dtype() == DType::U8));
  BOOST_TEST(((u + 256.0).dtype() == DType::F32));
  BOOST_TEST((u + 256.0).item<float>() == 261.0f);
  const Tensor b = Tensor::from_vector<bool>({true}, {1});
  BOOST_TEST(((b + 1e19).dtype() == DType::F32));
  BOOST_TEST(((b + 2.0).dtype() == DType::I64));
}
