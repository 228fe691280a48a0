#include "workloads.hpp"

#include "cnn_workloads.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "ravel/ravel.hpp"

namespace ravel::bench {

namespace {

constexpr int64_t kIn = 784, kHidden = 512, kOut = 10;  // an MNIST-sized MLP
constexpr double kLearningRate = 0.05;

std::vector<double> to_double(const Tensor& t) {
  auto v = t.to_vector<float>();
  return {v.begin(), v.end()};
}

// "" when every sampled got[i] is within atol + rtol * |want[i]|; else the first mismatch.
// `index` maps a sample number to an element index (all elements by default).
std::string compare(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                    double atol, double rtol, const std::vector<size_t>* index = nullptr) {
  size_t n = index ? index->size() : got.size();
  if (!index && got.size() != want.size())
    return what + ": expected " + std::to_string(want.size()) + " elements, got " + std::to_string(got.size());
  for (size_t s = 0; s < n; ++s) {
    size_t i = index ? (*index)[s] : s;
    double w = want[s], g = got[i];
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
      std::ostringstream os;
      os << what << ": element " << i << " is " << g << ", expected " << w << " (tolerance " << atol << " + " << rtol
         << "*|expected|)";
      return os.str();
    }
  }
  return "";
}

// Uniform values in [-1, 1), realized.
Tensor uniform(Shape shape, uint64_t seed, const Device& d) {
  Tensor t = Tensor::rand(std::move(shape), seed, DType::F32, d) * 2.0 - 1.0;
  return t.contiguous().realize();
}

// An instance whose run() is one expression of realized inputs and whose check compares its
// output with `naive(inputs)` (optionally on a sample of output elements, for big matmuls).
class ExprInstance : public Instance {
 public:
  using Expr = std::function<Tensor(const std::vector<Tensor>&)>;
  using Naive = std::function<std::vector<double>(const std::vector<std::vector<double>>&, const std::vector<size_t>&)>;
  ExprInstance(std::vector<Tensor> in, Expr expr, Naive naive, double atol, double rtol, size_t out_numel, size_t max_samples)
      : in_(std::move(in)), expr_(std::move(expr)), naive_(std::move(naive)), atol_(atol), rtol_(rtol) {
    // Naive matmuls are slow: check an evenly spread sample of the output when it is large.
    size_t step = std::max<size_t>(1, out_numel / std::max<size_t>(1, max_samples));
    for (size_t i = 0; i < out_numel; i += step) sample_.push_back(i);
  }
  void run() override { expr_(in_).realize(); }
  std::string check() override {
    auto got = expr_(in_).to_vector<float>();
    std::vector<std::vector<double>> host;
    for (const auto& t : in_) host.push_back(to_double(t));
    return compare("result", got, naive_(host, sample_), atol_, rtol_, &sample_);
  }

 private:
  std::vector<Tensor> in_;
  Expr expr_;
  Naive naive_;
  double atol_, rtol_;
  std::vector<size_t> sample_;
};

// ---- the MLP training step ---------------------------------------------------------------------
// Forward, the gradients from Ravel's autodiff (ravel::gradients) and an SGD update; checked
// against the same step written out in double on the host (textbook gradients).
class MlpInstance : public Instance {
 public:
  MlpInstance(int64_t batch, const Device& d) : batch_(batch) {
    x_ = uniform({batch, kIn}, 11, d);
    labels_ = (Tensor::rand({batch}, 12, DType::F32, d) * double(kOut)).cast(DType::I64).realize();
    y_ = labels_.one_hot(kOut).realize();
    const int64_t dims[] = {kIn, kHidden, kHidden, kOut};
    for (int l = 0; l < 3; ++l) {
      w_[l] = (uniform({dims[l], dims[l + 1]}, 20 + l, d) * std::sqrt(6.0 / double(dims[l]))).contiguous().realize();
      b_[l] = (uniform({dims[l + 1]}, 30 + l, d) * 0.1).contiguous().realize();
    }
  }
  void run() override { step(); }
  std::string check() override {
    std::vector<double> x = to_double(x_), y = to_double(y_), w[3], b[3];
    for (int l = 0; l < 3; ++l) w[l] = to_double(w_[l]), b[l] = to_double(b_[l]);
    double loss = naive_step(x, y, w, b);
    double got_loss = step();
    if (std::string e = compare("loss", {float(got_loss)}, {loss}, 1e-4, 1e-3); !e.empty()) return e;
    for (int l = 0; l < 3; ++l) {
      if (auto e = compare("W" + std::to_string(l + 1), w_[l].to_vector<float>(), w[l], 2e-4, 2e-3); !e.empty()) return e;
      if (auto e = compare("b" + std::to_string(l + 1), b_[l].to_vector<float>(), b[l], 2e-4, 2e-3); !e.empty()) return e;
    }
    return "";
  }

