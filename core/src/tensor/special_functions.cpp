// Special functions as composites: expm1, log1p, erf, the inverse trigonometric functions and the
// hyperbolic ones. Each is a formula over the primitives (so every backend runs it unchanged) with
// its derivative as a custom rule (Note [Custom derivatives]): the closed form, not the chain rule
// through range reductions and branches, so higher derivatives stay short and accurate too.
// Accuracy bounds are in docs/ops.md ("Composite operators") and checked in
// tests/core/test_special_functions.cpp.
#include <cmath>

#include "tensor/custom_vjp.hpp"
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

namespace {

Tensor sf_float(const Tensor& t) { return is_float(t.dtype()) ? t : t.cast(DType::F32); }
Tensor sf_c(const Tensor& like, double v) { return scalar_like(like, v); }

// Horner's rule, coefficients from the highest degree down (Cephes' polevl); sf_p1evl has an
// implied leading coefficient 1 (p1evl).
Tensor sf_polevl(const Tensor& z, std::initializer_list<double> c) {
  Tensor acc;
  for (double v : c) acc = acc.defined() ? acc.mul(z).add(sf_c(z, v)) : sf_c(z, v).expand(z.shape());
  return acc;
}
Tensor sf_p1evl(const Tensor& z, std::initializer_list<double> c) {
  Tensor acc = z;
  bool first = true;
  for (double v : c) {
    acc = first ? z.add(sf_c(z, v)) : acc.mul(z).add(sf_c(z, v));
    first = false;
  }
  return acc;
}

// |x| as where(x < 0, -x, x): keeps -0 as -0, so odd functions computed from it keep the sign of
// zero, and avoids MAX (the value, not the derivative, is used: every function here has a rule).
Tensor sf_abs(const Tensor& x) { return Tensor::where(x.lt(sf_c(x, 0.0)), x.neg(), x); }
// f(|x|) with x's sign: odd functions.
Tensor sf_odd(const Tensor& x, const Tensor& f_of_abs) { return Tensor::where(x.lt(sf_c(x, 0.0)), f_of_abs.neg(), f_of_abs); }

std::shared_ptr<const CustomRule> sf_rule(const char* name, std::function<Tensor(const Tensor& x, const Tensor& g)> d) {
  return std::make_shared<const CustomRule>(CustomRule{
      name, [d](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) { return std::vector<Tensor>{d(in[0], g)}; },
      true});
}

// The value computations, without rules (the functions below reuse them inside each other's
// formulas; only the public result carries a rule).
Tensor expm1_value(const Tensor& x) {
  // Kahan: u = e^x rounded; (u - 1) is exact near 1, and (u - 1) / log(u) is the accurate slope
  // of the chord through the rounded u, so (u - 1) * x / log(u) is accurate even where u - 1
  // alone has lost every digit (x = 1e-6).
  Tensor u = x.exp();
  Tensor um1 = u.sub(sf_c(x, 1.0));
  Tensor general = um1.mul(x.div(u.log()));
  Tensor inf = sf_c(x, INFINITY);
  Tensor y = Tensor::where(u.eq(inf), u, general);  // x above log(max float): inf / inf would be NaN
  y = Tensor::where(um1.eq(sf_c(x, -1.0)), um1, y);  // u == 0: -1 (x = -inf included)
  return Tensor::where(u.eq(sf_c(x, 1.0)), x, y);    // |x| below half an ulp of 1: x itself (-0 kept)
}

Tensor log1p_value(const Tensor& x) {
  // Kahan: u = 1 + x rounded; log(u) * x / (u - 1) corrects for the rounding of u.
  Tensor u = x.add(sf_c(x, 1.0));
  Tensor um1 = u.sub(sf_c(x, 1.0));
  Tensor general = u.log().mul(x.div(um1));
  Tensor y = Tensor::where(u.eq(sf_c(x, INFINITY)), u, general);
  return Tensor::where(um1.eq(sf_c(x, 0.0)), x, y);  // u == 1: x (-0 kept)
}

// Cephes atan (Moshier, public domain): |x| reduced to [0, 0.66] by atan(x) = pi/2 - atan(1/x)
// above tan(3pi/8) and pi/4 + atan((x-1)/(x+1)) above 0.66, then x + x^3 P(x^2)/Q(x^2) (peak
// relative error 2.6e-18 on the reduced range); MOREBITS is the part of pi/2 below f64's ulp.
Tensor atan_value(const Tensor& x) {
  constexpr double kT3P8 = 2.41421356237309504880, kMoreBits = 6.123233995736765886130E-17;
  Tensor a = sf_abs(x);
  Tensor big = a.gt(sf_c(x, kT3P8)), mid = a.gt(sf_c(x, 0.66));
  Tensor one = sf_c(x, 1.0);
  Tensor xr = Tensor::where(big, a.recip().neg(), Tensor::where(mid, a.sub(one).div(a.add(one)), a));
  Tensor base = Tensor::where(big, sf_c(x, M_PI_2), Tensor::where(mid, sf_c(x, M_PI_4), sf_c(x, 0.0)));
  Tensor more = Tensor::where(big, sf_c(x, kMoreBits), Tensor::where(mid, sf_c(x, 0.5 * kMoreBits), sf_c(x, 0.0)));
  Tensor z = xr.mul(xr);
  Tensor p = z.mul(sf_polevl(z, {-8.750608600031904122785E-1, -1.615753718733365076637E1, -7.500855792314704667340E1,
                                 -1.228866684490136173410E2, -6.485021904942025371773E1}))
                 .div(sf_p1evl(z, {2.485846490142306297962E1, 1.650270098316988542046E2, 4.328810604912902668951E2,
                                   4.853903996359136964868E2, 1.945506571482613964425E2}));
  Tensor r = base.add(xr.mul(p).add(xr).add(more));
  return Tensor::where(x.eq(sf_c(x, 0.0)), x, sf_odd(x, r));  // atan(-0) = -0
}

}  // namespace

