#include "cnn_workloads.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "model.hpp"  // examples/fashion_mnist: the step cnn_step times is the main job's
#include "ravel/ravel.hpp"

namespace ravel::bench {

namespace {

std::vector<double> cnn_host_values(const Tensor& t) {
  auto v = t.to_vector<float>();
  return {v.begin(), v.end()};
}

Tensor cnn_uniform(Shape shape, uint64_t seed, const Device& d) {
  return (Tensor::rand(std::move(shape), seed, DType::F32, d) * 2.0 - 1.0).contiguous().realize();
}

std::string cnn_mismatch(const std::string& what, size_t i, double got, double want, double tol) {
  std::ostringstream os;
  os << what << ": element " << i << " is " << got << ", expected " << want << " (tolerance " << tol << ")";
  return os.str();
}

// Cross-correlation of x [n, c, h, w] with w [o, c, k, k], zero padding p, stride 1, in double:
// one output element (b, oc, i, j).
double naive_conv_at(const std::vector<double>& x, const std::vector<double>& w, int64_t c, int64_t h, int64_t wd,
                     int64_t k, int64_t p, int64_t b, int64_t oc, int64_t i, int64_t j) {
  double acc = 0;
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t u = 0; u < k; ++u)
      for (int64_t v = 0; v < k; ++v) {
        const int64_t r = i - p + u, s = j - p + v;
        if (r >= 0 && r < h && s >= 0 && s < wd) acc += x[((b * c + ci) * h + r) * wd + s] * w[((oc * c + ci) * k + u) * k + v];
      }
  return acc;
}

// ---- conv2d: y = conv2d(x, w, padding k/2) and d(sum(y * r))/d{x, w} --------------------------------
class Conv2dInstance : public Instance {
 public:
  Conv2dInstance(const Size& s, const Device& d) : n_(s[0]), c_(s[1]), o_(s[2]), hw_(s[3]), k_(s[4]) {
    x_ = cnn_uniform({n_, c_, hw_, hw_}, 1, d);
    w_ = cnn_uniform({o_, c_, k_, k_}, 2, d);
    r_ = cnn_uniform({n_, o_, hw_, hw_}, 3, d);
    opts_.padding = {k_ / 2};
  }
  void run() override { realize(step()); }
  std::string check() override {
    std::vector<Tensor> out = step();
    realize(out);
    const auto y = out[0].to_vector<float>(), gw = out[2].to_vector<float>();
    const auto x = cnn_host_values(x_), w = cnn_host_values(w_), r = cnn_host_values(r_);
    const int64_t p = k_ / 2, oh = hw_ + 2 * p - k_ + 1;
    const double tol = 1e-5 * double(c_ * k_ * k_) + 1e-4;
    const size_t ny = y.size(), stride_y = std::max<size_t>(1, ny / 997);
    for (size_t e = 0; e < ny; e += stride_y) {
      const int64_t j = int64_t(e) % oh, i = int64_t(e) / oh % oh, oc = int64_t(e) / (oh * oh) % o_,
                    b = int64_t(e) / (oh * oh * o_);
      const double want = naive_conv_at(x, w, c_, hw_, hw_, k_, p, b, oc, i, j);
      if (std::fabs(y[e] - want) > tol) return cnn_mismatch("conv2d output", e, y[e], want, tol);
    }
    // The weight gradient: dW[o, c, u, v] = sum over b, i, j of r[b, o, i, j] x[b, c, i - p + u, j - p + v].
    const size_t stride_w = std::max<size_t>(1, gw.size() / 97);
    for (size_t e = 0; e < gw.size(); e += stride_w) {
      const int64_t v = int64_t(e) % k_, u = int64_t(e) / k_ % k_, ci = int64_t(e) / (k_ * k_) % c_,
                    oc = int64_t(e) / (k_ * k_ * c_);
      double want = 0;
      for (int64_t b = 0; b < n_; ++b)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < oh; ++j) {
            const int64_t rr = i - p + u, ss = j - p + v;
            if (rr >= 0 && rr < hw_ && ss >= 0 && ss < hw_)
              want += r[((b * o_ + oc) * oh + i) * oh + j] * x[((b * c_ + ci) * hw_ + rr) * hw_ + ss];
          }
      const double tolw = 1e-5 * double(n_ * oh * oh) + 1e-4;
      if (std::fabs(gw[e] - want) > tolw) return cnn_mismatch("conv2d weight gradient", e, gw[e], want, tolw);
    }
    return "";
  }

 private:
  std::vector<Tensor> step() {
    Tensor y = nn::conv2d(x_, w_, std::nullopt, opts_);
    std::vector<Tensor> g = gradients((y * r_).sum(), {x_, w_});
    return {y, g[0], g[1]};
  }
  int64_t n_, c_, o_, hw_, k_;
  Tensor x_, w_, r_;
  nn::ConvOptions opts_;
};