 private:
  double step() {
    const Tensor& x = x_;
    Tensor h1 = (x.matmul(w_[0]) + b_[0]).relu();
    Tensor h2 = (h1.matmul(w_[1]) + b_[1]).relu();
    Tensor logits = h2.matmul(w_[2]) + b_[2];
    Tensor loss = -(y_ * logits.log_softmax(-1)).sum(1).mean();
    std::vector<Tensor> grads = gradients(loss, {w_[0], b_[0], w_[1], b_[1], w_[2], b_[2]});
    std::vector<Tensor> out;
    for (int l = 0; l < 3; ++l) {
      out.push_back(w_[l] - grads[2 * l] * kLearningRate);
      out.push_back(b_[l] - grads[2 * l + 1] * kLearningRate);
    }
    out.push_back(loss);
    realize(out);
    // Fresh leaves holding the new values, so no step's graph outlives it.
    for (int l = 0; l < 3; ++l) w_[l] = Tensor().assign(out[2 * l]), b_[l] = Tensor().assign(out[2 * l + 1]);
    return out.back().item<float>();
  }
  // The same step in double on the host, updating w and b; returns the loss.
  double naive_step(const std::vector<double>& x, const std::vector<double>& y, std::vector<double>* w, std::vector<double>* b) const {
    const int64_t B = batch_, dims[] = {kIn, kHidden, kHidden, kOut};
    std::vector<double> act[4], z[3];
    act[0] = x;
    for (int l = 0; l < 3; ++l) {
      int64_t n = dims[l], m = dims[l + 1];
      z[l].assign(B * m, 0);
      for (int64_t r = 0; r < B; ++r)
        for (int64_t i = 0; i < n; ++i) {
          double a = act[l][r * n + i];
          for (int64_t j = 0; j < m; ++j) z[l][r * m + j] += a * w[l][i * m + j];
        }
      for (int64_t r = 0; r < B; ++r)
        for (int64_t j = 0; j < m; ++j) z[l][r * m + j] += b[l][j];
      act[l + 1] = z[l];
      if (l < 2)
        for (auto& v : act[l + 1]) v = std::max(v, 0.0);
    }
    std::vector<double> delta(B * kOut);
    double loss = 0;
    for (int64_t r = 0; r < B; ++r) {
      double mx = -1e300, s = 0;
      for (int64_t j = 0; j < kOut; ++j) mx = std::max(mx, act[3][r * kOut + j]);
      for (int64_t j = 0; j < kOut; ++j) s += std::exp(act[3][r * kOut + j] - mx);
      for (int64_t j = 0; j < kOut; ++j) {
        double lp = act[3][r * kOut + j] - mx - std::log(s);
        loss -= y[r * kOut + j] * lp / double(B);
        delta[r * kOut + j] = (std::exp(lp) - y[r * kOut + j]) / double(B);
      }
    }
    for (int l = 2; l >= 0; --l) {
      int64_t n = dims[l], m = dims[l + 1];
      std::vector<double> gw(n * m, 0), gb(m, 0), prev(B * n, 0);
      for (int64_t r = 0; r < B; ++r)
        for (int64_t i = 0; i < n; ++i) {
          double a = act[l][r * n + i], acc = 0;
          for (int64_t j = 0; j < m; ++j) gw[i * m + j] += a * delta[r * m + j], acc += delta[r * m + j] * w[l][i * m + j];
          prev[r * n + i] = l > 0 && z[l - 1][r * n + i] > 0 ? acc : 0;
        }
      for (int64_t r = 0; r < B; ++r)
        for (int64_t j = 0; j < m; ++j) gb[j] += delta[r * m + j];
      for (size_t k = 0; k < gw.size(); ++k) w[l][k] -= kLearningRate * gw[k];
      for (size_t k = 0; k < gb.size(); ++k) b[l][k] -= kLearningRate * gb[k];
      delta = std::move(prev);
    }
    return loss;
  }