Tensor Tensor::expm1() const {
  check_defined(*this, "expm1");
  static const auto rule = sf_rule("expm1", [](const Tensor& x, const Tensor& g) { return g.mul(x.exp()); });
  Tensor x = sf_float(*this);
  return with_custom_vjp(expm1_value(x), {x}, rule);
}

Tensor Tensor::log1p() const {
  check_defined(*this, "log1p");
  static const auto rule =
      sf_rule("log1p", [](const Tensor& x, const Tensor& g) { return g.div(x.add(scalar_like(x, 1.0))); });
  Tensor x = sf_float(*this);
  return with_custom_vjp(log1p_value(x), {x}, rule);
}

// Cephes erf/erfc (ndtr.c): for |x| <= 1, x T(x^2)/U(x^2); above, 1 - erfc(|x|) with
// erfc(a) = e^(-a^2) P(a)/Q(a), fitted on [1, 8] (|x| is clamped to 10, where erfc is below
// 2e-44 and erf is 1 in f64). Relative error of the rationals is about 1e-16 (Cephes), so f32
// results are within a few ulps and f64 within about 1e-15 absolute; derivative
// 2/sqrt(pi) e^(-x^2).
Tensor Tensor::erf() const {
  check_defined(*this, "erf");
  static const auto rule = sf_rule("erf", [](const Tensor& x, const Tensor& g) {
    return g.mul(x.mul(x).neg().exp().mul(scalar_like(x, 1.1283791670955126)));  // 2 / sqrt(pi)
  });
  Tensor x = sf_float(*this);
  Tensor z = x.mul(x);
  Tensor small = x.mul(sf_polevl(z, {9.60497373987051638749E0, 9.00260197203842689217E1, 2.23200534594684319226E3,
                                     7.00332514112805075473E3, 5.55923013010394962768E4}))
                     .div(sf_p1evl(z, {3.35617141647503099647E1, 5.21357949780152679795E2, 4.59432382970980127987E3,
                                       2.26290000613890934246E4, 4.92673942608635921086E4}));
  Tensor a = sf_abs(x).minimum(sf_c(x, 10.0));
  Tensor erfc = a.mul(a).neg().exp()
                    .mul(sf_polevl(a, {2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
                                       4.86371970985681366614E1, 1.96520832956077098242E2, 5.26445194995477358631E2,
                                       9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2}))
                    .div(sf_p1evl(a, {1.32281951154744992508E1, 8.67072140885989742329E1, 3.54937778887819891062E2,
                                      9.75708501743205489753E2, 1.82390916687909736289E3, 2.24633760818710981792E3,
                                      1.65666309194161350182E3, 5.57535340817727675546E2}));
  Tensor large = sf_odd(x, sf_c(x, 1.0).sub(erfc));
  return with_custom_vjp(where(sf_abs(x).le(sf_c(x, 1.0)), small, large), {x}, rule);
}

