// nn::GradScaler: dynamic loss scaling, as torch.amp.GradScaler.
//
// Note [Device-side loss scaling]
// f16's normal range ends below 6.1e-5 (subnormals below 6e-8), and the gradients of a mean
// loss over a batch are often that small: multiplying the loss by a large scale S moves them up
// into f16's range, and dividing the f32 master gradients by S again gives the true step. Too
// large an S overflows some gradient to inf (or makes a NaN); that step must be skipped and S
// lowered. PyTorch finds the non-finite gradients on the device but then reads the flag back to
// decide on the host (`if not sum(v.item() ...)` in GradScaler.step) and updates S on the device
// (_amp_update_scale_). Here the decision stays on the device as well: step() computes
// skip = (count of non-finite unscaled gradient elements > 0), a 0-dim bool, and the optimizer
// writes where(skip, old, new) for every value it updates (parameters, momentum and moment
// buffers, Adam's step count), so a skipped step leaves them exactly as they were (a where
// selects; the inf or NaN of the rejected update never mixes in). update() forms the next scale
// and growth tracker with the same selects. Nothing is read back, so one training step with a
// scaler is a fixed list of kernels that a Jit can capture and replay (state(): scale, tracker).
// The cost is the non-finite count (one reduction over the gradients, fused into the pass that
// realizes the step) and the selects; a skipped step still runs the update's arithmetic.
// update() follows _amp_update_scale_: after a skip, S *= backoff and the tracker resets; after
// a good step the tracker counts up, and on reaching growth_interval S *= growth (kept only if
// finite) and the tracker resets.
#include <cmath>
#include <limits>

#include "ravel/amp.hpp"
#include "ravel/autodiff.hpp"
#include "ravel/error.hpp"
#include "ravel/nn.hpp"

namespace ravel::nn {

GradScaler::GradScaler() : GradScaler(Options{}) {}

GradScaler::GradScaler(Options options) : options_(options) {
  RAVEL_CHECK(std::isfinite(options.init_scale) && options.init_scale > 0, ValueError,
              "GradScaler: init_scale must be positive and finite, got ", options.init_scale);
  RAVEL_CHECK(options.growth_factor > 1, ValueError, "GradScaler: growth_factor must be above 1, got ",
              options.growth_factor);
  RAVEL_CHECK(options.backoff_factor > 0 && options.backoff_factor < 1, ValueError,
              "GradScaler: backoff_factor must be in (0, 1), got ", options.backoff_factor);
  RAVEL_CHECK(options.growth_interval > 0, ValueError, "GradScaler: growth_interval must be positive, got ",
              options.growth_interval);
  if (!options_.enabled) return;
  scale_ = Tensor::full({}, options.init_scale, DType::F32).realize();
  tracker_ = Tensor::zeros({}, DType::I64).realize();
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  RAVEL_CHECK(loss.defined() && is_float(loss.dtype()), DTypeError, "GradScaler::scale expects a float loss, got ",
              loss.defined() ? dtype_name(loss.dtype()) : "an undefined tensor");
  return loss * scale_.to(loss.device());  // f16/bf16 * f32 promotes: the scaled loss is f32 or f64
}

void GradScaler::step(Optimizer& optimizer, const std::vector<Tensor>& also) {
  if (!options_.enabled) return optimizer.step(also);
  // As PyTorch: one step() per optimizer between update()s (several optimizers may share a
  // scaler; update() then backs off if any of them saw a non-finite gradient).
  for (const Optimizer* o : stepped_)
    RAVEL_CHECK(o != &optimizer, ValueError,
                "GradScaler::step: this optimizer already stepped since the last update()");
  NoGradGuard no_grad;
  Optimizer::Scaling scaling;
  scaling.inv_scale = scale_.recip();
  const std::vector<Tensor> grads = optimizer.gradients(scaling);
  Tensor bad = Tensor::zeros({}, DType::I64);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    RAVEL_CHECK(grads[i].dtype() != DType::F16, DTypeError, "GradScaler: parameter ", i,
                " has an f16 gradient; keep master weights in f32 and compute in f16 under nn::Autocast "
                "(unscaled f16 gradients underflow: PyTorch refuses them too)");
    const double inf = std::numeric_limits<double>::infinity();
    bad = bad + grads[i].abs().lt(Tensor::full({}, inf, grads[i].dtype(), grads[i].device()))
                    .logical_not().sum().to(bad.device());  // NaN < inf is false too
  }
  scaling.skip = bad.gt(Tensor::zeros({}, DType::I64));
  found_inf_ = found_inf_.defined() ? found_inf_.logical_or(scaling.skip) : scaling.skip;
  stepped_.push_back(&optimizer);
  std::vector<Tensor> with_flag = also;
  with_flag.push_back(found_inf_);  // realized in the step's pass: update() reads it
  optimizer.update(with_flag, scaling);
}

void GradScaler::update() {
  if (!options_.enabled) return;
  RAVEL_CHECK(found_inf_.defined(), ValueError, "GradScaler::update: no step() since the last update()");
  NoGradGuard no_grad;
  const Tensor zero = Tensor::zeros({}, DType::I64), one = Tensor::ones({}, DType::I64);
  const Tensor good = tracker_ + one;
  const Tensor grow = good.ge(Tensor::full({}, static_cast<double>(options_.growth_interval), DType::I64));
  Tensor grown = scale_ * options_.growth_factor;
  grown = Tensor::where(grown.abs().lt(Tensor::full({}, std::numeric_limits<double>::infinity())), grown, scale_);
  Tensor scale = Tensor::where(found_inf_, scale_ * options_.backoff_factor, Tensor::where(grow, grown, scale_));
  Tensor tracker = Tensor::where(found_inf_.logical_or(grow), zero, good);
  realize({scale, tracker});
  scale_.assign(scale);
  tracker_.assign(tracker);
  found_inf_ = Tensor();
  stepped_.clear();
}

double GradScaler::get_scale() const { return options_.enabled ? scale_.item<double>() : 1.0; }

int64_t GradScaler::growth_tracker() const { return options_.enabled ? tracker_.item<int64_t>() : 0; }

}  // namespace ravel::nn