  int64_t batch_;
  Tensor x_, labels_, y_, w_[3], b_[3];
};

// ---- the makemore training step -------------------------------------------------------------------
// The step of examples/makemore on random contexts. The check compares the loss with a forward
// pass in double on the host; the gradients themselves are what tests/autodiff checks.
class MakemoreInstance : public Instance {
 public:
  static constexpr int64_t kVocab = 27, kBlock = 3;
  // jit: the step as the main job runs it, captured once and replayed (ravel/jit.hpp); otherwise
  // built, differentiated and scheduled every step. embed, hid: 10, 200 (makemore) or 32, 1024
  // (makemore_mlp, in one process).
  MakemoreInstance(int64_t batch, const Device& d, bool jit, int64_t embed = 10, int64_t hid = 200)
      : batch_(batch), use_jit_(jit), embed_(embed), hid_(hid) {
    ctx_ = (Tensor::rand({batch, kBlock}, 41, DType::F32, d) * double(kVocab)).cast(DType::I64).realize();
    tgt_ = (Tensor::rand({batch}, 42, DType::F32, d) * double(kVocab)).cast(DType::I64).realize();
    p_ = {Tensor::randn({kVocab, embed_}, 43, DType::F32, d).realize(),
          (uniform({kBlock * embed_, hid_}, 44, d) * 0.18).contiguous().realize(), (uniform({hid_}, 45, d) * 0.18).contiguous().realize(),
          (uniform({hid_, kVocab}, 46, d) * 0.07).contiguous().realize(), (uniform({kVocab}, 47, d) * 0.07).contiguous().realize()};
    jit_ = std::make_unique<Jit>([this](const std::vector<Tensor>& in) { return train(in); },
                                 std::vector<Tensor*>{&p_[0], &p_[1], &p_[2], &p_[3], &p_[4]});
  }
  void run() override { step(); }
  std::string check() override {
    std::vector<double> c = to_double(ctx_.cast(DType::F32)), t = to_double(tgt_.cast(DType::F32)), p[5];
    for (int i = 0; i < 5; ++i) p[i] = to_double(p_[i]);
    double loss = 0;
    for (int64_t r = 0; r < batch_; ++r) {
      std::vector<double> h(hid_), logit(kVocab);
      for (int64_t j = 0; j < hid_; ++j) {
        double z = p[2][j];
        for (int64_t k = 0; k < kBlock; ++k)
          for (int64_t e = 0; e < embed_; ++e) z += p[0][int64_t(c[r * kBlock + k]) * embed_ + e] * p[1][(k * embed_ + e) * hid_ + j];
        h[j] = std::tanh(z);
      }
      double mx = -1e300, sum = 0;
      for (int64_t v = 0; v < kVocab; ++v) {
        logit[v] = p[4][v];
        for (int64_t j = 0; j < hid_; ++j) logit[v] += h[j] * p[3][j * kVocab + v];
        mx = std::max(mx, logit[v]);
      }
      for (int64_t v = 0; v < kVocab; ++v) sum += std::exp(logit[v] - mx);
      loss += (std::log(sum) + mx - logit[int64_t(t[r])]) / double(batch_);
    }
    return compare("loss", {float(step())}, {loss}, 1e-4, 1e-4);
  }

 private:
  double step() {
    if (!use_jit_) return train({ctx_, tgt_})[0].item<float>();
    return (*jit_)({ctx_, tgt_})[0].item<float>();
  }
  std::vector<Tensor> train(const std::vector<Tensor>& in) {
    Tensor emb = in[0].flatten().one_hot(kVocab).matmul(p_[0]).reshape({batch_, kBlock * embed_});
    Tensor h = (emb.matmul(p_[1]) + p_[2]).tanh();
    Tensor loss = nn::cross_entropy(h.matmul(p_[3]) + p_[4], in[1]);
    std::vector<Tensor> grads = gradients(loss, p_);
    std::vector<Tensor> out;
    for (int i = 0; i < 5; ++i) out.push_back(p_[i] - grads[i] * 0.1);
    out.push_back(loss);
    realize(out);
    for (int i = 0; i < 5; ++i) p_[i] = Tensor().assign(out[i]);  // fresh leaves: no graph kept
    return {out.back()};
  }
  int64_t batch_;
  bool use_jit_;
  int64_t embed_, hid_;
  Tensor ctx_, tgt_;
  std::vector<Tensor> p_;
  std::unique_ptr<Jit> jit_;  // made once p_ holds the parameters (its state)
};

// ---- all_reduce over the devices of one plugin ----------------------------------------------------
// One part of n elements per device (a tensor split along axis 0), summed onto every device;
// checked on every device against the sum of the parts on the host.
class AllReduceInstance : public Instance {
 public:
  AllReduceInstance(int64_t n, const Device& d) : n_(n) {
    for (const DeviceRecord& x : Runtime::get().devices())
      if (x.device.backend() == d.backend()) mesh_.push_back(x.device);
    if (mesh_.size() < 2)
      throw Unavailable("an all_reduce needs 2 or more devices of " + d.backend() + ", this process has " +
                        std::to_string(mesh_.size()) + " (RAVEL_TBB_DEVICES=N for tbb_cpu; configs/bench/data-parallel.json runs it in "
                        "child processes)");
    parts_ = uniform({int64_t(mesh_.size()) * n}, 5, mesh_[0]).shard(mesh_, 0).realize();
  }
  void run() override {
    Tensor r = all_reduce(parts_);
    r.realize();
    for (const Device& d : mesh_) synchronize(d);
  }
  std::string check() override {
    const std::vector<double> all = to_double(parts_);
    std::vector<double> want(static_cast<size_t>(n_), 0.0);
    for (size_t p = 0; p < mesh_.size(); ++p)
      for (int64_t i = 0; i < n_; ++i) want[size_t(i)] += all[p * size_t(n_) + size_t(i)];
    const std::vector<Tensor> got = all_reduce(parts_).shards();
    for (size_t p = 0; p < got.size(); ++p)
      if (std::string e = compare("the result on " + mesh_[p].str(), got[p].to_vector<float>(), want,
                                  1e-6 * double(mesh_.size()), 1e-5);
          !e.empty())
        return e;
    return "";
  }