// ---- max_pool2d: y = max_pool2d(x, 2) of relu(x) and d(sum(y * r))/dx ---------------------------------
// The CNN's pooling: 2x2 windows at stride 2 of a ReLU's output, so windows tie at zero and the
// gradient goes to the first maximum in scan order (PyTorch's rule).
class MaxPool2dInstance : public Instance {
 public:
  MaxPool2dInstance(const Size& s, const Device& d) : n_(s[0]), c_(s[1]), hw_(s[2]) {
    x_ = cnn_uniform({n_, c_, hw_, hw_}, 4, d).relu().contiguous().realize();
    r_ = cnn_uniform({n_, c_, hw_ / 2, hw_ / 2}, 5, d);
    opts_.kernel = {2};
  }
  void run() override { realize(step()); }
  std::string check() override {
    std::vector<Tensor> out = step();
    realize(out);
    const auto y = out[0].to_vector<float>(), g = out[1].to_vector<float>();
    const auto x = cnn_host_values(x_), r = cnn_host_values(r_);
    const int64_t oh = hw_ / 2;
    std::vector<double> want_g(x.size(), 0.0);
    for (int64_t p = 0; p < n_ * c_; ++p)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < oh; ++j) {
          size_t best = size_t((p * hw_ + 2 * i) * hw_ + 2 * j);
          for (int64_t u = 0; u < 2; ++u)
            for (int64_t v = 0; v < 2; ++v) {
              const size_t at = size_t((p * hw_ + 2 * i + u) * hw_ + 2 * j + v);
              if (x[at] > x[best]) best = at;
            }
          const size_t e = size_t((p * oh + i) * oh + j);
          if (y[e] != x[best]) return cnn_mismatch("max_pool2d output", e, y[e], x[best], 0);
          want_g[best] += r[e];
        }
    for (size_t e = 0; e < g.size(); ++e)
      if (g[e] != want_g[e]) return cnn_mismatch("max_pool2d input gradient", e, g[e], want_g[e], 0);
    return "";
  }

 private:
  std::vector<Tensor> step() {
    Tensor y = nn::max_pool2d(x_, opts_);
    return {y, gradients((y * r_).sum(), {x_})[0]};
  }
  int64_t n_, c_, hw_;
  Tensor x_, r_;
  nn::PoolOptions opts_;
};

// ---- cnn_step: one Adam step of examples/fashion_mnist's model on random 28x28 images ----------------
class CnnStepInstance : public Instance {
 public:
  CnnStepInstance(int64_t batch, const Device& d)
      : batch_(batch), model_(16, 32, 28, 28, 7), adam_(model_.parameters(), 2e-3) {
    images_ = (Tensor::randn({batch, 1, 28, 28}, 11, DType::F32, d)).contiguous().realize();
    labels_ = (Tensor::rand({batch}, 12, DType::F32, d) * 10.0).cast(DType::I64).realize();
  }
  void run() override { step(); }
  // The first step's loss against the model's forward pass in double on the host (with the
  // parameters as they were before the step).
  std::string check() override {
    const double want = host_loss();
    const double got = step();
    const double tol = 1e-4 + 1e-4 * std::fabs(want);
    return std::fabs(got - want) <= tol ? "" : cnn_mismatch("cnn_step loss", 0, got, want, tol);
  }

