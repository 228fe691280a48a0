// A row-parallel layer feeding a split layer (Megatron's sequence parallelism; decision 62,
// Note [Partial results] in core/src/tensor/sharded.hpp): y = tanh(shard(x @ w, 0)) with x [B, K]
// and w [K, N] split along K over the tbb_cpu devices RAVEL_TBB_DEVICES gives, so x @ w is a
// partial sum and the split wanted of it a reduce-scatter. Against what the eager reduction did
// before (an all-reduce of the partials, then each device cutting its rows: all_reduce(p)), with
// the plugin's collectives (RAVEL_PLUGIN_COLLECTIVES=1, ABI 1.9/1.12 members) and with the
// composition (=0). Interleaved rep by rep in one process; prints the median and min-max of each,
// in ms. Measures, never asserts.
//   RAVEL_TBB_DEVICES=N bench_partial [B (512)] [K (128)] [N (1024)] [reps (9)]
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
  const int64_t b = argc > 1 ? std::atoll(argv[1]) : 512, k = argc > 2 ? std::atoll(argv[2]) : 128;
  const int64_t n = argc > 3 ? std::atoll(argv[3]) : 1024;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 9;
  std::vector<Device> mesh;
  for (const auto& d : ravel::Runtime::get().devices())
    if (d.device.backend() == "tbb_cpu") mesh.push_back(d.device);
  const Tensor x = (Tensor::rand({b, k}, 1) - 0.5).shard(mesh, 1).realize();
  const Tensor w = ((Tensor::rand({k, n}, 2) - 0.5) * 0.1).shard(mesh, 0).realize();
  using Clock = std::chrono::steady_clock;
  std::map<std::string, std::vector<double>> ms;
  for (int rep = 0; rep < reps + 2; ++rep)
    for (const char* way : {"partial", "all_reduce", "partial composed", "all_reduce composed"}) {
      const std::string w_ = way;
      setenv("RAVEL_PLUGIN_COLLECTIVES", w_.find("composed") != std::string::npos ? "0" : "1", 1);
      const auto t0 = Clock::now();
      const Tensor p = x.matmul(w);
      const Tensor y = (w_.rfind("partial", 0) == 0 ? p : ravel::all_reduce(p)).shard(mesh, 0).tanh();
      y.realize();
      for (const Device& d : mesh) ravel::synchronize(d);
      if (rep >= 2) ms[way].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  std::printf("%zu tbb_cpu devices, [%lld, %lld] @ [%lld, %lld] split along K, output %lld KiB f32, %d reps\n",
              mesh.size(), static_cast<long long>(b), static_cast<long long>(k), static_cast<long long>(k),
              static_cast<long long>(n), static_cast<long long>(b * n * 4 >> 10), reps);
  for (auto& [way, v] : ms) {
    std::sort(v.begin(), v.end());
    std::printf("  %-20s %.3f ms (%.3f-%.3f)\n", way.c_str(), v[v.size() / 2], v.front(), v.back());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_partial: %s\n", e.what());
  return 1;
}