 private:
  int64_t n_;
  std::vector<Device> mesh_;
  Tensor parts_;
};

// ---- layer_norm_step: nn::LayerNorm's forward and the gradients of sum(y * r) -----------------
// (x, weight and bias): what a transformer block's normalisation costs per training step.
class LayerNormStepInstance : public Instance {
 public:
  LayerNormStepInstance(int64_t rows, int64_t cols, const Device& d) : rows_(rows), cols_(cols) {
    x_ = uniform({rows, cols}, 1, d).contiguous().realize();
    w_ = (uniform({cols}, 2, d) * 0.5 + 1.0).contiguous().realize();
    b_ = uniform({cols}, 3, d).contiguous().realize();
    r_ = uniform({rows, cols}, 4, d).contiguous().realize();
  }
  void run() override { realize(step()); }
  std::string check() override {
    std::vector<Tensor> out = step();
    realize(out);
    const auto y = out[0].to_vector<float>(), gx = out[1].to_vector<float>(), gb = out[3].to_vector<float>();
    const auto x = to_double(x_), w = to_double(w_), b = to_double(b_), r = to_double(r_);
    // Per sampled row, in double: y = xhat * w + b, dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = r * w.
    for (int64_t i = 0; i < rows_; i += std::max<int64_t>(1, rows_ / 16)) {
      double mean = 0, var = 0, mg = 0, mgx = 0;
      for (int64_t j = 0; j < cols_; ++j) mean += x[i * cols_ + j];
      mean /= double(cols_);
      for (int64_t j = 0; j < cols_; ++j) var += (x[i * cols_ + j] - mean) * (x[i * cols_ + j] - mean);
      const double rstd = 1 / std::sqrt(var / double(cols_) + 1e-5);
      for (int64_t j = 0; j < cols_; ++j) {
        const double xh = (x[i * cols_ + j] - mean) * rstd, g = r[i * cols_ + j] * w[j];
        mg += g / double(cols_), mgx += g * xh / double(cols_);
      }
      std::vector<float> got_y(y.begin() + i * cols_, y.begin() + (i + 1) * cols_),
          got_dx(gx.begin() + i * cols_, gx.begin() + (i + 1) * cols_);
      std::vector<double> want_y(static_cast<size_t>(cols_)), want_dx(static_cast<size_t>(cols_));
      for (int64_t j = 0; j < cols_; ++j) {
        const double xh = (x[i * cols_ + j] - mean) * rstd, g = r[i * cols_ + j] * w[j];
        want_y[j] = xh * w[j] + b[j];
        want_dx[j] = rstd * (g - mg - xh * mgx);
      }
      if (std::string e = compare("y", got_y, want_y, 1e-4, 1e-4); !e.empty()) return e;
      if (std::string e = compare("dx", got_dx, want_dx, 1e-4, 1e-3); !e.empty()) return e;
    }
    std::vector<double> want_b(size_t(cols_), 0.0);
    for (int64_t i = 0; i < rows_; ++i)
      for (int64_t j = 0; j < cols_; ++j) want_b[j] += r[i * cols_ + j];
    return compare("dbias", gb, want_b, 1e-3, 1e-4);
  }

 private:
  std::vector<Tensor> step() {
    // nn::LayerNorm's graph (core/src/nn/modules.cpp).
    Tensor centered = x_ - x_.mean(-1, true);
    Tensor y = centered * (centered.square().mean(-1, true) + 1e-5).sqrt().recip() * w_ + b_;
    std::vector<Tensor> g = gradients((y * r_).sum(), {x_, w_, b_});
    return {y, g[0], g[1], g[2]};
  }
  int64_t rows_, cols_;
  Tensor x_, w_, b_, r_;
};

}  // namespace

