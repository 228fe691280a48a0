// The gradient of a parameter stored split and all-gathered for the computation (FSDP / ZeRO-3;
// Note [Group derivatives], decision 56) over the tbb_cpu devices RAVEL_TBB_DEVICES gives:
//   grad     ravel::grad with the plugin's collectives (RAVEL_PLUGIN_COLLECTIVES=1): the forward
//            all_gather and the backward reduce_scatter are the plugin's members (ABI 1.12);
//   tape     the same loss through the tape (backward(), Tensor::grad), which applies each
//            replica's own rule (slices moved and added by autodiff), with the same forward; it
//            is not a timing baseline for grad before decision 56 (the tape's own costs dominate:
//            ~80 ms against ~4 at 2 devices): docs/performance.md §6 times that with the core
//            built without the group rule;
//   composed ravel::grad with RAVEL_PLUGIN_COLLECTIVES=0 (copies and adds both ways).
// Interleaved rep by rep in one process; prints the median and min-max of each, in ms. Measures,
// never asserts.
//   RAVEL_TBB_DEVICES=N bench_gathered_gradient [elements per part (1 Mi)] [reps (9)] [sum|matmul]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Device;
using ravel::Tensor;

int main(int argc, char** argv) try {
  const int64_t part = argc > 1 ? std::atoll(argv[1]) : int64_t{1} << 20;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
  std::vector<Device> mesh;
  for (const auto& d : ravel::Runtime::get().devices())
    if (d.device.backend() == "tbb_cpu") mesh.push_back(d.device);
  const auto n = static_cast<int64_t>(mesh.size());
  // "sum": sum(all_gather(w) * c), the cotangent a replicated constant; "matmul": an FSDP layer,
  // tanh(x @ all_gather(w)) summed, x [256 n, K] split by rows, w [K, 256] split by rows, so each
  // replica's cotangent is device k's x_k^T @ dy_k.
  const bool matmul = argc > 3 && std::string(argv[3]) == "matmul";
  const int64_t rows = part / 256;
  Tensor w = (matmul ? Tensor::rand({n * rows, 256}, 3) * 0.05 : Tensor::rand({n * part}, 3)).shard(mesh, 0).realize();
  Tensor c = matmul ? Tensor::rand({256 * n, n * rows}, 4).shard(mesh, 0).realize()
                    : Tensor::rand({n * part}, 4).replicate(mesh).realize();
  w.requires_grad_();  // for the tape; grad() ignores it
  auto loss = [&](const Tensor& ws) {
    return matmul ? c.matmul(ravel::all_gather(ws)).tanh().sum() : (ravel::all_gather(ws) * c).sum();
  };
  auto finish = [&](const Tensor& g) {
    g.realize();
    for (const Device& d : mesh) ravel::synchronize(d);
  };
  using Clock = std::chrono::steady_clock;
  std::map<std::string, std::vector<double>> ms;
  for (int rep = 0; rep < reps + 2; ++rep)
    for (const char* way : {"grad", "tape", "composed"}) {
      const std::string w_ = way;
      setenv("RAVEL_PLUGIN_COLLECTIVES", w_ == "composed" ? "0" : "1", 1);
      const auto t0 = Clock::now();
      if (w_ == "tape") {
        w.zero_grad();
        loss(w).backward();
        finish(w.grad());
      } else {
        finish(ravel::grad([&](const std::vector<Tensor>& a) { return loss(a[0]); })({w})[0]);
      }
      if (rep >= 2) ms[way].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  std::printf("%s: %lld tbb_cpu devices, %lld f32 per part (all_gather output %lld MiB per device), %d reps\n",
              matmul ? "matmul" : "sum", static_cast<long long>(n), static_cast<long long>(part), static_cast<long long>(n * part * 4 >> 20), reps);
  for (auto& [way, v] : ms) {
    std::sort(v.begin(), v.end());
    std::printf("  %-9s %.2f ms (%.2f-%.2f)\n", way.c_str(), v[v.size() / 2], v.front(), v.back());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_gathered_gradient: %s\n", e.what());
  return 1;
}
