// bench_global_view_dp: data parallelism written two ways, timed in interleaved rounds (docs/distributed.md,
// "Global view: tensors split across ranks", and Note [Entered gradient buckets]):
//   mpirun --oversubscribe -np N build/bin/bench_global_view_dp [--rounds R] [--steps S]
//   global    a MeshTensor program: the batch split across the ranks, every parameter replicated
//             (entered), the gradients of the one global loss; entered cotangents in buckets;
//   unbucketed the same program with one all-reduce per entered value (as before decision 75);
//   mesh+dp   Mesh::shard_batch, the local loss times batch_share(), Mesh::all_reduce of the
//             gradients (DataParallel's buckets).
// The model: a two-layer MLP, batch 256 split across the ranks, 64 -> 256 -> 16, tanh, mean
// squared error; each step is the loss and an SGD update realized in one pass. One tbb_cpu device
// per rank. Rank 0 prints, per way, the median of the rounds' mean step time and [min, max] over
// the rounds, in microseconds, and the ratio of the medians to mesh+dp. The first step of each way
// is checked against the others (the same loss). --only NAME times one way (for a profiler). A
// benchmark, never a test.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "distributed/entered_buckets.hpp"
#include "ravel/autodiff.hpp"
#include "ravel/distributed.hpp"
#include "ravel/mesh_tensor.hpp"
#include "ravel/ravel.hpp"

namespace dist = ravel::distributed;
using dist::MeshTensor;
using ravel::Tensor;

namespace {

constexpr int64_t kBatch = 256, kIn = 64, kHidden = 256, kOut = 16;
constexpr double kLr = 1e-3;

std::vector<Tensor> initial_parameters() {
  return {Tensor::randn({kIn, kHidden}, 3) * 0.1, Tensor::zeros({kHidden}), Tensor::randn({kHidden, kOut}, 4) * 0.1,
          Tensor::zeros({kOut})};
}

template <class M>
M forward_loss(const M& x, const M& y, const std::vector<M>& p) {
  const M d = (x.matmul(p[0]) + p[1]).tanh().matmul(p[2]) + p[3] - y;
  return (d * d).mean();
}

// One way of writing the step: its parameters and a step that returns the loss.
struct Way {
  std::string name;
  std::vector<Tensor> params;
  std::function<Tensor()> step;
  std::vector<double> rounds_us;
  double first_loss = 0;
};

void update(std::vector<Tensor>& params, const std::vector<Tensor>& grads, const Tensor& loss) {
  std::vector<Tensor> next{loss};
  for (size_t i = 0; i < params.size(); ++i) next.push_back(params[i] - grads[i] * kLr);
  ravel::realize(next);  // the update kernels are the gradients' first readers
  for (size_t i = 0; i < params.size(); ++i) params[i].assign(next[i + 1]);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  int rounds = 7, steps = 20;
  std::string only;  // --only NAME: time that way alone (for a profiler)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--only") only = argv[i + 1];
    else if (k == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (k == "--steps") steps = std::max(1, std::atoi(argv[i + 1]));
  }
  dist::init();
  const ravel::Device dev{"tbb_cpu", 0};
  const dist::Mesh mesh({dev});
  const Tensor X = Tensor::randn({kBatch, kIn}, 1), Y = Tensor::randn({kBatch, kOut}, 2);

  std::vector<Way> ways(3);
  // The global view (twice: bucketed and not).
  const MeshTensor x = mesh.shard(X, 0), y = mesh.shard(Y, 0);
  ravel::realize({x.local(), y.local()});
  std::vector<MeshTensor> placed;
  for (const Tensor& t : initial_parameters()) placed.push_back(mesh.as_replicated(mesh.replicate(t)));
  for (int w = 0; w < 2; ++w) {
    ways[w].name = w == 0 ? "global" : "unbucketed";
    for (const MeshTensor& m : placed) ways[w].params.push_back(ravel::Tensor::zeros_like(m.local()) + m.local());
    ravel::realize(ways[w].params);
    Way* way = &ways[w];
    const bool buckets = w == 0;
    way->step = [&, way, buckets] {
      dist::detail::set_entered_buckets(buckets);
      auto [loss, g] = ravel::value_and_grad(
          [&](const std::vector<Tensor>& q) {
            std::vector<MeshTensor> p;
            for (size_t i = 0; i < q.size(); ++i) p.push_back(placed[i].with_local(q[i]));
            return forward_loss(x, y, p).local();
          },
          way->params);
      update(way->params, g, loss);
      return loss;
    };
  }
  // Mesh + DataParallel.
  const Tensor xl = mesh.shard_batch(X), yl = mesh.shard_batch(Y);
  ravel::realize({xl, yl});
  ways[2].name = "mesh+dp";
  for (const Tensor& t : initial_parameters()) ways[2].params.push_back(mesh.replicate(t));
  ravel::realize(ways[2].params);
  ways[2].step = [&] {
    Way& way = ways[2];
    auto [loss, g] = ravel::value_and_grad(
        [&](const std::vector<Tensor>& q) { return forward_loss(xl, yl, q) * mesh.batch_share(); }, way.params);
    update(way.params, mesh.all_reduce(g), loss);
    return loss;
  };

  // The check: the first step's loss is the same global loss every way (mesh+dp's summed over ranks).
  for (Way& w : ways) {
    Tensor l = w.step();
    if (w.name == "mesh+dp") l = dist::all_reduce(l);
    w.first_loss = l.item<double>();
  }
  bool checked = true;
  for (const Way& w : ways) checked = checked && std::abs(w.first_loss - ways[0].first_loss) < 1e-4 * (1 + std::abs(ways[0].first_loss));
  for (Way& w : ways) w.step();  // warm-up
  for (int r = 0; r < rounds; ++r) {
    for (Way& w : ways) {  // interleaved: each round runs every way
      if (!only.empty() && w.name != only) {
        w.rounds_us.push_back(1);
        continue;
      }
      dist::barrier();
      const auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) w.step();
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      w.rounds_us.push_back(us / steps);
    }
  }
  dist::detail::set_entered_buckets(true);
  if (dist::rank() == 0) {
    std::printf("global-view data parallelism, %d ranks, MLP %lld -> %lld -> %lld, batch %lld; %d rounds x %d steps; checked %s\n",
                dist::world_size(), static_cast<long long>(kIn), static_cast<long long>(kHidden),
                static_cast<long long>(kOut), static_cast<long long>(kBatch), rounds, steps, checked ? "yes" : "NO");
    const double base = median(ways[2].rounds_us);
    for (const Way& w : ways) {
      const auto [lo, hi] = std::minmax_element(w.rounds_us.begin(), w.rounds_us.end());
      std::printf("  %-11s %8.1f us [%.1f, %.1f]  %.2fx mesh+dp\n", w.name.c_str(), median(w.rounds_us), *lo, *hi,
                  median(w.rounds_us) / base);
    }
  }
  dist::finalize();
  return checked ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_global_view_dp: %s\n", e.what());
  return 1;
}
