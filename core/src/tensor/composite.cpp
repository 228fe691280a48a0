// Elementwise composites, written over the primitives (so they get gradients for free).
#include <cmath>

#include "tensor/custom_vjp.hpp"
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

namespace {
// Float ops on integer tensors compute in f32 (NumPy/PyTorch behaviour).
Tensor as_float(const Tensor& t) { return is_float(t.dtype()) ? t : t.cast(DType::F32); }
constexpr double kLog2E = 1.4426950408889634;  // log2(e)
constexpr double kLn2 = 0.6931471805599453;    // ln(2)
}  // namespace

Tensor Tensor::sub(const Tensor& o) const {
  check_defined(*this, "sub");
  check_defined(o, "sub");
  DType t = promote(dtype(), o.dtype());
  RAVEL_CHECK(t != DType::Bool, DTypeError, "sub expects a numeric dtype, got bool - bool (use logical_xor)");
  // Broadcast before negating: neg then runs inside the consuming kernel instead of needing a
  // buffer of its own that is read through a broadcast view (see Note [Fusion]).
  Shape out = broadcast_shapes(shape(), o.shape());
  return expand(out).cast(t).add(o.expand(out).cast(t).neg());
}

Tensor Tensor::div(const Tensor& o) const {
  check_defined(*this, "div");
  check_defined(o, "div");
  DType t = promote(dtype(), o.dtype());
  if (!is_float(t)) t = DType::F32;
  Shape out = broadcast_shapes(shape(), o.shape());  // broadcast first, as in sub
  return expand(out).cast(t).mul(o.expand(out).cast(t).recip());
}

Tensor Tensor::minimum(const Tensor& o) const {
  check_defined(*this, "minimum");
  DType t = promote(dtype(), o.dtype());
  // -max(-a, -b) keeps NaN propagation for floats; for integers negation overflows at the
  // minimum value, so pick with a comparison instead.
  if (is_float(t)) return cast(t).neg().maximum(o.cast(t).neg()).neg();
  return where(lt(o), *this, o);
}

Tensor Tensor::gt(const Tensor& o) const { return o.lt(*this); }
Tensor Tensor::eq(const Tensor& o) const { return ne(o).logical_not(); }
// a <= b as (a < b) or (a == b), so NaN compares false as IEEE says.
Tensor Tensor::le(const Tensor& o) const { return lt(o).logical_or(eq(o)); }
Tensor Tensor::ge(const Tensor& o) const { return o.le(*this); }

Tensor Tensor::logical_not() const {
  check_defined(*this, "logical_not");
  Tensor b = dtype() == DType::Bool ? *this : ne(zeros_like(*this));
  return b.logical_xor(Tensor::full_like(b, 1));
}

Tensor Tensor::exp() const { return as_float(*this).mul(scalar_like(as_float(*this), kLog2E)).exp2(); }
Tensor Tensor::log() const { return log2().mul(scalar_like(as_float(*this), kLn2)); }
Tensor Tensor::cos() const { return as_float(*this).add(scalar_like(as_float(*this), M_PI / 2)).sin(); }

// Note [Saturating composites]: sigmoid and tanh evaluate exp only at -|x| (via a where, not
// abs, so the derivative at 0 is right), so no intermediate overflows. Their gradients are their
// own rules (Note [Custom derivatives]), closed forms in e^-|x| that are accurate to f32 rounding
// for every finite x: sigmoid' = e / (1 + e)^2 with e = e^-|x|, tanh' = 4e / (1 + e)^2 with
// e = e^-2|x|. Not 1 - tanh^2 or s (1 - s) from the output, as PyTorch and JAX do: those cancel
// to 0 once the output rounds to 1 (|x| > 9 for tanh in f32) where these keep the tiny true
// value. Each rule rebuilds -|x| as where(x < 0, x, -x), deliberately not the forward's node
// where(x >= 0, -x, x): sharing it would give e^-|x| two readers in two kernels, and the fusion
// planner would then store it (one more pass over the activations) rather than recompute it.
// Both forms have derivative -1 at x = 0, so higher derivatives agree with the chain rule there.
namespace {
Tensor neg_abs_for_rule(const Tensor& x) { return Tensor::where(x.lt(Tensor::zeros_like(x)), x, x.neg()); }

std::vector<Tensor> sigmoid_vjp(const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
  Tensor e = neg_abs_for_rule(in[0]).exp();  // e^-|x| in (0, 1]
  Tensor r = e.add(scalar_like(e, 1.0)).recip();
  return {g.mul(e.mul(r).mul(r))};
}

std::vector<Tensor> tanh_vjp(const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
  Tensor e = neg_abs_for_rule(in[0]).mul(scalar_like(in[0], 2.0)).exp();  // e^-2|x| in (0, 1]
  Tensor r = e.add(scalar_like(e, 1.0)).recip();
  return {g.mul(e.mul(scalar_like(e, 4.0)).mul(r).mul(r))};
}

}  // namespace

