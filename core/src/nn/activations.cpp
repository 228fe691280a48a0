// torch.nn.functional's elementwise activations as composites. Each branch of a `where` gets an
// input it is finite on (the other branch's inputs replaced by a harmless value): the chain rule
// multiplies the unselected branch's zero cotangent by that branch's derivative, and 0 * inf is
// NaN (Note [Safe where] below). Derivatives at the kinks as torch's *_backward kernels.
#include "ravel/nn.hpp"

namespace ravel::nn {

// Note [Safe where]
// where(c, f(x), g(x)) differentiates to where(c, g', 0) f'(x) + where(c, 0, g') g'(x): the
// unselected branch's derivative is still evaluated, and multiplied by 0 — NaN where it is
// infinite (exp(beta x) overflowing in softplus' branch for large x, say). So each branch reads
// where(c, x, safe) instead of x: the same values where it is selected, a finite point elsewhere.

Tensor softplus(const Tensor& x, double beta, double threshold) {
  RAVEL_CHECK(beta != 0, ValueError, "softplus: beta must be non-zero, got 0");
  Tensor bx = x * beta;
  Tensor linear = bx > threshold;  // torch: x itself where beta x > threshold
  Tensor safe = Tensor::where(linear, Tensor::zeros_like(bx), bx);
  return Tensor::where(linear, x, safe.exp().log1p() / beta);
}

Tensor silu(const Tensor& x) { return x * x.sigmoid(); }

Tensor elu(const Tensor& x, double alpha) {
  Tensor pos = x > 0.0;  // torch's elu_backward takes alpha e^x at x = 0
  Tensor safe = Tensor::where(pos, Tensor::zeros_like(x), x);
  return Tensor::where(pos, x, safe.expm1() * alpha);
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return Tensor::where(x > 0.0, x, x * negative_slope);  // slope at 0, as torch
}

// relu6(x + 3) / 6 with derivative 1/6 strictly inside (-3, 3) and 0 at +-3 (torch's
// hardsigmoid_backward), so not clamp, whose derivative includes the bounds.
Tensor hardsigmoid(const Tensor& x) {
  Tensor mid = x / 6.0 + 0.5;
  return Tensor::where(x <= -3.0, Tensor::zeros_like(mid), Tensor::where(x >= 3.0, Tensor::ones_like(mid), mid));
}

// x relu6(x + 3) / 6: derivative x/3 + 1/2 on [-3, 3] (so -1/2 at -3 and 3/2 at 3), 0 below and
// 1 above (torch's hardswish_backward).
Tensor hardswish(const Tensor& x) {
  Tensor mid = x * (x + 3.0) / 6.0;
  return Tensor::where(x < -3.0, Tensor::zeros_like(mid), Tensor::where(x > 3.0, x, mid));
}

}  // namespace ravel::nn
