// Rounding and range composites: floor, ceil, round, sign, clamp, remainder. All are written over
// the primitives (TRUNC, MOD, comparisons, WHERE), so every backend runs them, and devices that
// lack TRUNC get it from its decomposition (docs/ops.md).
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

// Note [Rounding from trunc]
// floor, ceil and round start from t = trunc(x), which is exact for every float (a float of
// magnitude >= 2^23 in f32, 2^52 in f64, is already an integer, and TRUNC's decomposition passes
// those through), and correct it by one with a comparison: floor = t - 1 where t > x. x - t is
// exact too (both have the same exponent or t is 0), so round compares the fraction itself with
// 1/2, never x + 0.5, which rounds up (0.49999997f + 0.5f == 1.0f). NaN and infinities pass
// through (every comparison with NaN is false, and inf - inf = NaN keeps round's corrections off).
// A zero result has the sign of x (floor(-0.0) = -0.0, ceil(-0.5) = -0.0, round(-0.4) = -0.0), as
// IEEE and torch: set explicitly as x * 0 (x is finite there), because TRUNC's decomposition, on
// a device that lacks the row, gives +0 for -1 < x < 0. The values come from t and x * 0, so the
// derivative is 0 (TRUNC's rule, and 0 through the product): torch's for floor, ceil and round.
namespace {
Tensor signed_zero_like_x(const Tensor& x, const Tensor& y) {
  return Tensor::where(y.eq(scalar_like(y, 0.0)), x.mul(scalar_like(x, 0.0)), y);
}
}  // namespace

Tensor Tensor::floor() const {
  check_defined(*this, "floor");
  if (!is_float(dtype())) return *this;  // integers and bools are their own floor (torch)
  Tensor t = trunc();
  return signed_zero_like_x(*this, where(t.gt(*this), t.sub(scalar_like(t, 1.0)), t));
}

Tensor Tensor::ceil() const {
  check_defined(*this, "ceil");
  if (!is_float(dtype())) return *this;
  Tensor t = trunc();
  return signed_zero_like_x(*this, where(t.lt(*this), t.add(scalar_like(t, 1.0)), t));
}

Tensor Tensor::round() const {
  check_defined(*this, "round");
  if (!is_float(dtype())) return *this;
  Tensor t = trunc();
  Tensor frac = sub(t).abs();  // exact, in [0, 1); NaN for NaN and infinities
  Tensor half = scalar_like(t, 0.5);
  Tensor t_odd = t.mod(scalar_like(t, 2.0)).ne(scalar_like(t, 0.0));  // fmod is exact
  // Away from zero by one where the fraction is above 1/2, or exactly 1/2 and t is odd (to even).
  Tensor away = frac.gt(half).logical_or(frac.eq(half).logical_and(t_odd));
  Tensor step = where(lt(scalar_like(*this, 0.0)), scalar_like(t, -1.0), scalar_like(t, 1.0));
  return signed_zero_like_x(*this, where(away, t.add(step), t));
}

Tensor Tensor::sign() const {
  check_defined(*this, "sign");
  if (dtype() == DType::Bool) return *this;  // torch.sign on bool is the identity
  Tensor zero = scalar_like(*this, 0.0);
  // A NaN fails every comparison, so it falls through to the last branch: x != x keeps it.
  Tensor rest = is_float(dtype()) ? where(ne(*this), *this, zero) : zero;
  Tensor s = where(gt(zero), scalar_like(*this, 1.0), where(lt(zero), scalar_like(*this, -1.0), rest));
  return s.detach().cast(dtype());  // piecewise constant: derivative 0 (torch)
}