Tensor Tensor::sigmoid() const {
  static const auto rule = std::make_shared<const CustomRule>(CustomRule{"sigmoid", sigmoid_vjp, true});
  Tensor x = as_float(*this);
  Tensor pos = x.ge(zeros_like(x));
  Tensor e = where(pos, x.neg(), x).exp();  // e^-|x| in (0, 1]
  Tensor r = e.add(scalar_like(x, 1.0)).recip();
  return with_custom_vjp(where(pos, r, e.mul(r)), {x}, rule);  // 1 / (1 + e^-x) or e^x / (1 + e^x)
}

Tensor Tensor::tanh() const {
  static const auto rule = std::make_shared<const CustomRule>(CustomRule{"tanh", tanh_vjp, true});
  Tensor x = as_float(*this);
  Tensor pos = x.ge(zeros_like(x));
  Tensor e = where(pos, x.neg(), x).mul(scalar_like(x, 2.0)).exp();  // e^-2|x| in (0, 1]
  Tensor t = scalar_like(x, 1.0).sub(e).div(e.add(scalar_like(x, 1.0)));  // tanh|x|
  return with_custom_vjp(where(pos, t, t.neg()), {x}, rule);
}

// Note [relu at 0]: relu'(0) = 0, as torch.relu and jax.nn.relu (both give 0 there); NaN stays NaN.
// The derivative reads the output, not the input: where(y <= 0, 0, g) is where(x <= 0, 0, g)
// exactly (y is 0 just where x <= 0, and NaN just where x is NaN), but the pre-activation then
// has one reader, the forward's where, so the planner folds bias add and relu into the
// contraction's epilogue and stores only y, which the next layer and the backward read anyway
// (PyTorch's threshold_backward reads the output for the same reason).
namespace {
// y is never negative, so y <= 0 is y == 0: where(y != 0, g, 0) is two instructions, where y <= 0
// (y < 0 or not y != 0) was five (a kernel over every activation element of the backward pass).
std::vector<Tensor> relu_vjp(const std::vector<Tensor>&, const Tensor& y, const Tensor& g) {
  return {Tensor::where(y.ne(Tensor::zeros_like(y)), g, Tensor::zeros_like(g))};
}
}  // namespace

Tensor Tensor::relu() const {
  static const auto rule = std::make_shared<const CustomRule>(CustomRule{"relu", relu_vjp, true});
  // x where 0 < x or x is NaN, else +0 (so -0 gives +0): where(x <= 0, 0, x) in four
  // instructions instead of five.
  Tensor zero = zeros_like(*this);
  return with_custom_vjp(where(zero.lt(*this).logical_or(ne(*this)), *this, zero), {*this}, rule);
}
Tensor Tensor::abs() const {
  if (dtype() == DType::Bool || dtype() == DType::U8) return *this;
  return maximum(neg());
}
Tensor Tensor::square() const { return mul(*this); }

