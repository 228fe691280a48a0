// Modules, activations and losses.
#include <cmath>
#include <optional>

#include "graph/engine.hpp"
#include "ravel/amp.hpp"
#include "ravel/nn.hpp"

namespace ravel::nn {

using ravel::detail::concat;

std::vector<Tensor*> Module::parameters() {
  std::vector<Tensor*> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

std::vector<Tensor*> Module::buffers() {
  std::vector<Tensor*> out;
  for (auto& [name, b] : named_buffers()) out.push_back(b);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (Module* child : children()) child->train(on);
}

void Module::zero_grad() {
  for (Tensor* p : parameters()) p->zero_grad();
}

int64_t Module::parameter_count() {
  int64_t n = 0;
  for (Tensor* p : parameters()) n += p->numel();
  return n;
}

Linear::Linear(int64_t in, int64_t out, uint64_t seed, bool with_bias, DType dtype) {
  RAVEL_CHECK(in > 0 && out > 0, ValueError, "Linear expects positive sizes, got in=", in, " out=", out);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = (Tensor::rand({in, out}, seed, dtype) * (2 * bound) - bound).requires_grad_();
  if (with_bias) bias = (Tensor::rand({out}, seed ^ 0x9e3779b97f4a7c15ULL, dtype) * (2 * bound) - bound).requires_grad_();
}

Tensor Linear::operator()(const Tensor& x) const {
  RAVEL_CHECK(x.ndim() >= 1 && x.size(-1) == weight.size(0), ShapeError, "Linear(", weight.size(0), " -> ",
              weight.size(1), ") expects inputs of shape [..., ", weight.size(0), "], got ", shape_str(x.shape()));
  // Under nn::Autocast the product and the bias add run in the half dtype (Note [Autocast in nn only]).
  Tensor y = autocast_operand(x).matmul(autocast_operand(weight));
  return bias.defined() ? y + autocast_operand(bias) : y;
}

std::vector<NamedParameter> Linear::named_parameters() {
  std::vector<NamedParameter> out{{"weight", &weight}};
  if (bias.defined()) out.emplace_back("bias", &bias);
  return out;
}

Embedding::Embedding(int64_t num, int64_t dim, uint64_t seed, DType dtype) {
  RAVEL_CHECK(num > 0 && dim > 0, ValueError, "Embedding expects positive sizes, got num=", num, " dim=", dim);
  weight = Tensor::randn({num, dim}, seed, dtype).requires_grad_();
}

namespace {
// The one-hot rows of `index` over [0, n) in `dtype`, as Tensor::one_hot makes them, for indices
// the caller has already checked under its own name (one_hot would check them again).
Tensor checked_one_hot(const Tensor& index, int64_t n, DType dtype) {
  Tensor classes = Tensor::arange(0, static_cast<double>(n), 1, DType::I64, index.device());
  return index.unsqueeze(-1).cast(DType::I64).eq(classes).cast(dtype);
}
}  // namespace

Tensor Embedding::operator()(const Tensor& indices) const {
  // An index outside [0, num) is an IndexError naming it (Note [Checked indices]), as
  // torch.nn.Embedding raises, instead of reading a row of zeros.
  check_index_bounds(indices, weight.size(0), "Embedding",
                     concat("an Embedding of ", weight.size(0), " rows (weight ", shape_str(weight.shape()), ")"));
  // A one-hot matrix product: one contraction kernel, and its gradient is the scatter-add of
  // the output gradient into the rows that were read (no special rule needed).
  // Flattened first, so it is a plain 2-D product whatever the rank of `indices`.
  Shape out = indices.shape();
  out.push_back(weight.size(1));
  // Under nn::Autocast in the half dtype: the one-hot rows are exact in it, so the result is the
  // rows rounded once, what torch.nn.Embedding then a half layer's input cast would give.
  const Tensor w = autocast_operand(weight);
  return checked_one_hot(indices.flatten(), w.size(0), w.dtype()).matmul(w).reshape(out);
}

std::vector<NamedParameter> Embedding::named_parameters() { return {{"weight", &weight}}; }

LayerNorm::LayerNorm(int64_t dim, double eps_, DType dtype) : eps(eps_) {
  weight = Tensor::ones({dim}, dtype).requires_grad_();
  bias = Tensor::zeros({dim}, dtype).requires_grad_();
}

Tensor LayerNorm::operator()(const Tensor& input) const {
  RAVEL_CHECK(input.ndim() >= 1 && input.size(-1) == weight.size(0), ShapeError, "LayerNorm(", weight.size(0),
              ") expects inputs of shape [..., ", weight.size(0), "], got ", shape_str(input.shape()));
  const Tensor x = autocast_f32(input);  // in f32 under nn::Autocast (PyTorch's layer_norm)
  Tensor centered = x - x.mean(-1, true);
  Tensor inv = (centered.square().mean(-1, true) + eps).sqrt().recip();
  return centered * inv * weight + bias;
}

std::vector<NamedParameter> LayerNorm::named_parameters() { return {{"weight", &weight}, {"bias", &bias}}; }

Tensor gelu(const Tensor& x) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  return x * 0.5 * ((x + x * x * x * 0.044715) * std::sqrt(2.0 / M_PI)).tanh() + x * 0.5;
}

Tensor activate(const Tensor& x, Activation a) {
  switch (a) {
    case Activation::ReLU: return x.relu();
    case Activation::Tanh: return x.tanh();
    case Activation::Sigmoid: return x.sigmoid();
    case Activation::GELU: return gelu(x);
  }
  return x;
}

MLP::MLP(const std::vector<int64_t>& sizes, Activation act, uint64_t seed, DType dtype) : activation(act) {
  RAVEL_CHECK(sizes.size() >= 2, ValueError, "MLP expects at least an input and an output size, got ", sizes.size(),
              " sizes");
  for (size_t i = 0; i + 1 < sizes.size(); ++i) layers.emplace_back(sizes[i], sizes[i + 1], seed + 1000 * i, true, dtype);
}

Tensor MLP::operator()(const Tensor& x) const {
  Tensor h = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    h = layers[i](h);
    if (i + 1 < layers.size()) h = activate(h, activation);
  }
  return h;
}

