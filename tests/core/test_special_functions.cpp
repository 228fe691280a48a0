// expm1, log1p, erf, asin, acos, atan, atan2, sinh, cosh, asinh, acosh, atanh against the C
// library in double (std::expm1 ... std::atanh, glibc's, within an ulp of the true values), on
// sweeps over each domain and on edge values. f32 results are measured in ulps of the f32 result
// (bounds below, stated per function); f64 results to a relative bound. Their derivatives are
// checked against finite differences in tests/autodiff/test_gradcheck_composite_ops.cpp.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;

namespace {

using Ref = std::function<double(double)>;
using Op = std::function<Tensor(const Tensor&)>;

// Spacing of f32 numbers at |r| (an ulp of the f32 result).
double ulp32(double r) {
  float a = std::fabs(float(r));
  if (!std::isfinite(a)) return 1;
  return double(std::nextafter(a, INFINITY)) - double(a);
}

// `n` points spread over [lo, hi]: uniform, plus a geometric ladder toward each end and toward 0
// when 0 is inside (where accuracy near 0 is the point of expm1, log1p, sinh, ...).
std::vector<double> points(double lo, double hi, int n = 3000) {
  std::vector<double> v;
  for (int k = 0; k <= n; ++k) v.push_back(lo + (hi - lo) * k / n);
  for (int e = 1; e <= 40; ++e) {
    double d = std::ldexp(1.0, -e);
    if (lo < 0 && hi > 0) v.push_back(d), v.push_back(-d);
    v.push_back(lo + (hi - lo) * d), v.push_back(hi - (hi - lo) * d);
  }
  return v;
}

struct Row {
  std::string name;
  Op op;
  Ref ref;
  double lo, hi;
  double f32_ulps;  // max error of the f32 result, in its ulps
  double f32_abs;   // ... or this absolute error, whichever is larger (erf's 1e-7 is absolute)
  double f64_rel;   // max relative error in f64 (plus f64_rel absolute, for results near 0)
};

void check_row(const Row& r) {
  std::vector<double> in = points(r.lo, r.hi);
  BOOST_TEST_CONTEXT(r.name) {
    // f32: inputs rounded to f32 first; the reference evaluates the f32 input in double.
    std::vector<float> xf(in.begin(), in.end());
    std::vector<float> yf = r.op(Tensor::from_vector<float>(xf, {int64_t(xf.size())})).to_vector<float>();
    // A point passes within f32_ulps ulps or within f32_abs absolutely; the worst of the points
    // outside the absolute bound is reported.
    double worst = 0, worst_at = 0, worst_abs = 0;
    for (size_t k = 0; k < xf.size(); ++k) {
      double want = r.ref(double(xf[k]));
      double err = std::fabs(double(yf[k]) - want);
      if (!(err <= worst_abs)) worst_abs = err;
      double scaled = err <= r.f32_abs ? 0 : err / ulp32(want);
      if (!(scaled <= worst)) worst = scaled, worst_at = xf[k];
    }
    BOOST_TEST_MESSAGE(r.name << " f32: max " << worst << " ulps at x = " << worst_at << ", max absolute error " << worst_abs);
    BOOST_CHECK_MESSAGE(worst <= r.f32_ulps, r.name << " f32: " << worst << " ulps at x = " << worst_at << " (bound " << r.f32_ulps << ")");
    worst_at = 0;
    std::vector<double> yd = r.op(Tensor::from_vector<double>(in, {int64_t(in.size())})).to_vector<double>();
    double worst_rel = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      double want = r.ref(in[k]);
      double rel = std::fabs(yd[k] - want) / (std::fabs(want) + 1e-300);
      if (!(rel <= worst_rel)) worst_rel = rel, worst_at = in[k];
    }
    BOOST_TEST_MESSAGE(r.name << " f64: max relative error " << worst_rel << " at x = " << worst_at);
    BOOST_CHECK_MESSAGE(worst_rel <= r.f64_rel, r.name << " f64: relative error " << worst_rel << " at x = " << worst_at);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(accuracy_against_the_c_library) {
  auto u = [](Tensor (Tensor::*m)() const) { return Op([m](const Tensor& x) { return (x.*m)(); }); };
  auto d = [](double (*f)(double)) { return Ref(f); };
  const std::vector<Row> rows = {
      // Measured on tbb_cpu (f32 ulps / f64 relative): expm1 near 0 2.7 / 4.9e-16, expm1 58 /
      // 5.6e-15 (at x = 64: beyond |x| ~ 1 expm1, sinh and cosh have e^x's accuracy, and exp is
      // exp2(x log2 e), whose rounded product costs about |x| ulps), log1p 2.1 / 3.3e-16, erf
      // 9.6e-8 absolute / 3.5e-16, atan 1.1 / 2.2e-16, asin 2.0, acos 1.8, sinh 4.3, cosh 3.9,
      // sinh and cosh to 88: 62 / 6.2e-15, asinh 2.1, acosh 2.0, atanh 2.9 (f64 all below 5e-16).
      {"expm1 near 0", u(&Tensor::expm1), d(std::expm1), -1, 1, 3, 0, 1e-15},
      {"expm1", u(&Tensor::expm1), d(std::expm1), -30, 80, 64, 0, 1e-14},
      {"log1p", u(&Tensor::log1p), d(std::log1p), -0.999, 1e6, 3, 0, 1e-15},
      {"erf", u(&Tensor::erf), d(std::erf), -6, 6, 2, 1e-7, 1e-15},
      {"atan", u(&Tensor::atan), d(std::atan), -1e4, 1e4, 2, 0, 1e-15},
      {"atan near 0", u(&Tensor::atan), d(std::atan), -3, 3, 2, 0, 1e-15},
      {"asin", u(&Tensor::asin), d(std::asin), -1, 1, 3, 0, 1e-15},
      {"acos", u(&Tensor::acos), d(std::acos), -1, 1, 3, 0, 1e-15},
      {"sinh", u(&Tensor::sinh), d(std::sinh), -5, 5, 5, 0, 1e-15},
      {"sinh large", u(&Tensor::sinh), d(std::sinh), -88, 88, 64, 0, 1e-14},
      {"cosh", u(&Tensor::cosh), d(std::cosh), -5, 5, 5, 0, 1e-15},
      {"cosh large", u(&Tensor::cosh), d(std::cosh), -88, 88, 64, 0, 1e-14},
      {"asinh", u(&Tensor::asinh), d(std::asinh), -1e3, 1e3, 3, 0, 1e-15},
      {"asinh huge", u(&Tensor::asinh), d(std::asinh), -1e30, 1e30, 3, 0, 1e-15},
      {"acosh", u(&Tensor::acosh), d(std::acosh), 1, 1e3, 3, 0, 1e-15},
      {"acosh huge", u(&Tensor::acosh), d(std::acosh), 1, 1e30, 3, 0, 1e-15},
      {"atanh", u(&Tensor::atanh), d(std::atanh), -0.9999, 0.9999, 3, 0, 1e-15},
  };
  for (const Row& r : rows) check_row(r);
}

BOOST_AUTO_TEST_CASE(edge_values) {
  const double inf = INFINITY, nan = NAN;
  struct Edge { std::string name; Op op; std::vector<double> in; };
  auto u = [](Tensor (Tensor::*m)() const) { return Op([m](const Tensor& x) { return (x.*m)(); }); };
  const std::vector<std::pair<Edge, Ref>> edges = {
      {{"expm1", u(&Tensor::expm1), {0.0, -0.0, inf, -inf, nan, 1e-30, -1e-30, 1000, -1000}}, Ref(static_cast<double (*)(double)>(std::expm1))},
      {{"log1p", u(&Tensor::log1p), {0.0, -0.0, inf, -1, -2, nan, 1e-30, -1e-30, 1e300}}, Ref(static_cast<double (*)(double)>(std::log1p))},
      {{"erf", u(&Tensor::erf), {0.0, -0.0, inf, -inf, nan, 1e-30, 1.0, -1.0, 30}}, Ref(static_cast<double (*)(double)>(std::erf))},
      {{"atan", u(&Tensor::atan), {0.0, -0.0, inf, -inf, nan, 1e-30, 1e300}}, Ref(static_cast<double (*)(double)>(std::atan))},
      {{"asin", u(&Tensor::asin), {0.0, -0.0, 1, -1, 1.5, -1.5, nan}}, Ref(static_cast<double (*)(double)>(std::asin))},
      {{"acos", u(&Tensor::acos), {0.0, -0.0, 1, -1, 1.5, -1.5, nan}}, Ref(static_cast<double (*)(double)>(std::acos))},
      {{"sinh", u(&Tensor::sinh), {0.0, -0.0, inf, -inf, nan, 1e-30, 1000}}, Ref(static_cast<double (*)(double)>(std::sinh))},
      {{"cosh", u(&Tensor::cosh), {0.0, -0.0, inf, -inf, nan, 1000}}, Ref(static_cast<double (*)(double)>(std::cosh))},
      {{"asinh", u(&Tensor::asinh), {0.0, -0.0, inf, -inf, nan, 1e-30}}, Ref(static_cast<double (*)(double)>(std::asinh))},
      {{"acosh", u(&Tensor::acosh), {1.0, 0.5, -3, inf, nan}}, Ref(static_cast<double (*)(double)>(std::acosh))},
      {{"atanh", u(&Tensor::atanh), {0.0, -0.0, 1, -1, 1.5, -2, nan, 1e-30}}, Ref(static_cast<double (*)(double)>(std::atanh))},
  };
  for (const auto& [e, ref] : edges) {
    BOOST_TEST_CONTEXT(e.name) {
      std::vector<double> got = e.op(Tensor::from_vector<double>(e.in, {int64_t(e.in.size())})).to_vector<double>();
      for (size_t k = 0; k < e.in.size(); ++k) {
        double want = ref(e.in[k]);
        bool ok = std::isnan(want) ? std::isnan(got[k])
                                   : (got[k] == want || std::fabs(got[k] - want) <= 4e-16 * std::fabs(want)) &&
                                         std::signbit(got[k]) == std::signbit(want);
        BOOST_CHECK_MESSAGE(ok, e.name << "(" << e.in[k] << ") = " << got[k] << ", want " << want);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(atan2_quadrants_zeros_and_infinities) {
  const double inf = INFINITY;
  std::vector<double> vals = {0.0, -0.0, 1.0, -1.0, 2.5, -0.3, 1e-300, inf, -inf, NAN};
  std::vector<double> ys, xs;
  for (double y : vals)
    for (double x : vals) ys.push_back(y), xs.push_back(x);
  const int64_t n = int64_t(ys.size());
  for (DType t : {DType::F64, DType::F32}) {
    Tensor y = Tensor::from_vector<double>(ys, {n}).cast(t), x = Tensor::from_vector<double>(xs, {n}).cast(t);
    std::vector<double> got = y.atan2(x).to_vector<double>();
    for (int64_t k = 0; k < n; ++k) {
      double yk = t == DType::F32 ? double(float(ys[k])) : ys[k], xk = t == DType::F32 ? double(float(xs[k])) : xs[k];
      double want = std::atan2(yk, xk);
      if (t == DType::F32) want = double(float(want));
      double tol = t == DType::F32 ? 2 * ulp32(want) : 4e-16 * std::fabs(want);
      bool ok = std::isnan(want) ? std::isnan(got[k]) : std::fabs(got[k] - want) <= tol && std::signbit(got[k]) == std::signbit(want);
      BOOST_CHECK_MESSAGE(ok, dtype_name(t) << " atan2(" << yk << ", " << xk << ") = " << got[k] << ", want " << want);
    }
  }
  // Broadcasting, and integers computing in f32 (atan2(1, [1, -1]) = pi/4, 3pi/4).
  Tensor r = Tensor::from_vector<int32_t>({1}, {1}).atan2(Tensor::from_vector<int32_t>({1, -1}, {2}));
  BOOST_CHECK(r.dtype() == DType::F32);
  std::vector<float> rv = r.to_vector<float>();
  BOOST_CHECK_CLOSE(rv[0], float(M_PI / 4), 1e-5);
  BOOST_CHECK_CLOSE(rv[1], float(3 * M_PI / 4), 1e-5);
}

BOOST_AUTO_TEST_CASE(integers_compute_in_f32) {
  Tensor i = Tensor::from_vector<int64_t>({0, 1, 2}, {3});
  for (const Tensor& y : {i.erf(), i.expm1(), i.log1p(), i.atan(), i.sinh(), i.cosh(), i.asinh()}) BOOST_CHECK(y.dtype() == DType::F32);
  std::vector<float> e = i.erf().to_vector<float>();
  BOOST_CHECK_CLOSE(e[1], float(std::erf(1.0)), 1e-5);
}
