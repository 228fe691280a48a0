// floor, ceil, round, sign, clamp/clip and remainder against loops written here over the C library
// (std::floor, std::ceil, std::nearbyint in the default round-to-nearest-even mode), on edge values
// (halves, the last fractional floats below 2^23 / 2^52, signed zeros, subnormals, infinities,
// NaN) and on a sweep of random values of every magnitude, in f32 and f64; and their
// derivatives at the kinks, as torch defines them.
#include <boost/test/unit_test.hpp>

#include <cfenv>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "ravel/autodiff.hpp"
#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;

namespace {

// Same value, including the sign of zero; any NaN equals any NaN.
bool same(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

std::vector<double> edge_values(DType t) {
  const double big = t == DType::F32 ? 8388608.0 : 4503599627370496.0;  // 2^23, 2^52
  const double below = t == DType::F32 ? double(std::nextafter(8388608.0f, 0.0f)) : std::nextafter(big, 0.0);  // x.5
  const double sub = t == DType::F32 ? double(std::numeric_limits<float>::denorm_min()) : std::numeric_limits<double>::denorm_min();
  const double almost_half = t == DType::F32 ? double(std::nextafter(0.5f, 0.0f)) : std::nextafter(0.5, 0.0);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -3.5, 0.25, -0.75, 1.0, -1.0,
                           almost_half, -almost_half, 1 - almost_half, 2.4999, 2.5001, -2.5001,
                           below, -below, below - 1, -(below - 1), big, -big, big + 2, -(big + 2),
                           1e30, -1e30, sub, -sub, 1.1754944e-38, inf, -inf, std::nan("")};
  return v;
}

// Random values in [-2^e, 2^e] for e from -3 to 30, so every rounding position is reached.
std::vector<double> sweep(DType t) {
  std::vector<double> u = Tensor::rand({4000}, 5, DType::F64).to_vector<double>();
  std::vector<double> v;
  for (size_t k = 0; k < u.size(); ++k) {
    double e = std::ldexp(1.0, int(k % 34) - 3);
    double x = (2 * u[k] - 1) * e;
    if (k % 7 == 0) x = std::round(x * 4) / 4;  // many exact quarters and halves
    v.push_back(t == DType::F32 ? double(float(x)) : x);
  }
  return v;
}

template <class F>
void check_unary(const char* name, DType t, const std::vector<double>& in, F ref, const std::function<Tensor(const Tensor&)>& op) {
  BOOST_TEST_CONTEXT(name << " " << ravel::dtype_name(t)) {
    Tensor x = Tensor::from_vector<double>(in, {int64_t(in.size())}).cast(t);
    Tensor y = op(x);
    BOOST_CHECK(y.dtype() == t);
    std::vector<double> got = y.to_vector<double>();
    int bad = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      double want = t == DType::F32 ? double(ref(float(in[k]))) : ref(in[k]);
      if (!same(got[k], want) && bad++ < 8) BOOST_ERROR(name << "(" << in[k] << ") = " << got[k] << ", want " << want);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(floor_ceil_round_edges_and_sweep) {
  BOOST_REQUIRE(std::fegetround() == FE_TONEAREST);  // std::nearbyint is then half-to-even
  for (DType t : {DType::F32, DType::F64}) {
    for (const auto& in : {edge_values(t), sweep(t)}) {
      check_unary("floor", t, in, [](auto v) { return std::floor(v); }, [](const Tensor& x) { return x.floor(); });
      check_unary("ceil", t, in, [](auto v) { return std::ceil(v); }, [](const Tensor& x) { return x.ceil(); });
      check_unary("round", t, in, [](auto v) { return std::nearbyint(v); }, [](const Tensor& x) { return x.round(); });
    }
  }
}

BOOST_AUTO_TEST_CASE(rounding_integers_is_the_identity) {
  Tensor i = Tensor::from_vector<int32_t>({-3, 0, 7}, {3});
  for (const Tensor& y : {i.floor(), i.ceil(), i.round()}) {
    BOOST_CHECK(y.dtype() == DType::I32);
    BOOST_CHECK((y.to_vector<int32_t>() == std::vector<int32_t>{-3, 0, 7}));
  }
}

BOOST_AUTO_TEST_CASE(sign_values) {
  std::vector<double> in = {-2.5, -0.0, 0.0, 1e-40, -1e-300, 3.0, INFINITY, -INFINITY, NAN};
  auto ref = [](auto v) -> decltype(v) { return std::isnan(v) ? v : v > 0 ? 1 : v < 0 ? -1 : 0; };
  for (DType t : {DType::F32, DType::F64})
    check_unary("sign", t, in, ref, [](const Tensor& x) { return x.sign(); });
  Tensor i = Tensor::from_vector<int64_t>({-5, 0, 9}, {3});
  BOOST_CHECK((i.sign().to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 1}));
  BOOST_CHECK(i.sign().dtype() == DType::I64);
}

BOOST_AUTO_TEST_CASE(rounding_derivatives_are_zero) {
  Tensor x = Tensor::from_vector<double>({-1.5, -0.3, 0.0, 0.5, 2.7}, {5});
  for (auto f : std::vector<ravel::UnaryFn>{[](const Tensor& v) { return v.floor().sum(); },
                                            [](const Tensor& v) { return v.ceil().sum(); },
                                            [](const Tensor& v) { return v.round().sum(); },
                                            [](const Tensor& v) { return v.sign().sum(); }}) {
    std::vector<double> g = ravel::grad(f)(x).to_vector<double>();
    for (double v : g) BOOST_CHECK_EQUAL(v, 0.0);
  }
}

BOOST_AUTO_TEST_CASE(clamp_values_against_min_of_max) {
  std::vector<double> xs = {-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, INFINITY, -INFINITY, NAN};
  Tensor x = Tensor::from_vector<double>(xs, {10});
  auto ref = [](double v, double lo, double hi) { return std::isnan(v) ? v : std::min(std::max(v, lo), hi); };
  std::vector<double> got = x.clamp(-1.0, 1.0).to_vector<double>();
  for (size_t k = 0; k < xs.size(); ++k) BOOST_CHECK(same(got[k], ref(xs[k], -1.0, 1.0)));
  // min > max: every element is max (torch.clamp).
  got = x.clip(2.0, -1.0).to_vector<double>();
  for (size_t k = 0; k + 1 < xs.size(); ++k) BOOST_CHECK_EQUAL(got[k], -1.0);
  // One-sided.
  got = x.clamp(0.0, std::nullopt).to_vector<double>();
  for (size_t k = 0; k + 1 < xs.size(); ++k) BOOST_CHECK_EQUAL(got[k], std::max(xs[k], 0.0));
  got = x.clamp(std::nullopt, 0.0).to_vector<double>();
  for (size_t k = 0; k + 1 < xs.size(); ++k) BOOST_CHECK_EQUAL(got[k], std::min(xs[k], 0.0));
  BOOST_CHECK(std::isnan(x.clamp(0.0, std::nullopt).to_vector<double>()[9]));
  // A NaN bound gives NaN.
  for (double v : x.clamp(std::nan(""), 1.0).to_vector<double>()) BOOST_CHECK(std::isnan(v));
  BOOST_CHECK_THROW(x.clamp(std::nullopt, std::nullopt), ravel::ValueError);
  BOOST_CHECK_THROW(x.clamp(Tensor(), Tensor()), ravel::ValueError);
}

BOOST_AUTO_TEST_CASE(clamp_tensor_bounds_broadcast_and_integers) {
  // x [2, 3], min [3] per column, max [2, 1] per row.
  std::vector<double> xs = {-5, 0, 5, 1, 2, 3}, lo = {-1, 1, 0}, hi = {2, 2.5};
  Tensor x = Tensor::from_vector<double>(xs, {2, 3});
  Tensor y = x.clamp(Tensor::from_vector<double>(lo, {3}), Tensor::from_vector<double>(hi, {2, 1}));
  BOOST_REQUIRE((y.shape() == ravel::Shape{2, 3}));
  std::vector<double> got = y.to_vector<double>();
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) BOOST_CHECK_EQUAL(got[r * 3 + c], std::min(std::max(xs[r * 3 + c], lo[c]), hi[r]));
  Tensor i = Tensor::from_vector<int32_t>({-7, 3, 9}, {3});
  Tensor ic = i.clamp(0.0, 5.0);
  BOOST_CHECK(ic.dtype() == DType::I32);
  BOOST_CHECK((ic.to_vector<int32_t>() == std::vector<int32_t>{0, 3, 5}));
  // A float bound promotes an integer tensor (torch.result_type).
  BOOST_CHECK(i.clamp(0.5, std::nullopt).dtype() == DType::F32);
}

// torch's clamp_backward, written out for scalars: (dx, dmin, dmax) for cotangent 1.
BOOST_AUTO_TEST_CASE(clamp_derivatives_as_torch) {
  struct Case { double x, lo, hi, dx, dlo, dhi; };
  const std::vector<Case> cases = {
      {0.5, 0, 1, 1, 0, 0}, {0, 0, 1, 1, 0, 0},   {1, 0, 1, 1, 0, 0},    // inside and on both bounds
      {-1, 0, 1, 0, 1, 0},  {2, 0, 1, 0, 0, 1},                          // below, above
      {0.5, 1, 0, 0, 0, 1}, {-1, 1, 0, 0, 0, 1},  {2, 1, 0, 0, 0, 1},    // min > max: max's
      {-1, 1, 1, 0, 0, 0},  {1, 1, 1, 1, 0, 0},   {2, 1, 1, 0, 0, 1},    // min == max
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT("x=" << c.x << " min=" << c.lo << " max=" << c.hi) {
      // Buffers, not Tensor::scalar: equal constants may be one node, which would merge gradients.
      auto leaf = [](double v) { return Tensor::from_vector<double>({v}, {}); };
      Tensor x = leaf(c.x), lo = leaf(c.lo), hi = leaf(c.hi);
      std::vector<Tensor> g = ravel::gradients(x.clamp(lo, hi), {x, lo, hi});
      BOOST_CHECK_EQUAL(g[0].item<double>(), c.dx);
      BOOST_CHECK_EQUAL(g[1].item<double>(), c.dlo);
      BOOST_CHECK_EQUAL(g[2].item<double>(), c.dhi);
    }
  }
  // Scalar bounds: the derivative passes on [min, max] inclusive.
  Tensor x = Tensor::from_vector<double>({-2, -1, 0, 1, 2}, {5});
  std::vector<double> g = ravel::grad([](const Tensor& v) { return v.clamp(-1.0, 1.0).sum(); })(x).to_vector<double>();
  BOOST_CHECK((g == std::vector<double>{0, 1, 1, 1, 0}));
}

BOOST_AUTO_TEST_CASE(remainder_has_the_sign_of_the_divisor) {
  std::vector<double> as = {5.5, -5.5, 5.5, -5.5, 4, -4, 0.75, -0.75, 7, 1e-3}, bs = {2, 2, -2, -2, 2, -2, 0.5, 0.5, 0.25, -3};
  for (DType t : {DType::F32, DType::F64}) {
    Tensor a = Tensor::from_vector<double>(as, {10}).cast(t), b = Tensor::from_vector<double>(bs, {10}).cast(t);
    std::vector<double> got = a.remainder(b).to_vector<double>();
    for (size_t k = 0; k < as.size(); ++k) {
      long double q = std::floor((long double)as[k] / bs[k]);
      double want = double((long double)as[k] - q * bs[k]);  // a - b floor(a / b), Python's %
      double tol = t == DType::F32 ? 1e-6 : 1e-15;
      BOOST_CHECK_MESSAGE(std::fabs(got[k] - want) <= tol, as[k] << " rem " << bs[k] << " = " << got[k] << ", want " << want);
      if (got[k] != 0) BOOST_CHECK_EQUAL(std::signbit(got[k]), std::signbit(bs[k]));
    }
  }
  // x rem 0 is NaN for floats.
  BOOST_CHECK(std::isnan(Tensor::scalar(3.0).remainder(0.0).item<float>()));
  // Integers: ((a % b) + b) % b, exact; and a scalar divisor.
  std::vector<int64_t> ia = {7, -7, 7, -7, 0, -9}, ib = {3, 3, -3, -3, 5, 4};
  Tensor r = Tensor::from_vector<int64_t>(ia, {6}).remainder(Tensor::from_vector<int64_t>(ib, {6}));
  BOOST_CHECK(r.dtype() == DType::I64);
  std::vector<int64_t> got = r.to_vector<int64_t>();
  for (size_t k = 0; k < ia.size(); ++k) BOOST_CHECK_EQUAL(got[k], ((ia[k] % ib[k]) + ib[k]) % ib[k]);
  BOOST_CHECK((Tensor::from_vector<int32_t>({-1, 4}, {2}).remainder(3).to_vector<int32_t>() == std::vector<int32_t>{2, 1}));
}

BOOST_AUTO_TEST_CASE(remainder_derivatives_as_torch) {
  // torch: d/da = 1, d/db = -floor(a / b).
  std::vector<double> as = {5.5, -5.5, 5.5, -5.5}, bs = {2, 2, -2, -2};
  Tensor a = Tensor::from_vector<double>(as, {4}), b = Tensor::from_vector<double>(bs, {4});
  std::vector<Tensor> g = ravel::gradients(a.remainder(b).sum(), {a, b});
  std::vector<double> ga = g[0].to_vector<double>(), gb = g[1].to_vector<double>();
  for (size_t k = 0; k < as.size(); ++k) {
    BOOST_CHECK_EQUAL(ga[k], 1.0);
    BOOST_CHECK_EQUAL(gb[k], -std::floor(as[k] / bs[k]));
  }
}
