// Optimizers. Updates are built lazily under a NoGradGuard, realized together in one scheduling
// pass, and land with Tensor::assign, so parameters stay leaves and the graph does not grow.
#include <cmath>
#include <optional>

#include "ravel/nn.hpp"
#include "tensor/sharded.hpp"

namespace ravel::nn {

namespace {
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

std::vector<Tensor> Optimizer::gradients(const Scaling& scaling) const {
  std::vector<Tensor> g = stored_gradients(params_);
  if (scaling.inv_scale.defined())
    for (auto& gi : g)
      if (gi.defined()) gi = gi * scaling.inv_scale.cast(gi.dtype());
  return g;
}

void Optimizer::commit(std::vector<Update>& updates, const std::vector<Tensor>& also, const Scaling& scaling) {
  if (scaling.skip.defined())
    for (auto& [target, value] : updates)
      value = Tensor::where(scaling.skip, target->defined() ? *target : Tensor::zeros_like(value), value);
  std::vector<Tensor> values = also;
  for (auto& [target, value] : updates) values.push_back(value);
  realize(values);
  for (auto& [target, value] : updates) target->assign(value);
}

void Optimizer::zero_grad() {
  for (Tensor* p : params_) p->zero_grad();
}

SGD::SGD(std::vector<Tensor*> params, double lr_, double momentum_) : Optimizer(std::move(params)), momentum(momentum_) {
  lr = lr_;
  velocity_.resize(params_.size());
}

void SGD::update(const std::vector<Tensor>& also, const Scaling& scaling) {
  NoGradGuard no_grad;
  std::vector<Update> updates;
  const std::vector<Tensor> grads = gradients(scaling);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = grads[i];
    if (!g.defined()) continue;
    if (momentum != 0) {
      Tensor v = velocity_[i].defined() ? velocity_[i] * momentum + g : g;
      updates.push_back({&velocity_[i], v});
      g = v;
    }
    updates.push_back({params_[i], *params_[i] - g * lr});
  }
  commit(updates, also, scaling);
}

Adam::Adam(std::vector<Tensor*> params, double lr_, double b1, double b2, double e)
    : Optimizer(std::move(params)), beta1(b1), beta2(b2), eps(e) {
  lr = lr_;
  m_.resize(params_.size());
  v_.resize(params_.size());
}

void Adam::update(const std::vector<Tensor>& also, const Scaling& scaling) {
  NoGradGuard no_grad;
  std::vector<Update> updates;
  const std::vector<Tensor> grads = gradients(scaling);
  // The bias corrections 1 - beta^t. A skipped step must not advance t (PyTorch skips the whole
  // optimizer.step()), and a skip decided on the device cannot tell the host, so from the first
  // scaled step on the count lives on the device (an f32 scalar, exact to 2^24 steps; f64 for
  // f64 parameters), selected with the rest (Note [Device-side loss scaling] in
  // grad_scaler.cpp). Plain steps before that count on the host, as before: no extra ops.
  Tensor c1t, c2t;
  double c1 = 0, c2 = 0;
  if (scaling.skip.defined() || steps_.defined()) {
    const std::optional<Device> dev = params_.empty() ? std::nullopt : std::optional<Device>(params_.front()->device());
    const DType dt = !params_.empty() && params_.front()->dtype() == DType::F64 ? DType::F64 : DType::F32;
    if (!steps_.defined()) steps_ = Tensor::full({}, static_cast<double>(t_), dt, dev);
    Tensor t = steps_ + 1.0;
    updates.push_back({&steps_, t});
    c1t = 1.0 - Tensor::full({}, beta1, dt, dev).pow(t);
    c2t = 1.0 - Tensor::full({}, beta2, dt, dev).pow(t);
  } else {
    ++t_;
    c1 = 1.0 - std::pow(beta1, static_cast<double>(t_)), c2 = 1.0 - std::pow(beta2, static_cast<double>(t_));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = grads[i];
    if (!g.defined()) continue;
    Tensor m = m_[i].defined() ? m_[i] * beta1 + g * (1 - beta1) : g * (1 - beta1);
    Tensor v = v_[i].defined() ? v_[i] * beta2 + g.square() * (1 - beta2) : g.square() * (1 - beta2);
    updates.push_back({&m_[i], m});
    updates.push_back({&v_[i], v});
    Tensor mh = c1t.defined() ? m / c1t.cast(m.dtype()) : m / c1, vh = c2t.defined() ? v / c2t.cast(v.dtype()) : v / c2;
    updates.push_back({params_[i], *params_[i] - mh / (vh.sqrt() + eps) * lr});
  }
  commit(updates, also, scaling);
}

}  // namespace ravel::nn
