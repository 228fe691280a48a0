// Optimizers. Updates are built lazily under a NoGradGuard, realized together in one scheduling
// pass, and land with Tensor::assign, so parameters stay leaves and the graph does not grow.
#include <cmath>

#include "ravel/nn.hpp"
#include "tensor/sharded.hpp"

namespace ravel::nn {

namespace {
// Realizes every new value (and `also`) in one pass, then stores each into its target.
void commit(std::vector<std::pair<Tensor*, Tensor>>& updates, const std::vector<Tensor>& also) {
  std::vector<Tensor> values = also;
  for (auto& [target, value] : updates) values.push_back(value);
  realize(values);
  for (auto& [target, value] : updates) target->assign(value);
}

// Every parameter's stored gradient (Tensor::grad), the replicated ones of a data-parallel model
// all-reduced together (Note [Replica gradient buckets] in tensor/gradient_buckets.cpp).
std::vector<Tensor> stored_gradients(const std::vector<Tensor*>& params) {
  std::vector<Tensor> bundles;
  for (Tensor* p : params) {
    bool any = false;  // a bundle none of whose parts has a gradient has none (Tensor::grad)
    if (detail::is_multi(*p))
      for (const auto& part : detail::parts_of(*p)) any = any || part.grad().defined();
    bundles.push_back(any ? *p : Tensor());
  }
  std::vector<Tensor> g = detail::sharded_gradients(bundles, [](const Tensor& part) { return part.grad(); });
  for (size_t i = 0; i < params.size(); ++i)
    if (!detail::is_multi(*params[i])) g[i] = params[i]->grad();
  return g;
}
}  // namespace

void Optimizer::zero_grad() {
  for (Tensor* p : params_) p->zero_grad();
}

SGD::SGD(std::vector<Tensor*> params, double lr_, double momentum_) : Optimizer(std::move(params)), momentum(momentum_) {
  lr = lr_;
  velocity_.resize(params_.size());
}

void SGD::update(const std::vector<Tensor>& also) {
  NoGradGuard no_grad;
  std::vector<std::pair<Tensor*, Tensor>> updates;
  const std::vector<Tensor> grads = stored_gradients(params_);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = grads[i];
    if (!g.defined()) continue;
    if (momentum != 0) {
      Tensor v = velocity_[i].defined() ? velocity_[i] * momentum + g : g;
      updates.emplace_back(&velocity_[i], v);
      g = v;
    }
    updates.emplace_back(params_[i], *params_[i] - g * lr);
  }
  commit(updates, also);
}

Adam::Adam(std::vector<Tensor*> params, double lr_, double b1, double b2, double e)
    : Optimizer(std::move(params)), beta1(b1), beta2(b2), eps(e) {
  lr = lr_;
  m_.resize(params_.size());
  v_.resize(params_.size());
}

void Adam::update(const std::vector<Tensor>& also) {
  NoGradGuard no_grad;
  ++t_;
  const double c1 = 1.0 - std::pow(beta1, static_cast<double>(t_)), c2 = 1.0 - std::pow(beta2, static_cast<double>(t_));
  std::vector<std::pair<Tensor*, Tensor>> updates;
  const std::vector<Tensor> grads = stored_gradients(params_);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = grads[i];
    if (!g.defined()) continue;
    Tensor m = m_[i].defined() ? m_[i] * beta1 + g * (1 - beta1) : g * (1 - beta1);
    Tensor v = v_[i].defined() ? v_[i] * beta2 + g.square() * (1 - beta2) : g.square() * (1 - beta2);
    updates.emplace_back(&m_[i], m);
    updates.emplace_back(&v_[i], v);
    updates.emplace_back(params_[i], *params_[i] - (m / c1) / ((v / c2).sqrt() + eps) * lr);
  }
  commit(updates, also);
}

}  // namespace ravel::nn
