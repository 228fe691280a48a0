// BatchNorm1d / BatchNorm2d: batch statistics in training mode, running statistics in eval mode.
#include <algorithm>

#include "ravel/amp.hpp"
#include "ravel/autodiff.hpp"
#include "ravel/nn.hpp"

namespace ravel::nn {

namespace {

// Note [BatchNorm's own gradient]
// Differentiated op by op, batch normalisation's backward pass took four reductions over the
// whole activation (sum(dy) and sum(dy * xhat) each twice: once for the parameters' gradients,
// once inside the input gradient's chain through the mean and the variance) and three
// elementwise passes; in the Fashion-MNIST CNN step that was ~5.5 ms for the first layer's
// [128, 16, 28, 28] (docs/performance.md §8). The closed form (PyTorch's and cuDNN's) needs the
// two sums once:
//   dbeta = sum(dy), dgamma = sum(dy * xhat),
//   dx = gamma * rstd * (dy - dbeta / M - xhat * dgamma / M),   M = values per channel,
// so training mode carries it as a custom_vjp. mean and rstd are passed as inputs with no
// gradient of their own (dx already holds the paths through them), so the rule reuses the
// forward's statistics and, being built from tensor ops on them, differentiates again.
//
// Note [Per-channel factors first]
// Written elementwise, (x - mean) * rstd * gamma + beta is five instructions per element (a
// subtraction is a negation and an add), and the input gradient's formula nine: the tbb_cpu
// evaluator runs each as a pass over the block, ~0.1 ns per element and instruction on this
// machine, so they were 1.2 and 1.4 ms of the CNN step's first layer. Negating the mean and
// multiplying rstd by gamma (and the sums by 1 / M) per channel first leaves three and five.
// The centring stays a subtraction of the mean, as PyTorch's backward does: folding it into a
// per-channel offset (x * a + b) would cancel large terms when |mean| >> std.
Tensor normalized_with_own_gradient(const Tensor& x, const Tensor& mean, const Tensor& var, double eps,
                                    const Tensor& weight, const Tensor& bias, const std::vector<int64_t>& reduce,
                                    const Shape& per_channel, const char* name) {
  Tensor rstd = (var + eps).sqrt().recip();
  const bool affine = weight.defined();
  // Note [Per-channel factors first]: three instructions per element, (x + (-mean)) * factor + bias.
  Tensor factor = affine ? rstd * weight.reshape(per_channel) : rstd;
  Tensor y = (x + mean.neg()) * factor;
  if (affine) y = y + bias.reshape(per_channel);
  if (!grad_enabled()) return y;
  std::vector<Tensor> inputs{x, mean, rstd};
  if (affine) inputs.push_back(weight), inputs.push_back(bias);
  const double per_value = static_cast<double>(per_channel[0]) / static_cast<double>(x.numel());  // 1 / M
  auto rule = [reduce, per_channel, per_value](const std::vector<Tensor>& in, const Tensor&, const Tensor& dy) {
    const Tensor& xv = in[0];
    const Tensor& rs = in[2];
    Tensor centered = xv + in[1].neg();
    Tensor sdy = dy.sum(Axes(reduce), true), sdyx = (dy * (centered * rs)).sum(Axes(reduce), true);
    Tensor scale = in.size() > 3 ? rs * in[3].reshape(per_channel) : rs;
    // dx = scale * (dy - sdy / M - xhat * sdyx / M), xhat = (x - mean) * rstd, with the
    // per-channel factors formed first (Note [Per-channel factors first]).
    Tensor shift = (sdy * per_value).neg(), slope = (rs * sdyx * per_value).neg();
    Tensor dx = (dy + shift + centered * slope) * scale;
    std::vector<Tensor> g{dx, Tensor(), Tensor()};
    if (in.size() > 3) {
      g.push_back(sdyx.reshape({per_channel[0]}).cast(in[3].dtype()));
      g.push_back(sdy.reshape({per_channel[0]}).cast(in[4].dtype()));
    }
    return g;
  };
  return custom_vjp(y, inputs, rule, name);
}

}  // namespace

// Note [Lazy running statistics]
// torch updates running_mean/var in place during the forward pass. Here the update is a lazy
// expression (the batch's statistics, detached) that replaces the buffers' handles: assign()
// would realize it at once, which runs the forward pass up to this layer a second time (the
// loss and the gradients realize it again later). Left lazy, it runs in the same pass as the
// gradients when the caller passes buffers() to Tensor::backward's `also` (or lists them as Jit
// state, which realizes state after every call). If nobody realized it, the next training call does
// before chaining a new update, so the graph behind a buffer never grows past one batch.
BatchNorm::BatchNorm(int64_t features, double eps_, double momentum_, bool affine, DType dtype,
                     std::vector<int64_t> ranks, const char* name)
    : eps(eps_), momentum(momentum_), ranks_(std::move(ranks)), name_(name) {
  RAVEL_CHECK(features > 0, ValueError, name, " expects a positive number of features, got ", features);
  RAVEL_CHECK(eps > 0, ValueError, name, " expects eps > 0, got ", eps);
  RAVEL_CHECK(momentum >= 0 && momentum <= 1, ValueError, name, " expects 0 <= momentum <= 1, got ", momentum);
  if (affine) {
    weight = Tensor::ones({features}, dtype).requires_grad_();
    bias = Tensor::zeros({features}, dtype).requires_grad_();
  }
  running_mean = Tensor::zeros({features}, dtype).realize();
  running_var = Tensor::ones({features}, dtype).realize();
}

Tensor BatchNorm::operator()(const Tensor& input) {
  const Tensor x = autocast_f32(input);  // statistics and result in f32 under nn::Autocast
  const int64_t c = running_mean.size(0);
  const bool rank_ok = std::find(ranks_.begin(), ranks_.end(), x.ndim()) != ranks_.end();
  RAVEL_CHECK(rank_ok && x.size(1) == c, ShapeError, name_, "(", c, ") expects inputs of shape ",
              ranks_.front() == 4 ? "[N, " + std::to_string(c) + ", H, W]"
                                  : "[N, " + std::to_string(c) + "] or [N, " + std::to_string(c) + ", L]",
              ", got ", shape_str(x.shape()));
  // Every axis but the channel axis is reduced; weight, bias and statistics broadcast as [C, 1...].
  std::vector<int64_t> reduce{0};
  Shape per_channel{c};
  for (int64_t a = 2; a < x.ndim(); ++a) reduce.push_back(a), per_channel.push_back(1);
  auto channel = [&](const Tensor& t) { return t.reshape(per_channel); };

  Tensor mean, var;
  if (is_training()) {
    const int64_t n = x.numel() / c;
    RAVEL_CHECK(n > 1, ValueError, name_, " in training mode expects more than 1 value per channel, got input ",
                shape_str(x.shape()), " (use eval mode, or a larger batch)");
    mean = x.mean(reduce, true);
    var = (x - mean).square().mean(reduce, true);  // biased: what the batch is normalised by
    {
      NoGradGuard no_grad;
      if (!running_mean.is_realized() || !running_var.is_realized()) realize({running_mean, running_var});
      const double unbias = static_cast<double>(n) / static_cast<double>(n - 1);
      // Computed in the statistics' dtype, as torch does (the batch's in x's dtype, then cast).
      Tensor batch_mean = mean.detach().reshape({c}).cast(running_mean.dtype());
      Tensor batch_var = var.detach().reshape({c}).cast(running_var.dtype());
      running_mean = running_mean * (1 - momentum) + batch_mean * momentum;
      running_var = running_var * (1 - momentum) + batch_var * (momentum * unbias);
    }
    return normalized_with_own_gradient(x, mean, var, eps, weight, bias, reduce, per_channel, name_);
  } else {
    mean = channel(running_mean.cast(x.dtype()));
    var = channel(running_var.cast(x.dtype()));
  }
  Tensor y = (x - mean) * (var + eps).sqrt().recip();
  if (weight.defined()) y = y * channel(weight) + channel(bias);
  return y;
}

std::vector<NamedParameter> BatchNorm::named_parameters() {
  if (!weight.defined()) return {};
  return {{"weight", &weight}, {"bias", &bias}};
}

std::vector<NamedParameter> BatchNorm::named_buffers() {
  return {{"running_mean", &running_mean}, {"running_var", &running_var}};
}

}  // namespace ravel::nn
