// Mixed-precision training (docs/nn.md "Mixed precision", docs/architecture.md
// decision 44), as PyTorch's torch.autocast and torch.amp.GradScaler:
//
//   nn::GradScaler scaler(nn::GradScaler::Options{.enabled = dtype == DType::F16});
//   for (...) {
//     Tensor loss;
//     {
//       nn::Autocast autocast(DType::F16);   // layers compute in f16, parameters stay f32
//       loss = nn::cross_entropy(model(x), y);  // losses are computed in f32
//     }
//     opt.zero_grad();
//     scaler.scale(loss).backward();          // gradients of loss * scale
//     scaler.step(opt, {loss});               // unscaled; skipped if any is inf or NaN
//     scaler.update();                        // x0.5 after a skip, x2 after 2000 good steps
//   }
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ravel/dtype.hpp"
#include "ravel/tensor.hpp"

namespace ravel::nn {

class Optimizer;

// torch.autocast(device_type, dtype): while alive, on this thread, ravel::nn's layers (Linear,
// Embedding, Conv1d/Conv2d, and MLP through Linear) cast their float inputs and parameters to
// `dtype` (f16 or bf16) and compute in it, and the losses (cross_entropy, mse_loss) and the
// normalisations (LayerNorm, BatchNorm) widen half inputs to f32 and compute in f32, as
// PyTorch's autocast op lists do. Parameters stay in their own dtype (f32 master weights): the
// cast is an op of the graph, so each parameter's gradient arrives in its dtype. Plain tensor
// ops (Tensor::matmul, ...) are not affected: cast their operands explicitly, or through
// autocast_operand(). Guards nest; `enabled = false` turns autocast off inside an outer one.
// A DTypeError for a dtype other than f16 and bf16.
class Autocast {
 public:
  explicit Autocast(DType dtype = DType::BF16, bool enabled = true);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  std::optional<DType> previous_;
};

// The dtype the current thread's innermost Autocast computes layers in, if one is on.
std::optional<DType> autocast_dtype();
// A layer's operand under autocast: a float tensor cast to the autocast dtype (others unchanged).
Tensor autocast_operand(const Tensor& x);
// A loss's or normalisation's operand under autocast: a half tensor widened to f32.
Tensor autocast_f32(const Tensor& x);

// torch.amp.GradScaler: dynamic loss scaling for f16 training (bf16 has f32's range and needs
// none). scale(loss) multiplies the loss by the scale (2^16 at first), so small gradients stay
// above f16's underflow; step(optimizer) divides every gradient by it again and applies the
// step only if every gradient is finite; update() then halves the scale after a skipped step
// and doubles it after `growth_interval` good steps in a row (if the doubled scale is finite).
// Note [Device-side loss scaling] in core/src/nn/grad_scaler.cpp: the skip happens on the device
// (every value the step writes is selected against its old one), so a training step with a
// scaler can be captured by a Jit (list state() with the parameters); nothing is read back.
// The optimizer's gradients must not be f16 (keep master weights in f32 and use Autocast: a
// DTypeError otherwise, as PyTorch's "Attempting to unscale FP16 gradients").
class GradScaler {
 public:
  struct Options {
    double init_scale = 65536.0, growth_factor = 2.0, backoff_factor = 0.5;
    int64_t growth_interval = 2000;
    bool enabled = true;  // disabled: scale() returns the loss, step() is optimizer.step()
  };
  GradScaler();
  explicit GradScaler(Options options);

  Tensor scale(const Tensor& loss) const;  // loss * scale, at least f32
  // Unscales the optimizer's gradients and applies its step unless one is inf or NaN; `also`
  // is realized in the same pass (Optimizer::step's argument). Once per optimizer between
  // update()s (a ValueError for a second time); several optimizers may share the scaler.
  void step(Optimizer& optimizer, const std::vector<Tensor>& also = {});
  // Adjusts the scale after step() (a ValueError without a step() since the last update()).
  void update();

  double get_scale() const;      // reads the scale (1 when disabled)
  int64_t growth_tracker() const;  // good steps since the last change of the scale
  bool is_enabled() const { return options_.enabled; }
  const Options& options() const { return options_; }
  // The tensors a Jit must list as state to capture a step that uses this scaler.
  std::vector<Tensor*> state() { return {&scale_, &tracker_}; }

 private:
  Options options_;
  Tensor scale_;    // 0-dim f32
  Tensor tracker_;  // 0-dim i64: good steps in a row
  Tensor found_inf_;  // 0-dim bool from step() until update(): any stepped optimizer's skip
  std::vector<const Optimizer*> stepped_;  // the optimizers stepped since the last update()
};

}  // namespace ravel::nn
