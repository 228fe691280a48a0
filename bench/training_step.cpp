// Per-training-step overhead: an MLP 784 -> 512 -> 512 -> 10 (ReLU), batch 256, softmax
// cross-entropy, gradients by ravel::gradients (reverse mode) and an SGD update, realized once
// per step (loss and new parameters together). Every step builds the same graph around new
// parameter buffers: the kernel cache's target. Cache on and off alternate step by step; the
// report splits each step into graph building (tensor layer + autodiff), scheduling (walk, key,
// plan, lower, bind) and execution in the plugin.
//   bench_training_step [steps] [--forward]   (--forward: loss only, no gradients)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ravel/autodiff.hpp"
#include "ravel/ravel.hpp"

using ravel::Tensor;
using Clock = std::chrono::steady_clock;
static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Step {
  double build = 0, total = 0, schedule = 0, execute = 0;
  int64_t kernels = 0, hits = 0, misses = 0;
};

int main(int argc, char** argv) {
  int steps = 20;
  bool forward_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--forward") == 0) forward_only = true;
    else steps = std::atoi(argv[i]);
  }
  const int64_t B = 256;
  std::vector<Tensor> params = {Tensor::randn({784, 512}, 1) * 0.05f, Tensor::zeros({512}),
                                Tensor::randn({512, 512}, 2) * 0.05f, Tensor::zeros({512}),
                                Tensor::randn({512, 10}, 3) * 0.05f,  Tensor::zeros({10})};
  Tensor x = Tensor::randn({B, 784}, 4);
  Tensor y = (Tensor::rand({B}, 5) * 10.0f).cast(ravel::DType::I64).one_hot(10);
  ravel::realize(params);
  ravel::realize({x, y});

  auto step = [&](bool cache) {
    ravel::FusionOptions o;
    o.cache_kernels = cache;
    ravel::set_fusion_options(o);
    ravel::reset_stats();
    Step s;
    const auto t0 = Clock::now();
    auto mlp = [&](const std::vector<Tensor>& p) {
      Tensor h1 = (x.matmul(p[0]) + p[1]).relu();
      Tensor h2 = (h1.matmul(p[2]) + p[3]).relu();
      Tensor logits = h2.matmul(p[4]) + p[5];
      return -(logits.log_softmax(-1) * y).sum(-1).mean();
    };
    std::vector<Tensor> targets;
    Tensor loss = mlp(params);
    targets.push_back(loss);
    std::vector<Tensor> next;
    if (!forward_only) {
      std::vector<Tensor> g = ravel::gradients(loss, params);
      for (size_t i = 0; i < params.size(); ++i) next.push_back(params[i] - g[i] * 0.01f);
      targets.insert(targets.end(), next.begin(), next.end());
    }
    s.build = since(t0);
    ravel::realize(targets);
    s.total = since(t0);
    if (!forward_only) params = next;
    auto st = ravel::cumulative_stats();
    s.schedule = st.schedule_seconds;
    s.execute = st.execute_seconds;
    s.kernels = st.programs + st.contractions;
    s.hits = st.cache_hits;
    s.misses = st.cache_misses;
    return s;
  };
  for (int i = 0; i < 2; ++i) step(true), step(false);  // warm-up (fills the cache)
  std::vector<Step> on, off;
  for (int i = 0; i < steps; ++i) on.push_back(step(true)), off.push_back(step(false));
  auto report = [&](const char* name, std::vector<Step> v) {
    std::sort(v.begin(), v.end(), [](const Step& a, const Step& b) { return a.total < b.total; });
    const Step& m = v[v.size() / 2];
    std::printf("cache %-3s: step %.3f ms = build graph %.3f ms + schedule %.3f ms + execute %.3f ms + other %.3f ms;"
                " %lld kernels, %lld hits, %lld misses\n",
                name, m.total * 1e3, m.build * 1e3, m.schedule * 1e3, m.execute * 1e3,
                (m.total - m.build - m.schedule - m.execute) * 1e3, static_cast<long long>(m.kernels),
                static_cast<long long>(m.hits), static_cast<long long>(m.misses));
    return m;
  };
  std::printf("MLP 784-512-512-10, batch %lld, %s, %d steps per setting (alternating), median step shown\n",
              static_cast<long long>(B), forward_only ? "forward + loss only" : "forward + backward + SGD update", steps);
  Step a = report("on", on), b = report("off", off);
  std::printf("scheduling per step, cache off / cache on: %.1f (%.1f us -> %.1f us per kernel)\n",
              b.schedule / a.schedule, b.schedule / std::max<int64_t>(1, b.kernels) * 1e6,
              a.schedule / std::max<int64_t>(1, a.kernels) * 1e6);
  return 0;
}
