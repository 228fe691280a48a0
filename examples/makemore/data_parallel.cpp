#include "data_parallel.hpp"

#include "ravel/autodiff.hpp"

using ravel::Tensor;

namespace makemore {

namespace {
ravel::distributed::DataParallel::Config bucket_config(size_t bucket_bytes) {
  ravel::distributed::DataParallel::Config c;
  if (bucket_bytes > 0) c.bucket_bytes = bucket_bytes;
  return c;
}
ravel::nn::GradScaler::Options scaling(bool on) {
  ravel::nn::GradScaler::Options o;
  o.enabled = on;
  return o;
}
}  // namespace

std::vector<Tensor*> DataParallelStep::jit_state(std::vector<Tensor*> params, ravel::nn::GradScaler& scaler) {
  if (scaler.is_enabled())
    for (Tensor* t : scaler.state()) params.push_back(t);
  return params;
}

DataParallelStep::DataParallelStep(std::vector<Tensor*> params, Loss loss, double share, bool jit, size_t bucket_bytes,
                                   bool loss_scaling)
    : params_(std::move(params)),
      loss_(std::move(loss)),
      share_(share),
      jit_(jit),
      ddp_(params_, bucket_config(bucket_bytes)),
      scaler_(scaling(loss_scaling)),
      sgd_(params_, 1.0),
      step_([this](const std::vector<Tensor>& in) { return scaler_.is_enabled() ? scaled_step(in) : step(in); },
            jit_state(params_, scaler_)) {}

// One whole step: this rank's scaled loss and gradients (the loss's share of the global batch
// mean), their sum over the ranks (bucketed all-reduces, the loss riding along in the last
// bucket: one call, one argument check), and p -= lr * g realized in one pass (as nn::SGD does).
// The gradients stay lazy (ravel::gradients, not backward(), which would realize them), so each
// bucket's all-reduce begins while the rest of the backward pass runs (Note [Gradient buckets]).
// The all-reduces are host operations the Jit records between the kernels and replays
// (docs/distributed.md), so with --jit on the whole step is one capture.
std::vector<Tensor> DataParallelStep::step(const std::vector<Tensor>& batch) {
  Tensor loss = loss_(batch[0], batch[1]) * share_;
  std::vector<Tensor> params;
  for (Tensor* p : params_) params.push_back(*p);
  std::vector<Tensor> local = ravel::gradients(loss, params);
  local.insert(local.begin(), loss.detach());
  const std::vector<Tensor> summed = ddp_.reduce_gradients(local, 1.0);
  ravel::NoGradGuard no_grad;
  std::vector<Tensor> next;
  for (size_t i = 0; i < params_.size(); ++i) next.push_back(*params_[i] - summed[i + 1] * lr_);
  ravel::realize(next);
  for (size_t i = 0; i < params_.size(); ++i) params_[i]->assign(next[i]);
  return {summed[0]};
}

// Note [Loss scaling across ranks]
// f16's dynamic loss scaling (nn::GradScaler, Note [Device-side loss scaling]) decides on each
// rank whether the step is skipped, from the gradients the optimizer holds. Here those are the
// scaled gradients summed over the ranks, so every rank decides on the same values: an inf or
// NaN in any rank's share makes the sum non-finite on all of them, and the skip, the scale and
// the parameters stay the same on every rank. The loss rides in the first bucket as in step();
// the sums become the optimizer's gradients through d/dp sum(p * g) = g (Tensor has no gradient
// setter; DataParallel::backward does the same), and GradScaler unscales them, checks them and
// steps SGD. Captured and replayed by the Jit like step(), with the scale and growth tracker as
// state.
std::vector<Tensor> DataParallelStep::scaled_step(const std::vector<Tensor>& batch) {
  const Tensor loss = loss_(batch[0], batch[1]) * share_;
  std::vector<Tensor> params;
  for (Tensor* p : params_) params.push_back(*p);
  std::vector<Tensor> local = ravel::gradients(scaler_.scale(loss), params);
  local.insert(local.begin(), loss.detach());
  const std::vector<Tensor> summed = ddp_.reduce_gradients(local, 1.0);
  sgd_.lr = lr_;
  sgd_.zero_grad();
  Tensor total;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor term = (*params_[i] * summed[i + 1].detach()).sum();
    total = total.defined() ? total + term : term;
  }
  total.backward();
  scaler_.step(sgd_, {summed[0]});
  scaler_.update();
  sgd_.zero_grad();  // no gradient outlives the step (a replay would not update it)
  return {summed[0]};
}

double DataParallelStep::operator()(const Tensor& contexts, const Tensor& targets, double lr) {
  if (lr != lr_) step_.clear();  // the learning rate is a constant of the capture
  lr_ = lr;
  const std::vector<Tensor> out = jit_ ? step_({contexts, targets}) : step({contexts, targets});
  return out[0].item<double>();
}

}  // namespace makemore