Tensor Tensor::atan() const {
  check_defined(*this, "atan");
  static const auto rule =
      sf_rule("atan", [](const Tensor& x, const Tensor& g) { return g.div(x.mul(x).add(scalar_like(x, 1.0))); });
  Tensor x = sf_float(*this);
  return with_custom_vjp(atan_value(x), {x}, rule);
}

// asin(x) = atan(x / sqrt((1 - x)(1 + x))) and acos(x) = 2 atan(sqrt((1 - x) / (1 + x))): 1 - x
// is exact near 1 and 1 + x near -1, so neither loses digits at the ends; |x| = 1 gives
// atan(inf) = pi/2 exactly, |x| > 1 the square root of a negative number: NaN.
Tensor Tensor::asin() const {
  check_defined(*this, "asin");
  static const auto rule = sf_rule("asin", [](const Tensor& x, const Tensor& g) {
    Tensor one = scalar_like(x, 1.0);
    return g.div(one.sub(x).mul(one.add(x)).sqrt());
  });
  Tensor x = sf_float(*this), one = sf_c(x, 1.0);
  return with_custom_vjp(atan_value(x.div(one.sub(x).mul(one.add(x)).sqrt())), {x}, rule);
}

Tensor Tensor::acos() const {
  check_defined(*this, "acos");
  static const auto rule = sf_rule("acos", [](const Tensor& x, const Tensor& g) {
    Tensor one = scalar_like(x, 1.0);
    return g.div(one.sub(x).mul(one.add(x)).sqrt()).neg();
  });
  Tensor x = sf_float(*this), one = sf_c(x, 1.0);
  Tensor t = one.sub(x).div(one.add(x)).sqrt();
  return with_custom_vjp(atan_value(t).mul(sf_c(x, 2.0)), {x}, rule);
}

// std::atan2's quadrants: atan(y / x), plus pi with y's sign where x is negative or -0; y = ±0
// gives ±0 (x positive or +0) or ±pi; both infinite gives ±pi/4 or ±3pi/4; NaN stays NaN.
// The sign of a zero is read as 1 / y < 0. Derivatives x / (x^2 + y^2) and -y / (x^2 + y^2).
Tensor Tensor::atan2(const Tensor& other) const {
  check_defined(*this, "atan2");
  check_defined(other, "atan2");
  static const auto rule = std::make_shared<const CustomRule>(CustomRule{
      "atan2",
      [](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
        Tensor r = g.div(in[0].mul(in[0]).add(in[1].mul(in[1])));
        return std::vector<Tensor>{r.mul(in[1]), r.mul(in[0]).neg()};
      },
      true});
  DType t = promote(dtype(), other.dtype());
  if (!is_float(t)) t = DType::F32;
  Shape out = broadcast_shapes(shape(), other.shape());
  Tensor y = cast(t).expand(out), x = other.cast(t).expand(out);
  Tensor zero = sf_c(x, 0.0), pi = sf_c(x, M_PI), inf = sf_c(x, INFINITY);
  auto negative = [&](const Tensor& v) { return v.lt(zero).logical_or(v.eq(zero).logical_and(v.recip().lt(zero))); };
  Tensor y_neg = negative(y), x_neg = negative(x);
  Tensor pi_y = where(y_neg, pi.neg(), pi);
  Tensor base = atan_value(y.div(x));
  Tensor r = where(x_neg, base.add(pi_y), base);
  Tensor both_inf = sf_abs(x).eq(inf).logical_and(sf_abs(y).eq(inf));
  Tensor corner = where(x_neg, sf_c(x, 0.75 * M_PI), sf_c(x, M_PI_4));
  r = where(both_inf, where(y_neg, corner.neg(), corner), r);
  r = where(y.eq(zero), where(x_neg, pi_y, y), r);
  r = where(x.ne(x).logical_or(y.ne(y)), x.add(y), r);
  return with_custom_vjp(r, {y, x}, rule);
}

