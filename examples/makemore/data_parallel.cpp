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
}  // namespace

DataParallelStep::DataParallelStep(std::vector<Tensor*> params, Loss loss, double share, bool jit, size_t bucket_bytes)
    : params_(std::move(params)),
      loss_(std::move(loss)),
      share_(share),
      jit_(jit),
      ddp_(params_, bucket_config(bucket_bytes)),
      step_([this](const std::vector<Tensor>& in) { return step(in); }, params_) {}

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

double DataParallelStep::operator()(const Tensor& contexts, const Tensor& targets, double lr) {
  if (lr != lr_) step_.clear();  // the learning rate is a constant of the capture
  lr_ = lr;
  const std::vector<Tensor> out = jit_ ? step_({contexts, targets}) : step({contexts, targets});
  return out[0].item<double>();
}

}  // namespace makemore