const std::vector<WorkloadInfo>& workload_catalog() {
  static const std::vector<WorkloadInfo> catalog = {
      {"matmul", "C = A @ B, f32 [m,k] @ [k,n]", 3, "m, k, n", {{256, 256, 256}, {512, 512, 512}}, true, ""},
      {"elementwise", "d = exp(a) * b + c over n f32 elements (one fused kernel under elementwise and above)", 1, "n",
       {{1 << 20}, {1 << 24}}, false, ""},
      {"muladd", "d = a * b + c over n f32 elements: elementwise's memory-bound twin (no exp, so the time is the "
                 "16n bytes, not the arithmetic)", 1, "n", {{1 << 24}}, false, ""},
      {"softmax", "softmax along the rows of an f32 [rows, cols] matrix", 2, "rows, cols", {{1024, 1024}}, false, ""},
      {"log_softmax", "log_softmax along the rows of an f32 [rows, cols] matrix", 2, "rows, cols", {{1024, 1024}}, false,
       ""},
      {"layer_norm", "nn::LayerNorm's forward along the rows of an f32 [rows, cols] matrix, eps 1e-5, with a weight "
                     "and a bias of [cols] (one kernel under full on a device that runs chains of row reductions)",
       2, "rows, cols", {{4096, 4096}}, false, ""},
      {"cross_entropy", "nn::cross_entropy's forward (mean over the rows) of f32 logits [rows, cols] and i64 targets "
                        "(from 256 classes: one row-chain kernel, select then LOGSUMEXP, on a device that chains them)",
       2, "rows, cols", {{4096, 4096}}, false, ""},
      {"layer_norm_step", "layer_norm's forward and the gradients of sum(y * r) for x, the weight and the bias (f32 "
                          "[rows, cols]): the normalisation's share of a training step", 2, "rows, cols",
       {{4096, 1024}}, false, ""},
      {"sum_axis0", "x.sum(0) of an f32 [rows, cols] matrix (down the columns)", 2, "rows, cols", {{2048, 2048}}, false, ""},
      {"sum_axis1", "x.sum(1) of an f32 [rows, cols] matrix (along the rows)", 2, "rows, cols", {{2048, 2048}}, false, ""},
      {"transpose", "x.transpose().contiguous(): a copy of an f32 [rows, cols] matrix into [cols, rows]", 2,
       "rows, cols", {{2048, 2048}}, false, ""},
      {"mlp", "one MLP training step 784->512->512->10 (ReLU, softmax cross-entropy, SGD lr 0.05): forward, "
              "gradients by autodiff, and the update", 1, "batch", {{256}}, true, ""},
      {"makemore", "one makemore training step (examples/makemore: 3-char context, embedding 27x10, tanh "
                   "hidden 200, cross-entropy over 27, gradients by autodiff, SGD), captured once and replayed "
                   "(ravel::Jit) as the main job runs it", 1, "batch", {{64}}, true, ""},
      {"makemore_eager", "the makemore step without ravel::Jit: graph built, differentiated and scheduled every "
                         "step (kernel cache hits)", 1, "batch", {{64}}, true, ""},
      {"makemore_mlp", "the makemore step widened as bench/distributed/dp.sh's MLP (embedding 27x32, tanh hidden "
                       "1024), captured once and replayed; under mpirun (configs/bench/distributed.json) its peers "
                       "run it data-parallel over ranks with 64 KiB gradient buckets", 1, "batch", {{64}}, true, ""},
      {"all_reduce", "sum all_reduce of n f32 elements on each device of the row's plugin (every one of its devices, "
                     "2 or more: RAVEL_TBB_DEVICES), replicated on all of them; bytes = 4n, the bytes reduced per "
                     "device (NCCL's algorithm bandwidth)", 1, "n", {{1 << 22}}, false, ""},
      // Half precision (the speed of halves against f32 on the CPU, configs/bench/half-vs-f32.json): the f32 workloads above with
      // inputs and result in f16 or bf16 (computed in f32, rounded once); bytes count 2 per element.
      {"matmul_bf16", "matmul with bf16 A, B and C (f32 accumulation)", 3, "m, k, n", {{512, 512, 512}}, true, ""},
      {"matmul_f16", "matmul with f16 A, B and C (f32 accumulation)", 3, "m, k, n", {{512, 512, 512}}, true, ""},
      {"elementwise_bf16", "elementwise with bf16 a, b, c and d", 1, "n", {{1 << 24}}, false, ""},
      {"elementwise_f16", "elementwise with f16 a, b, c and d", 1, "n", {{1 << 24}}, false, ""},
      {"muladd_bf16", "muladd with bf16 a, b, c and d", 1, "n", {{1 << 24}}, false, ""},
      {"muladd_f16", "muladd with f16 a, b, c and d", 1, "n", {{1 << 24}}, false, ""},
      {"sum_axis1_bf16", "sum_axis1 of a bf16 matrix (f32 accumulation, bf16 result)", 2, "rows, cols", {{2048, 2048}}, false, ""},
      {"sum_axis1_f16", "sum_axis1 of an f16 matrix (f32 accumulation, f16 result)", 2, "rows, cols", {{2048, 2048}}, false, ""},
      {"sum_axis0_bf16", "sum_axis0 of a bf16 matrix (f32 accumulation, bf16 result)", 2, "rows, cols", {{2048, 2048}}, false, ""},
      {"sum_axis0_f16", "sum_axis0 of an f16 matrix (f32 accumulation, f16 result)", 2, "rows, cols", {{2048, 2048}}, false, ""},
      {"conv2d", "y = conv2d(x [n,c,hw,hw], w [o,c,k,k], padding k/2) and both gradients of sum(y * r): forward "
                 "and backward of one convolution", 5, "n, c, o, hw, k", {{128, 16, 32, 14, 3}, {32, 64, 64, 56, 3}}, true, ""},
      {"max_pool2d", "y = max_pool2d(x [n,c,hw,hw], 2) of a ReLU's output (ties at zero) and the gradient of sum(y * r): "
                     "the CNN's pooling, forward and backward", 3, "n, c, hw", {{128, 16, 28}, {128, 32, 14}}, false, ""},
      {"cnn_step", "one Adam training step of examples/fashion_mnist's CNN (conv 1->16, 16->32, batch norm, ReLU, "
                   "2x2 max pooling, linear 1568->10) on random 28x28 images", 1, "batch", {{128}}, true, ""},
  };
  return catalog;
}