// sinh from expm1 (no cancellation near 0): with e = expm1(|x|), sinh|x| = (e + e / (e + 1)) / 2;
// cosh|x| = (u + 1/u) / 2 with u = e^|x|. Above |x| = 20, e^-|x| is below f64's ulp of the
// result, and both are e^|x| / 2, computed as (h / 2) h with h = e^(|x|/2) so that it does not
// overflow before the result does (near 89 in f32, 710 in f64).
namespace {
Tensor sinh_value(const Tensor& x);
Tensor cosh_value(const Tensor& x);
Tensor half_exp_big(const Tensor& a) {
  Tensor h = a.mul(sf_c(a, 0.5)).exp();
  return h.mul(sf_c(a, 0.5)).mul(h);
}
Tensor sinh_value(const Tensor& x) {
  Tensor a = sf_abs(x);
  Tensor e = expm1_value(a);
  Tensor s = e.add(e.div(e.add(sf_c(x, 1.0)))).mul(sf_c(x, 0.5));
  return sf_odd(x, Tensor::where(a.gt(sf_c(x, 20.0)), half_exp_big(a), s));
}
Tensor cosh_value(const Tensor& x) {
  Tensor a = sf_abs(x);
  Tensor u = a.exp();
  Tensor c = u.add(u.recip()).mul(sf_c(x, 0.5));
  return Tensor::where(a.gt(sf_c(x, 20.0)), half_exp_big(a), c);
}
}  // namespace

Tensor Tensor::sinh() const {
  check_defined(*this, "sinh");
  static const auto rule = sf_rule("sinh", [](const Tensor& x, const Tensor& g) { return g.mul(x.cosh()); });
  Tensor x = sf_float(*this);
  return with_custom_vjp(sinh_value(x), {x}, rule);
}

Tensor Tensor::cosh() const {
  check_defined(*this, "cosh");
  static const auto rule = sf_rule("cosh", [](const Tensor& x, const Tensor& g) { return g.mul(x.sinh()); });
  Tensor x = sf_float(*this);
  return with_custom_vjp(cosh_value(x), {x}, rule);
}

// asinh|x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) (no cancellation near 0); above 1e8 the
// 1 under the root is below the ulp and asinh|x| = log(2|x|) = log|x| + log 2, which also
// avoids x^2 overflowing. acosh(x) = log1p(t + sqrt(t (t + 2))) with t = x - 1 (exact near 1),
// log x + log 2 above 1e8, NaN below 1. atanh|x| = log1p(2|x| / (1 - |x|)) / 2.
Tensor Tensor::asinh() const {
  check_defined(*this, "asinh");
  static const auto rule = sf_rule("asinh", [](const Tensor& x, const Tensor& g) {
    return g.div(x.mul(x).add(scalar_like(x, 1.0)).sqrt());
  });
  Tensor x = sf_float(*this), one = sf_c(x, 1.0);
  Tensor a = sf_abs(x);
  Tensor a2 = a.mul(a);
  Tensor moderate = log1p_value(a.add(a2.div(one.add(a2.add(one).sqrt()))));
  Tensor big = a.log().add(sf_c(x, M_LN2));
  Tensor r = sf_odd(x, where(a.gt(sf_c(x, 1e8)), big, moderate));
  return with_custom_vjp(where(x.eq(sf_c(x, 0.0)), x, r), {x}, rule);  // asinh(-0) = -0
}

Tensor Tensor::acosh() const {
  check_defined(*this, "acosh");
  static const auto rule = sf_rule("acosh", [](const Tensor& x, const Tensor& g) {
    Tensor one = scalar_like(x, 1.0);
    return g.div(x.sub(one).mul(x.add(one)).sqrt());
  });
  Tensor x = sf_float(*this), one = sf_c(x, 1.0);
  Tensor t = x.sub(one);
  Tensor moderate = log1p_value(t.add(t.mul(t.add(sf_c(x, 2.0))).sqrt()));
  Tensor big = x.log().add(sf_c(x, M_LN2));
  Tensor y = where(x.gt(sf_c(x, 1e8)), big, moderate);
  return with_custom_vjp(where(x.lt(one), sf_c(x, NAN), y), {x}, rule);
}

Tensor Tensor::atanh() const {
  check_defined(*this, "atanh");
  static const auto rule = sf_rule("atanh", [](const Tensor& x, const Tensor& g) {
    Tensor one = scalar_like(x, 1.0);
    return g.div(one.sub(x).mul(one.add(x)));
  });
  Tensor x = sf_float(*this), one = sf_c(x, 1.0);
  Tensor a = sf_abs(x);
  Tensor r = log1p_value(a.mul(sf_c(x, 2.0)).div(one.sub(a))).mul(sf_c(x, 0.5));
  return with_custom_vjp(sf_odd(x, r), {x}, rule);
}

}  // namespace ravel