std::vector<NamedParameter> MLP::named_parameters() {
  std::vector<NamedParameter> out;
  for (size_t i = 0; i < layers.size(); ++i)
    for (auto& [name, p] : layers[i].named_parameters()) out.emplace_back("layers." + std::to_string(i) + "." + name, p);
  return out;
}

namespace {
// Note [Cross-entropy as one row chain]
// The loss (per_sample_cross_entropy below) is log s + (m - picked): max m, s = sum e^(x - m)
// and picked = sum(onehot * x) are reductions over each row, but the tail is an Alu node over [N] that no chain program
// outputs (ABI 1.11: without an epilogue a program's output is its own reduction), so it ran as
// four kernels (max, sum-exp, the one-hot contraction, the tail), reading x three times from
// memory. Written as the sum over the row of (onehot ? log s + (m - x) : 0), the tail *is* a reduction of
// the same rows whose list reads the row values m and log s through the broadcast: the planner
// (Note [Row chains in the planner] in schedule/row_chain.cpp) makes it one kernel per block of
// rows with stages MAX and SUM, reading x once from memory. The one-hot *selects* (a where, not
// a product: at logits of -FLT_MAX beside +FLT_MAX, m - x is +inf and 0 * inf would be NaN).
// Its value is the same bits (the
// target's term rounds as log s + (m - picked) does, the row's other terms are exact zeros;
// m - x is its own node, not x - m negated, so that no value over the rows is read by two
// kernels and stored); its gradient is (sum_j onehot) * softmax - onehot, the same where a
// target is a class and 0 (masked by the caller's where anyway) for an ignored one, at the price of one
// more reduction of onehot * g in the backward. Taken only where the device chains MAX and SUM:
// elsewhere the product over the rows would go to the contraction matcher and be stored
// (Note [Row reductions are no contractions]), so other devices keep today's graph.
bool chain_cross_entropy(const Tensor& logits) {
  const uint32_t need = (1u << static_cast<uint32_t>(detail::ReduceOp::Max)) |
                        (1u << static_cast<uint32_t>(detail::ReduceOp::Sum));
  return (detail::engine().device_reduce_chain_ops(logits.device()) & need) == need;
}

// -log softmax(logits)[target] per sample, after checking shapes, dtypes and target bounds
// (`ignore`: a target value allowed out of range, which then picks no class).
// -log softmax(logits)[target] = log sum e^z + (m - logits[target]) with m the row max (under
// stop_gradient: Note [Shift without gradient] in reduce.cpp) and z = logits - m, so neither the
// value nor the gradient (softmax - one_hot) overflows, up to logits of ±FLT_MAX; the one-hot
// picks the target's logit and keeps the whole loss one fused reduction.
Tensor per_sample_cross_entropy(const Tensor& half_logits, const Tensor& targets, std::optional<int64_t> ignore) {
  const Tensor logits = autocast_f32(half_logits);  // in f32 under nn::Autocast (PyTorch's cross_entropy)
  RAVEL_CHECK(logits.ndim() == 2 && targets.ndim() == 1 && targets.size(0) == logits.size(0), ShapeError,
              "cross_entropy expects logits [N, C] and targets [N], got ", shape_str(logits.shape()), " and ",
              shape_str(targets.shape()));
  RAVEL_CHECK(!is_float(targets.dtype()), DTypeError, "cross_entropy expects integer targets, got ",
              dtype_name(targets.dtype()));
  check_index_bounds(targets, logits.size(1), "cross_entropy",
                     concat(logits.size(1), " classes (logits ", shape_str(logits.shape()), ")"), ignore);
  Tensor m = logits.max(1, true).detach();
  Tensor hot = checked_one_hot(targets, logits.size(1), logits.dtype());
  if (chain_cross_entropy(logits)) {
    // Note [Cross-entropy as one row chain]
    Tensor terms = (logits - m).exp().sum(1, true).log() + (m - logits);
    return Tensor::where(hot > 0.0, terms, Tensor::zeros_like(terms)).sum(1);
  }
  Tensor picked = (logits * hot).sum(1);
  return (logits - m).exp().sum(1).log() + (m.reshape({logits.size(0)}) - picked);
}
}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  return per_sample_cross_entropy(logits, targets, std::nullopt).mean();
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction, int64_t ignore_index) {
  // An ignored target matches no class, so its one-hot row is zero; a where masks its loss out
  // (so neither its value nor its gradient reaches the result).
  Tensor per = per_sample_cross_entropy(logits, targets, ignore_index);
  Tensor keep = targets.ne(Tensor::full({}, static_cast<double>(ignore_index), targets.dtype(), targets.device()));
  per = Tensor::where(keep, per, Tensor::zeros({}, per.dtype(), per.device()));
  switch (reduction) {
    case Reduction::None: return per;
    case Reduction::Sum: return per.sum();
    case Reduction::Mean: return per.sum() / keep.sum().cast(per.dtype());
  }
  return per;
}

Tensor mse_loss(const Tensor& prediction, const Tensor& target) {
  RAVEL_CHECK(prediction.shape() == target.shape(), ShapeError, "mse_loss expects equal shapes, got ",
              shape_str(prediction.shape()), " and ", shape_str(target.shape()));
  return (autocast_f32(prediction) - autocast_f32(target)).square().mean();  // f32 under nn::Autocast
}

}  // namespace ravel::nn
