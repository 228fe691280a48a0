// Modules, activations and losses.
#include <cmath>
#include <optional>

#include "ravel/amp.hpp"
#include "ravel/autodiff.hpp"
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
// Note [Cross-entropy through the target's logit]
// -log softmax(x)[t] = log sum_j e^(x_j - x_t): a log-sum-exp of the row shifted by the target's
// logit x_t, which is a select-and-sum of the row (gather's form). The shifted LOGSUMEXP reads
// x_t and nothing else does, so the planner makes the forward one row chain where the device
// chains SUM and LOGSUMEXP (x read once from memory, the second pass in cache; tbb_cpu), and two
// plain reductions elsewhere; every device runs LOGSUMEXP or the core's decomposition of it.
// The derivative is a custom rule, (softmax(x) - onehot) * g: left to autodiff, the shift's path
// would add a reduction of the cotangent per row, and x_t stored for the backward would stop the
// forward's chain. softmax(x) is e / sum(e) with e = e^(x - max) (a MAX and SUM row chain with
// its epilogue, one kernel where the device runs them), not e^((x - x_t) - loss): x - x_t is
// rounded at the size of the loss, which costs a wrong, confident prediction's gradient ~1e-5
// relative (Tensor::softmax is this same e / sum(e) since decision 73; its earlier x - lse form,
// lse = m + log s in f64, was exact only for |x| up to ~2^28). The rule is built from tensor ops on x, so it
// is differentiated again for higher orders (the max under stop_gradient: softmax does not
// depend on the shift).
// Earlier forms, and why not:
// - log s + (m - x_t) with m the max, s = sum e^(x - m), x_t = sum(onehot * x): the one-hot
//   product went to the contraction path (a batched dot product per row, ~10x the loop's time
//   at 8192 x 1024), and the tail over [N] made it four kernels. With x_t selected instead of
//   multiplied it is still the form of short rows and split logits (per_sample_cross_entropy).
// - sum over the row of where(onehot, log s + (m - x), 0), one row chain with stages MAX and
//   SUM: three passes over each row in cache, the last a select over every element for one
//   value (0.8x the loop at 8192 x 1024).
// - logsumexp(x) - x_t: m + log s rounded to f32 before x_t is subtracted loses the small loss
//   of a confident prediction (ulp(1000) = 6e-5 against a loss of 1e-4); here the shift is exact
//   where x_t is the max (x_t - x_t = 0), as in log_softmax's x - m - log s.
// An ignored target selects nothing (x_t = 0) and the caller's where masks its row out. Logits
// of +-FLT_MAX: x_j - x_t overflows to +inf exactly where the true loss exceeds FLT_MAX, and
// -inf terms add e^-inf = 0.

// x[n, t_n] as [N, 1]: the select-and-sum of each row (gather's form, one pass that a row chain
// or a row epilogue can share with the reduction that reads it).
Tensor target_logit(const Tensor& x, const Tensor& is_target) {
  return Tensor::where(is_target, x, Tensor::zeros({}, x.dtype(), x.device())).sum(1, true);
}

// -log softmax(logits)[target] per sample, after checking shapes, dtypes and target bounds
// (`ignore`: a target value allowed out of range, which then selects no class).
Tensor per_sample_cross_entropy(const Tensor& half_logits, const Tensor& targets, std::optional<int64_t> ignore) {
  const Tensor logits = autocast_f32(half_logits);  // in f32 under nn::Autocast (PyTorch's cross_entropy)
  RAVEL_CHECK(logits.ndim() == 2 && targets.ndim() == 1 && targets.size(0) == logits.size(0), ShapeError,
              "cross_entropy expects logits [N, C] and targets [N], got ", shape_str(logits.shape()), " and ",
              shape_str(targets.shape()));
  RAVEL_CHECK(!is_float(targets.dtype()), DTypeError, "cross_entropy expects integer targets, got ",
              dtype_name(targets.dtype()));
  check_index_bounds(targets, logits.size(1), "cross_entropy",
                     concat(logits.size(1), " classes (logits ", shape_str(logits.shape()), ")"), ignore);
  // Note [Cross-entropy through the target's logit]
  // Long rows take the one-pass form below, as a custom derivative, on one device: over split
  // logits a custom rule that is not elementwise runs on whole tensors gathered onto the mesh's
  // first device (Note [Sharded custom derivatives]), which the plain form avoids (it stays part
  // by part). Short rows and split logits take log s + (m - x_t), m the detached row max and
  // s = sum e^(x - m), through plain autodiff: at makemore's 27 classes its max, sum and select
  // kernels cost less than the chain's set-up (the same step 3-10% faster), and its gradient is
  // softmax - onehot through the graph's own rules.
  // The select compares class numbers with each target over every logit: in i32 it reads half the
  // bytes and fills twice the lanes of i64 (0.9 ms of 5.7 at 8192 x 1024), but i64 targets then
  // need a cast, one more small kernel, which short rows do not repay. A target is a class (checked
  // above) or the ignored value, whose row the caller masks out whatever its i32 cast selects.
  constexpr int64_t kOnePassFrom = 256;
  const bool one_pass = logits.size(1) >= kOnePassFrom && !logits.sharding();
  const DType class_dtype = targets.dtype() == DType::I64 && !one_pass ? DType::I64 : DType::I32;
  Tensor classes = Tensor::arange(0, static_cast<double>(logits.size(1)), 1, class_dtype, logits.device());
  Tensor is_target = targets.unsqueeze(-1).cast(class_dtype).eq(classes);
  if (!one_pass) {
    Tensor m = logits.max(1, true).detach();
    return (logits - m).exp().sum(1).log() + (m - target_logit(logits, is_target)).reshape({logits.size(0)});
  }
  Tensor x = logits.detach();
  Tensor loss = (x - target_logit(x, is_target)).logsumexp(1);
  return custom_vjp(
      loss, {logits},
      [hot = is_target](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
        const Tensor& xs = in[0];
        Tensor e = (xs - xs.max(1, true).detach()).exp();
        Tensor softmax = e / e.sum(1, true);
        Tensor one = Tensor::ones({}, xs.dtype(), xs.device());
        return std::vector<Tensor>{Tensor::where(hot, softmax - one, softmax) * g.unsqueeze(1)};
      },
      "cross_entropy");
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