namespace {
// Note [Integer pow]: exact integer arithmetic by binary exponentiation with the integer mul, so
// overflow wraps exactly as mul does (NumPy's integer power). A negative exponent (lazy values
// cannot raise) gives what torch.pow's integer kernel (powi) gives: 1 for base 1, ±1 for base -1
// (by parity), 0 otherwise; pow with a negative scalar exponent raises, as NumPy and PyTorch do.
Tensor int_pow(const Tensor& a0, const Tensor& b0) {
  Shape out = broadcast_shapes(a0.shape(), b0.shape());
  Tensor a = a0.expand(out), b = b0.expand(out);
  const DType t = a.dtype();
  const int bits = t == DType::U8 ? 8 : t == DType::I32 ? 31 : 63;
  Tensor zero = Tensor::zeros({}, t, a.device()), one = Tensor::ones({}, t, a.device());
  Tensor two = Tensor::full({}, 2, t, a.device());
  Tensor neg = b.lt(zero);
  Tensor e = Tensor::where(neg, zero, b), base = a, acc = Tensor::ones_like(a);
  for (int k = 0; k < bits; ++k) {
    acc = Tensor::where(e.logical_and(one).ne(zero), acc.mul(base), acc);
    if (k + 1 < bits) {
      base = base.mul(base);
      e = e.idiv(two);
    }
  }
  if (t == DType::U8) return acc;
  Tensor minus_one = Tensor::full({}, -1, t, a.device());
  Tensor odd = b.logical_and(one).ne(zero);
  Tensor negative_power = Tensor::where(a.eq(one), one, Tensor::where(a.eq(minus_one), Tensor::where(odd, minus_one, one), zero));
  return Tensor::where(neg, negative_power.expand(out), acc);
}
}  // namespace

Tensor Tensor::pow(double exponent) const {
  check_defined(*this, "pow");
  if (is_float(dtype())) return pow(full({}, exponent, dtype(), device()));
  const bool integral = std::trunc(exponent) == exponent && std::abs(exponent) < 9.2e18;
  if (!integral) return as_float(*this).pow(exponent);  // integer ** 0.5 is f32 (docs/dtypes.md)
  RAVEL_CHECK(exponent >= 0 || dtype() == DType::Bool, ValueError, "pow: integers to negative integer powers are not allowed (",
              dtype_name(dtype()), " ** ", exponent, "), as in NumPy and PyTorch; cast to a float dtype first");
  return pow(full({}, exponent, dtype() == DType::Bool ? DType::I64 : dtype(), device()));
}

Tensor Tensor::pow(const Tensor& o) const {
  check_defined(*this, "pow");
  check_defined(o, "pow");
  DType t = promote(dtype(), o.dtype());
  if (t == DType::U8 || t == DType::I32 || t == DType::I64) return int_pow(cast(t), o.cast(t));
  DType ft = is_float(t) ? t : DType::F64;  // bool powers compute in f64, then cast back
  Tensor a = cast(ft), b = o.cast(ft);
  Shape out = broadcast_shapes(a.shape(), b.shape());
  a = a.expand(out);
  b = b.expand(out);
  // |a|^b = 2^(b log2|a|); a negative base keeps its sign for odd integer b and gives NaN for a
  // non-integer b (as std::pow); anything ^ 0 is 1, including 0^0 and NaN^0.
  Tensor zero = zeros_like(a), one = ones_like(a);
  Tensor mag = b.mul(a.abs().log2()).exp2();
  Tensor b_int = b.trunc().eq(b);
  Tensor b_odd = b_int.logical_and(b.mod(full_like(b, 2)).ne(zero));
  Tensor nan = full_like(a, NAN);
  Tensor neg_result = where(b_int, where(b_odd, mag.neg(), mag), nan);
  Tensor r = where(a.lt(zero), neg_result, mag);
  // x^0 = 1 also where log2|x| is not finite (x = 0, ±inf, NaN), which would give 0 * inf =
  // NaN; elsewhere the general formula already gives 1 and keeps d/db = ln|a| at b = 0.
  Tensor log_not_finite = a.abs().log2().abs().eq(full_like(a, INFINITY)).logical_or(a.ne(a));
  r = where(b.eq(zero).logical_and(log_not_finite), one, r);
  if (!is_float(t)) r = r.add(where(r.lt(zero), full_like(r, -0.5), full_like(r, 0.5))).trunc();  // round
  return r.cast(t);
}

}  // namespace ravel