 private:
  double step() {
    Tensor loss = nn::cross_entropy(model_(images_), labels_);
    std::vector<Tensor> also;
    for (Tensor* b : model_.buffers()) also.push_back(*b);
    adam_.zero_grad();
    loss.backward({}, also);
    adam_.step();
    adam_.zero_grad();
    return loss.item<double>();
  }
  // conv (no bias) -> batch norm with the batch's statistics -> ReLU -> 2x2 max pool, in double.
  static std::vector<double> block(const std::vector<double>& x, int64_t n, int64_t c, int64_t hw,
                                   const std::vector<double>& w, int64_t o, const std::vector<double>& gamma,
                                   const std::vector<double>& beta) {
    std::vector<double> y(size_t(n * o * hw * hw));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < o; ++oc)
        for (int64_t i = 0; i < hw; ++i)
          for (int64_t j = 0; j < hw; ++j) y[((b * o + oc) * hw + i) * hw + j] = naive_conv_at(x, w, c, hw, hw, 3, 1, b, oc, i, j);
    const double cnt = double(n * hw * hw);
    for (int64_t oc = 0; oc < o; ++oc) {
      double mean = 0, var = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t e = 0; e < hw * hw; ++e) mean += y[(b * o + oc) * hw * hw + e] / cnt;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t e = 0; e < hw * hw; ++e) var += std::pow(y[(b * o + oc) * hw * hw + e] - mean, 2) / cnt;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t e = 0; e < hw * hw; ++e) {
          double& v = y[(b * o + oc) * hw * hw + e];
          v = std::max(0.0, (v - mean) / std::sqrt(var + 1e-5) * gamma[oc] + beta[oc]);
        }
    }
    const int64_t ph = hw / 2;
    std::vector<double> pooled(size_t(n * o * ph * ph));
    for (int64_t p = 0; p < n * o; ++p)
      for (int64_t i = 0; i < ph; ++i)
        for (int64_t j = 0; j < ph; ++j) {
          const double* plane = y.data() + p * hw * hw;
          pooled[(p * ph + i) * ph + j] = std::max({plane[2 * i * hw + 2 * j], plane[2 * i * hw + 2 * j + 1],
                                                    plane[(2 * i + 1) * hw + 2 * j], plane[(2 * i + 1) * hw + 2 * j + 1]});
        }
    return pooled;
  }
  double host_loss() {
    const auto x = cnn_host_values(images_), labels = cnn_host_values(labels_.cast(DType::F32));
    auto h = block(x, batch_, 1, 28, cnn_host_values(model_.conv1.weight), 16, cnn_host_values(model_.bn1.weight),
                   cnn_host_values(model_.bn1.bias));
    h = block(h, batch_, 16, 14, cnn_host_values(model_.conv2.weight), 32, cnn_host_values(model_.bn2.weight),
              cnn_host_values(model_.bn2.bias));
    const auto hw = cnn_host_values(model_.head.weight), hb = cnn_host_values(model_.head.bias);
    const int64_t f = 32 * 7 * 7;
    double loss = 0;
    for (int64_t b = 0; b < batch_; ++b) {
      double logit[10], mx = -1e300, sum = 0;
      for (int64_t k = 0; k < 10; ++k) {
        logit[k] = hb[k];
        for (int64_t e = 0; e < f; ++e) logit[k] += h[b * f + e] * hw[e * 10 + k];
        mx = std::max(mx, logit[k]);
      }
      for (double l : logit) sum += std::exp(l - mx);
      loss += (std::log(sum) + mx - logit[int64_t(labels[b])]) / double(batch_);
    }
    return loss;
  }
  int64_t batch_;
  fashion_mnist::Model model_;
  nn::Adam adam_;
  Tensor images_, labels_;
};

}  // namespace

bool is_cnn_workload(const std::string& name) { return name == "conv2d" || name == "max_pool2d" || name == "cnn_step"; }

Work cnn_work_of(const std::string& name, const Size& s) {
  auto d = [&](size_t i) { return static_cast<double>(s[i]); };
  if (name == "conv2d") {
    // Forward, input gradient and weight gradient: three contractions of 2 n o hw^2 c k^2 flops.
    const double fwd = 2 * d(0) * d(2) * d(3) * d(3) * d(1) * d(4) * d(4);
    const double bytes = 4 * (2 * d(0) * d(1) * d(3) * d(3) + 2 * d(2) * d(1) * d(4) * d(4) + 2 * d(0) * d(2) * d(3) * d(3));
    return {3 * fwd, bytes};
  }
  if (name == "max_pool2d") {  // x and its gradient, y and r: the bytes the math must move
    const double big = d(0) * d(1) * d(2) * d(2), small = big / 4;
    return {0, 4 * (2 * big + 2 * small)};
  }
  if (name == "cnn_step") {
    // The convolutions and the head, forward and gradients (no input gradient for the first conv).
    const double conv1 = 2 * d(0) * 16 * 28 * 28 * 9, conv2 = 2 * d(0) * 32 * 14 * 14 * 16 * 9, head = 2 * d(0) * 1568 * 10;
    return {2 * conv1 + 3 * conv2 + 3 * head, 4 * (d(0) * 28 * 28 + 3 * (144 + 4608 + 15680 + 10 + 96))};
  }
  return {};
}

std::unique_ptr<Instance> make_cnn_instance(const std::string& name, const Size& s, const Device& dev) {
  if (name == "conv2d") {
    if (s.size() != 5) throw ValueError("conv2d expects a size of 5 numbers (n, c, o, hw, k), got " + size_str(s));
    return std::make_unique<Conv2dInstance>(s, dev);
  }
  if (name == "max_pool2d") {
    if (s.size() != 3 || s[2] % 2 != 0)
      throw ValueError("max_pool2d expects a size of 3 numbers (n, c, hw) with an even hw, got " + size_str(s));
    return std::make_unique<MaxPool2dInstance>(s, dev);
  }
  if (name == "cnn_step") return std::make_unique<CnnStepInstance>(s[0], dev);
  throw ValueError("workload " + name + " is not a convolutional workload");
}

}  // namespace ravel::bench
