// sort, argsort and topk against std::stable_sort with NumPy's order (NaN after +inf), on every
// length from 1 to 33 (every padding to a power of two), repeated values, NaN, infinities, signed
// zeros, several dtypes, axes, views and both directions.
#include "common.hpp"
#include "expect_error.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

using namespace rtest;

namespace {

// NumPy's ascending order: numbers by value, NaN after every number. Descending is its mirror
// (NaN first), which is also PyTorch's descending order; ties keep their order either way.
bool value_before(double a, double b, bool descending) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (descending) return !nb && (na || a > b);
  return !na && (nb || a < b);
}

// The stable sort of each row along `axis`: values and original indices.
std::pair<NDArray, NDArray> naive_sort(const NDArray& x, int64_t axis, bool descending) {
  NDArray vals(x.shape, x.dtype), idx(x.shape, DType::I64);
  Shape outer = x.shape;
  const int64_t n = x.shape[axis];
  outer[axis] = 1;
  ref::for_each_index(outer, [&](const ref::Index& o) {
    std::vector<int64_t> perm(static_cast<size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    auto at = [&](int64_t j) {
      ref::Index i(o);
      i[axis] = j;
      return x[i];
    };
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return value_before(at(a), at(b), descending); });
    for (int64_t j = 0; j < n; ++j) {
      ref::Index i(o);
      i[axis] = j;
      vals[i] = at(perm[j]);
      idx[i] = static_cast<double>(perm[j]);
    }
  });
  return {vals, idx};
}

// Rows drawn from a small set so that ties are frequent, with NaN, infinities and signed zeros.
NDArray sort_input(const Shape& s, DType dt, uint64_t seed) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> floats = {nan, -inf, inf, -0.0, 0.0, 1.5, -2.25, 3.0, 1.5, -7.0, nan, 0.5};
  NDArray a(s, dt);
  uint64_t st = seed * 6364136223846793005ull + 1;
  for (double& v : a.v) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t r = st >> 33;
    v = ravel::is_float(dt) ? floats[r % floats.size()] : ref::convert(static_cast<double>(r % 7) - (dt == DType::U8 ? 0 : 3), dt);
  }
  return a;
}

void check_exact(const Tensor& got, const NDArray& want) {
  check_tensor(got, want, Tol{0, 0});
  if (!ravel::is_float(want.dtype) || got.shape() != want.shape) return;
  std::vector<double> g = values(got);  // signed zeros travel with their index
  int bad = 0;
  for (size_t k = 0; k < g.size(); ++k) bad += std::signbit(g[k]) != std::signbit(want.v[k]) && !std::isnan(g[k]);
  BOOST_CHECK_MESSAGE(bad == 0, bad << " values have the wrong sign of zero");
}

}  // namespace

BOOST_AUTO_TEST_CASE(sort_every_length_against_stable_sort) {
  uint64_t seed = 1;
  for (DType dt : {DType::F32, DType::F64, DType::I32})
    for (int64_t n = 1; n <= 33; ++n)
      for (bool desc : {false, true})
        guarded(std::string("sort dtype=") + ravel::dtype_name(dt) + " n=" + std::to_string(n) + (desc ? " descending" : ""), [&] {
          NDArray x = sort_input({3, n}, dt, ++seed);
          auto [want_v, want_i] = naive_sort(x, 1, desc);
          auto [v, i] = to_tensor(x).sort(-1, desc);
          check_exact(v, want_v);
          check_exact(i, want_i);
          check_exact(to_tensor(x).argsort(1, desc), want_i);
        });
}

BOOST_AUTO_TEST_CASE(sort_axes_views_and_dtypes) {
  uint64_t seed = 1000;
  for (DType dt : {DType::Bool, DType::U8, DType::I64, DType::F32})
    for (ViewKind k : kAllKinds)
      for (int64_t axis : {0, 1, 2})
        guarded(std::string("sort dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k) + " axis=" + std::to_string(axis), [&] {
          Built x = build(k, {3, 5, 4}, dt, Domain::Any, ++seed);
          for (bool desc : {false, true}) {
            auto [want_v, want_i] = naive_sort(x.r, axis, desc);
            auto [v, i] = x.t.sort(axis, desc);
            check_exact(v, want_v);
            check_exact(i, want_i);
          }
        });
  guarded("0-d and empty", [&] {
    auto [v, i] = Tensor::scalar(2.5).sort();
    BOOST_TEST(v.item<float>() == 2.5f);
    BOOST_TEST(i.item<int64_t>() == 0);
    auto [ve, ie] = Tensor::zeros({0, 3}).sort(0);
    BOOST_TEST(ve.shape() == (Shape{0, 3}));
    BOOST_TEST((ie.dtype() == DType::I64));
  });
  // numpy.sort([3., nan, 1., -inf, nan, 0.]) -> [-inf, 0., 1., 3., nan, nan];
  // numpy.argsort(..., kind="stable") -> [3, 5, 2, 0, 1, 4].
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto [v, i] = Tensor::from_vector<double>({3, nan, 1, -inf, nan, 0}, {6}).sort();
  std::vector<double> vv = v.to_vector<double>();
  BOOST_TEST(vv[0] == -inf);
  BOOST_TEST(vv[3] == 3.0);
  BOOST_TEST((std::isnan(vv[4]) && std::isnan(vv[5])));
  BOOST_TEST(i.to_vector<int64_t>() == (std::vector<int64_t>{3, 5, 2, 0, 1, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(topk_against_stable_sort) {
  uint64_t seed = 2000;
  for (DType dt : {DType::F32, DType::I32})
    for (int64_t n : {1, 5, 8, 13})
      for (bool largest : {true, false})
        for (int64_t axis : {0, 1})
          guarded(std::string("topk dtype=") + ravel::dtype_name(dt) + " n=" + std::to_string(n) + (largest ? " largest" : " smallest") +
                      " axis=" + std::to_string(axis),
                  [&] {
                    Shape s = axis == 0 ? Shape{n, 3} : Shape{3, n};
                    NDArray x = sort_input(s, dt, ++seed);
                    auto [sv, si] = naive_sort(x, axis, largest);
                    for (int64_t k : {int64_t{0}, int64_t{1}, n / 2, n}) {
                      Shape ks = s;
                      ks[axis] = k;
                      std::vector<std::pair<int64_t, int64_t>> keep = {{0, ks[0]}, {0, ks[1]}};
                      NDArray want_v(ks, dt), want_i(ks, DType::I64);
                      ref::for_each_index(ks, [&](const ref::Index& i) { want_v[i] = sv[i], want_i[i] = si[i]; });
                      auto [v, i] = to_tensor(x).topk(k, axis, largest);
                      check_exact(v, want_v);
                      check_exact(i, want_i);
                    }
                  });
  // topk([1, 3, 2, 3], 2): values [3, 3]; of the tied indices the lower comes first (Ravel's
  // documented order: torch.topk leaves the order of ties unspecified).
  auto [v, i] = Tensor::from_vector<float>({1, 3, 2, 3}, {4}).topk(2);
  BOOST_TEST(v.to_vector<float>() == (std::vector<float>{3, 3}), boost::test_tools::per_element());
  BOOST_TEST(i.to_vector<int64_t>() == (std::vector<int64_t>{1, 3}), boost::test_tools::per_element());
  rtest::expect_error<ravel::ValueError>("k too large", [&] { Tensor::zeros({2, 3}).topk(4); },
                                         {"topk: k = 4", "axis 1", "0 <= k <= 3"});
  rtest::expect_error<ravel::AxisError>("bad axis", [&] { Tensor::zeros({2, 3}).sort(2); }, {"sort"});
}