// Note [Clamp's derivative]
// torch's clamp_backward sends the cotangent to x where min <= x <= max, to min where x < min <
// max, and to max where x > max or max < min; nothing gets it where min == max > x (the value is
// min == max) or where x is NaN. clamp is written as one `where` per case, so the chain rule
// through the selected branch reproduces exactly that; the cases no input gets a derivative in
// take a detached value. A NaN bound makes the result NaN (torch's min/max propagate it).
namespace {
Tensor clamp_by_cases(const Tensor& x0, Tensor lo, Tensor hi) {
  const bool has_lo = lo.defined(), has_hi = hi.defined();
  RAVEL_CHECK(has_lo || has_hi, ValueError, "clamp: at least one of min and max must be given (both are missing)");
  check_defined(x0, "clamp");
  DType t = x0.dtype();
  Shape out = x0.shape();
  if (has_lo) t = promote(t, lo.dtype()), out = broadcast_shapes(out, lo.shape());
  if (has_hi) t = promote(t, hi.dtype()), out = broadcast_shapes(out, hi.shape());
  RAVEL_CHECK(t != DType::Bool, DTypeError, "clamp expects a numeric dtype, got bool");
  Tensor x = x0.cast(t).expand(out);
  if (has_lo) lo = lo.cast(t).expand(out);
  if (has_hi) hi = hi.cast(t).expand(out);
  const bool fp = is_float(t);

  Tensor in_range, to_lo, to_hi;
  if (has_lo) in_range = x.ge(lo);
  if (has_hi) in_range = has_lo ? in_range.logical_and(x.le(hi)) : x.le(hi);
  if (has_lo) to_lo = has_hi ? x.lt(lo).logical_and(lo.lt(hi)) : x.lt(lo);
  if (has_hi) to_hi = has_lo ? x.gt(hi).logical_or(hi.lt(lo)) : x.gt(hi);
  // Reached only where min == max > x, or x is NaN: no derivative (torch).
  Tensor bound = (has_lo ? lo : hi).detach();
  Tensor rest = fp ? Tensor::where(x.ne(x), x.detach(), bound) : bound;
  Tensor y = rest;
  if (has_lo) y = Tensor::where(to_lo, lo, y);
  if (has_hi) y = Tensor::where(to_hi, hi, y);
  y = Tensor::where(in_range, x, y);
  if (fp) {
    Tensor nan_lo = has_lo ? lo.ne(lo) : Tensor(), nan_hi = has_hi ? hi.ne(hi) : Tensor();
    Tensor nan_bound = has_lo && has_hi ? nan_lo.logical_or(nan_hi) : has_lo ? nan_lo : nan_hi;
    y = Tensor::where(nan_bound, Tensor::full({}, NAN, t, x.device()), y);
  }
  return y;
}
}  // namespace

Tensor Tensor::clamp(const Tensor& min, const Tensor& max) const { return clamp_by_cases(*this, min, max); }

Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  check_defined(*this, "clamp");
  return clamp_by_cases(*this, min ? scalar_like(*this, *min) : Tensor(), max ? scalar_like(*this, *max) : Tensor());
}

// Floor modulo from C's: r = fmod(a, b) has the sign of a; where it is non-zero and its sign
// differs from b's, r + b has b's sign and the same residue (torch.remainder's CPU kernel, and
// Python's %). The derivatives follow from MOD's rule: 1 for a, and -trunc(a/b) + 1 = -floor(a/b)
// for b where the correction applies, as torch's remainder_backward (-floor(a/b)).
Tensor Tensor::remainder(const Tensor& o) const {
  check_defined(*this, "remainder");
  check_defined(o, "remainder");
  Tensor r = mod(o);
  DType t = r.dtype();
  Shape out = r.shape();
  Tensor b = o.cast(t).expand(out);
  Tensor zero = Tensor::zeros({}, t, r.device());
  Tensor fix = r.ne(zero).logical_and(r.lt(zero).logical_xor(b.lt(zero)));
  return where(fix, r.add(b), r);
}

Tensor Tensor::remainder(double o) const {
  check_defined(*this, "remainder");
  return remainder(scalar_like(*this, o));
}

}  // namespace ravel