const WorkloadInfo& find_workload(const std::string& name) {
  for (const auto& w : workload_catalog())
    if (w.name == name) return w;
  throw ValueError("unknown workload " + name);
}

// "matmul_bf16" -> ("matmul", BF16); a name without a half suffix is f32.
std::pair<std::string, DType> split_dtype(const std::string& name) {
  for (auto [suffix, dt] : {std::pair<const char*, DType>{"_bf16", DType::BF16}, {"_f16", DType::F16}}) {
    const std::string x = suffix;
    if (name.size() > x.size() && name.compare(name.size() - x.size(), x.size(), x) == 0)
      return {name.substr(0, name.size() - x.size()), dt};
  }
  return {name, DType::F32};
}

Work work_of(const std::string& full_name, const Size& s) {
  const auto [name, dtype] = split_dtype(full_name);
  if (dtype != DType::F32) {  // the same flops, half the bytes
    Work w = work_of(name, s);
    return {w.flops, w.bytes / 2};
  }
  auto d = [&](size_t i) { return static_cast<double>(s[i]); };
  if (name == "matmul") return {2 * d(0) * d(1) * d(2), 4 * (d(0) * d(1) + d(1) * d(2) + d(0) * d(2))};
  if (name == "elementwise") return {3 * d(0), 16 * d(0)};
  if (name == "muladd") return {2 * d(0), 16 * d(0)};
  if (name == "softmax" || name == "log_softmax") return {5 * d(0) * d(1), 8 * d(0) * d(1)};
  if (name == "layer_norm") return {8 * d(0) * d(1), 8 * d(0) * d(1) + 8 * d(1)};
  if (name == "cross_entropy") return {4 * d(0) * d(1), 4 * d(0) * d(1) + 8 * d(0)};
  if (name == "layer_norm_step") return {30 * d(0) * d(1), 20 * d(0) * d(1) + 16 * d(1)};
  if (name == "sum_axis0") return {d(0) * d(1), 4 * d(0) * d(1) + 4 * d(1)};
  if (name == "sum_axis1") return {d(0) * d(1), 4 * d(0) * d(1) + 4 * d(0)};
  if (name == "transpose") return {0, 8 * d(0) * d(1)};
  if (name == "all_reduce") return {0, 4 * d(0)};
  if (is_cnn_workload(name)) return cnn_work_of(name, s);
  if (name == "mlp") {
    // Forward: three matmuls; backward: a weight-gradient matmul per layer and an input-gradient
    // matmul for the two upper layers. Elementwise work is small beside these and not counted.
    double fwd = 2 * d(0) * (kIn * kHidden + kHidden * kHidden + kHidden * kOut);
    double params = kIn * kHidden + kHidden * kHidden + kHidden * kOut + 2 * kHidden + kOut;
    return {3 * fwd - 2 * d(0) * kIn * kHidden, 4 * (d(0) * kIn + 3 * params)};
  }
  if (name == "makemore_mlp") {  // as makemore's, with embedding 27x32 and hidden 96x1024, 1024x27
    double fwd = 2 * d(0) * (3 * 27 * 32 + 96 * 1024 + 1024 * 27);
    double params = 27 * 32 + 96 * 1024 + 1024 + 1024 * 27 + 27;
    return {3 * fwd - 2 * d(0) * 3 * 27 * 32, 4 * (d(0) * 4 + 3 * params)};
  }
  if (name == "makemore" || name == "makemore_eager") {
    // Matmuls only (forward and their gradients, minus the unneeded input gradient of the
    // first): embedding 27x10, hidden 30x200, output 200x27.
    double fwd = 2 * d(0) * (3 * 27 * 10 + 30 * 200 + 200 * 27);
    double params = 27 * 10 + 30 * 200 + 200 + 200 * 27 + 27;
    return {3 * fwd - 2 * d(0) * 3 * 27 * 10, 4 * (d(0) * 4 + 3 * params)};
  }
  return {};
}

