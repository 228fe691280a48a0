#include "data_parallel.hpp"

#include "ravel/autodiff.hpp"

using ravel::Tensor;

namespace makemore {

DataParallelStep::DataParallelStep(std::vector<Tensor*> params, Loss loss, double share, bool jit)
    : params_(std::move(params)),
      loss_(std::move(loss)),
      share_(share),
      jit_(jit),
      ddp_(params_),
      gradients_([this](const std::vector<Tensor>& in) { return gradients(in); }, params_),
      update_([this](const std::vector<Tensor>& in) { return update(in); }, params_) {}

// {this rank's scaled loss, its scaled gradients}: the loss's share of the global batch mean.
std::vector<Tensor> DataParallelStep::gradients(const std::vector<Tensor>& batch) {
  for (Tensor* p : params_) p->zero_grad();
  Tensor loss = loss_(batch[0], batch[1]) * share_;
  loss.backward();
  std::vector<Tensor> out{loss.detach()};
  for (Tensor* p : params_) out.push_back(p->grad());
  for (Tensor* p : params_) p->zero_grad();  // no gradient outlives the step (Jit's rule)
  return out;
}

// p -= lr * g for every parameter, realized in one pass (as nn::SGD does).
std::vector<Tensor> DataParallelStep::update(const std::vector<Tensor>& grads) {
  ravel::NoGradGuard no_grad;
  std::vector<Tensor> next;
  for (size_t i = 0; i < params_.size(); ++i) next.push_back(*params_[i] - grads[i] * lr_);
  ravel::realize(next);
  for (size_t i = 0; i < params_.size(); ++i) params_[i]->assign(next[i]);
  return {};
}

double DataParallelStep::operator()(const Tensor& contexts, const Tensor& targets, double lr) {
  if (lr != lr_) update_.clear();  // the learning rate is a constant of the capture
  lr_ = lr;
  const std::vector<Tensor> local = jit_ ? gradients_({contexts, targets}) : gradients({contexts, targets});
  // One call, one argument check, the loss riding along in the last bucket.
  const std::vector<Tensor> summed = ddp_.reduce_gradients(local, 1.0);
  const std::vector<Tensor> grads(summed.begin() + 1, summed.end());
  if (jit_) update_(grads);
  else update(grads);
  return summed[0].item<double>();
}

}  // namespace makemore
