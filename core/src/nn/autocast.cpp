// nn::Autocast: the thread's autocast dtype and the two casts the layers and losses apply.
//
// Note [Autocast in nn only]
// PyTorch's autocast is a dispatcher key that rewrites every op on its lists. Ravel's tensor ops
// are the graph's primitives and composites, used by autodiff rules, optimizers and the layers'
// own arithmetic, so a thread-wide rewrite there would reach far more than a forward pass (an
// optimizer update under a guard would round master weights to half). Only ravel::nn consults
// the guard: the layers whose work is a contraction (Linear, Embedding's one-hot product,
// convolutions; PyTorch's "lower precision" list) cast operands to the half dtype, and the
// losses and normalisations (its "float32" list: cross_entropy, mse_loss, layer_norm,
// batch_norm's statistics) compute in f32. Everything else follows promotion from its inputs,
// as PyTorch's unlisted ops do. A Jit captures whatever the guard made of the step (the casts
// are graph ops), so the guard belongs inside the captured function.
#include "ravel/amp.hpp"

#include "ravel/error.hpp"

namespace ravel::nn {

namespace {
thread_local std::optional<DType> current_autocast;
}

Autocast::Autocast(DType dtype, bool enabled) : previous_(current_autocast) {
  RAVEL_CHECK(dtype == DType::F16 || dtype == DType::BF16, DTypeError,
              "Autocast computes in f16 or bf16, got ", dtype_name(dtype));
  current_autocast = enabled ? std::optional<DType>(dtype) : std::nullopt;
}

Autocast::~Autocast() { current_autocast = previous_; }

std::optional<DType> autocast_dtype() { return current_autocast; }

Tensor autocast_operand(const Tensor& x) {
  if (!current_autocast || !x.defined() || !is_float(x.dtype()) || x.dtype() == *current_autocast) return x;
  return x.cast(*current_autocast);
}

Tensor autocast_f32(const Tensor& x) {
  if (!current_autocast || !x.defined() || (x.dtype() != DType::F16 && x.dtype() != DType::BF16)) return x;
  return x.cast(DType::F32);
}

}  // namespace ravel::nn