std::unique_ptr<Instance> make_instance(const std::string& full_name, const Size& s, const Device& dev) {
  const WorkloadInfo& info = find_workload(full_name);
  if (!info.unavailable.empty()) throw ValueError(info.unavailable);
  const auto [name, dtype] = split_dtype(full_name);
  // Half rows: the result is rounded once (a relative error of half the format's ulp on top of
  // the f32 workload's tolerance) when the work is one kernel; under the fusion policies none and
  // elementwise a matmul is a product kernel and a sum kernel, and the products are rounded too.
  // So a half matmul's inputs are multiples of 1/8 in [-1, 1]: every product (a multiple of 1/64,
  // at most 1) is exact in the half, every partial sum (k of them, a multiple of 1/64) exact in
  // f32 for k < 2^18, and only the final rounding remains under every policy. (The time of a
  // GEMM does not depend on the values.)
  const double round_rel = dtype == DType::BF16 ? 1.0 / 256 : dtype == DType::F16 ? 1.0 / 2048 : 0.0;
  auto input = [&, dtype = dtype, name = name](Shape shape, uint64_t seed) {
    Tensor t = uniform(std::move(shape), seed, dev);
    if (dtype == DType::F32) return t;
    if (name == "matmul") t = (t * 8.0).round() * 0.125;
    return t.cast(dtype).realize();
  };
  using V = std::vector<std::vector<double>>;
  using Idx = std::vector<size_t>;
  if (name == "matmul") {
    int64_t m = s[0], k = s[1], n = s[2];
    auto naive = [=](const V& in, const Idx& idx) {
      std::vector<double> out;
      for (size_t e : idx) {
        int64_t i = int64_t(e) / n, j = int64_t(e) % n;
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += in[0][i * k + p] * in[1][p * n + j];
        out.push_back(acc);
      }
      return out;
    };
    return std::make_unique<ExprInstance>(std::vector<Tensor>{input({m, k}, 1), input({k, n}, 2)},
                                          [](const std::vector<Tensor>& t) { return t[0].matmul(t[1]); }, naive,
                                          1e-5 * double(k), 1e-3 + round_rel, size_t(m * n), 4096);
  }
  auto elementwise_naive = [](std::function<double(const V&, size_t)> f) {
    return [f](const V& in, const Idx& idx) {
      std::vector<double> out;
      for (size_t e : idx) out.push_back(f(in, e));
      return out;
    };
  };
  if (name == "elementwise") {
    int64_t n = s[0];
    return std::make_unique<ExprInstance>(
        std::vector<Tensor>{input({n}, 1), input({n}, 2), input({n}, 3)},
        [](const std::vector<Tensor>& t) { return t[0].exp() * t[1] + t[2]; },
        // Halves: exp(a) is computed as exp2(a * log2(e)) with the constant a CONST of the
        // half dtype (rounded to it), so the error is that of the terms (up to e + 1), not of d.
        elementwise_naive([](const V& in, size_t i) { return std::exp(in[0][i]) * in[1][i] + in[2][i]; }),
        1e-5 + 4 * round_rel, 1e-5 + round_rel,
        size_t(n), size_t(n));
  }
  if (name == "muladd") {
    int64_t n = s[0];
    return std::make_unique<ExprInstance>(
        std::vector<Tensor>{input({n}, 1), input({n}, 2), input({n}, 3)},
        [](const std::vector<Tensor>& t) { return t[0] * t[1] + t[2]; },
        elementwise_naive([](const V& in, size_t i) { return in[0][i] * in[1][i] + in[2][i]; }),
        1e-6 + 2 * round_rel, 1e-6 + round_rel, size_t(n), size_t(n));
  }
  int64_t r = s[0], c = s.size() > 1 ? s[1] : 1;
  if (name == "softmax")
    return std::make_unique<ExprInstance>(
        std::vector<Tensor>{uniform({r, c}, 1, dev)}, [](const std::vector<Tensor>& t) { return t[0].softmax(-1); },
        elementwise_naive([c](const V& in, size_t e) {
          size_t row = e / size_t(c);
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < c; ++j) mx = std::max(mx, in[0][row * c + j]);
          for (int64_t j = 0; j < c; ++j) sum += std::exp(in[0][row * c + j] - mx);
          return std::exp(in[0][e] - mx) / sum;
        }),
        1e-6, 1e-4, size_t(r * c), 65536);
  if (name == "log_softmax")
    return std::make_unique<ExprInstance>(
        std::vector<Tensor>{uniform({r, c}, 1, dev)}, [](const std::vector<Tensor>& t) { return t[0].log_softmax(-1); },
        elementwise_naive([c](const V& in, size_t e) {
          size_t row = e / size_t(c);
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < c; ++j) mx = std::max(mx, in[0][row * c + j]);
          for (int64_t j = 0; j < c; ++j) sum += std::exp(in[0][row * c + j] - mx);
          return in[0][e] - mx - std::log(sum);
        }),
        1e-6, 1e-4, size_t(r * c), 65536);
  if (name == "layer_norm_step") return std::make_unique<LayerNormStepInstance>(r, c, dev);
  if (name == "cross_entropy")
    return std::make_unique<ExprInstance>(
        std::vector<Tensor>{uniform({r, c}, 1, dev),
                            (Tensor::rand({r}, 2, DType::F32, dev) * double(c)).cast(DType::I64).realize()},
        [](const std::vector<Tensor>& t) { return nn::cross_entropy(t[0], t[1]); },
        [r, c](const V& in, const Idx&) {
          double total = 0;
          for (int64_t row = 0; row < r; ++row) {
            double mx = -1e300, sum = 0;
            for (int64_t j = 0; j < c; ++j) mx = std::max(mx, in[0][row * c + j]);
            for (int64_t j = 0; j < c; ++j) sum += std::exp(in[0][row * c + j] - mx);
            total += std::log(sum) + mx - in[0][row * c + int64_t(in[1][size_t(row)])];
          }
          return std::vector<double>{total / double(r)};
        },
        1e-5, 1e-4, 1, 1);
  if (name == "layer_norm")
    return std::make_unique<ExprInstance>(
        std::vector<Tensor>{uniform({r, c}, 1, dev), uniform({c}, 2, dev), uniform({c}, 3, dev)},
        [](const std::vector<Tensor>& t) {
          // nn::LayerNorm's graph (core/src/nn/modules.cpp) on these inputs.
          Tensor centered = t[0] - t[0].mean(-1, true);
          return centered * (centered.square().mean(-1, true) + 1e-5).sqrt().recip() * t[1] + t[2];
        },
        elementwise_naive([c](const V& in, size_t e) {
          size_t row = e / size_t(c);
          double mean = 0, var = 0;
          for (int64_t j = 0; j < c; ++j) mean += in[0][row * c + j];
          mean /= double(c);
          for (int64_t j = 0; j < c; ++j) var += (in[0][row * c + j] - mean) * (in[0][row * c + j] - mean);
          const size_t j = e % size_t(c);
          return (in[0][e] - mean) / std::sqrt(var / double(c) + 1e-5) * in[1][j] + in[2][j];
        }),
        1e-5, 1e-4, size_t(r * c), 65536);
  if (name == "sum_axis0" || name == "sum_axis1") {
    bool rows = name == "sum_axis1";
    return std::make_unique<ExprInstance>(
        std::vector<Tensor>{input({r, c}, 1)},
        [rows](const std::vector<Tensor>& t) { return t[0].sum(rows ? 1 : 0); },
        elementwise_naive([r, c, rows](const V& in, size_t e) {
          double acc = 0;
          for (int64_t k = 0; k < (rows ? c : r); ++k) acc += rows ? in[0][e * c + k] : in[0][k * c + e];
          return acc;
        }),
        1e-6 * double(rows ? c : r), 1e-4 + round_rel, size_t(rows ? r : c), size_t(rows ? r : c));
  }
  if (name == "transpose")
    return std::make_unique<ExprInstance>(
        std::vector<Tensor>{uniform({r, c}, 1, dev)},
        [](const std::vector<Tensor>& t) { return t[0].transpose().contiguous(); },
        elementwise_naive([r, c](const V& in, size_t e) { return in[0][(e % size_t(r)) * c + e / size_t(r)]; }), 0, 0,
        size_t(r * c), size_t(r * c));
  if (name == "all_reduce") return std::make_unique<AllReduceInstance>(s[0], dev);
  if (name == "mlp") return std::make_unique<MlpInstance>(s[0], dev);
  if (name == "makemore") return std::make_unique<MakemoreInstance>(s[0], dev, true);
  if (name == "makemore_eager") return std::make_unique<MakemoreInstance>(s[0], dev, false);
  if (name == "makemore_mlp") return std::make_unique<MakemoreInstance>(s[0], dev, true, 32, 1024);
  if (is_cnn_workload(name)) return make_cnn_instance(name, s, dev);
  throw ValueError("workload " + name + " has no implementation");
}

}  // namespace ravel::bench
