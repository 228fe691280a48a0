// bench_dist_peer: Ravel across ranks as a ravel-bench peer (docs/bench.md, "Peers"), run under a
// launcher by bench/distributed/mpirun_peer.sh:
//   mpirun -np N build/bin/bench_dist_peer --workload all_reduce --size N --warmup W --reps R
//   mpirun -np N build/bin/bench_dist_peer --workload makemore --size B --warmup W --reps R
//   mpirun -np N build/bin/bench_dist_peer --workload makemore_mlp --size B --warmup W --reps R
// makemore: ravel-bench's makemore step (dist_makemore.hpp) data-parallel: the global batch B
// split over the ranks, gradients summed by DataParallel, inside one Jit capture; makemore_mlp:
// the same step with embedding 32, hidden 1024 and 64 KiB buckets (dist_makemore.hpp).
// Every rank all-reduces (sum) n f32 elements with ravel::distributed::all_reduce; each
// repetition starts after a barrier and rank 0's time of the call (realized result included) is
// reported, as the plain-MPI and PyTorch peers report theirs. The result is checked once against
// the sum computed locally (rank r's element i is (i + r) % 7, so the sum is exact). Only rank 0
// prints, one JSON line. A benchmark, never a test.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ravel/distributed.hpp"
#include "ravel/ravel.hpp"
#include "dist_makemore.hpp"

namespace dist = ravel::distributed;

int main(int argc, char** argv) try {
  std::string workload;
  int64_t n = -1;
  int warmup = 1, reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--workload") workload = v;
    else if (k == "--size") n = std::atoll(v.c_str());
    else if (k == "--warmup") warmup = std::atoi(v.c_str());
    else if (k == "--reps") reps = std::max(1, std::atoi(v.c_str()));
  }
  dist::init();
  const int rank = dist::rank(), size = dist::world_size();
  if (workload == "makemore" && n > 0) return run_makemore(n, warmup, reps);
  if (workload == "makemore_mlp" && n > 0) return run_makemore(n, warmup, reps, true);
  if (workload != "all_reduce" || n < 0) {
    if (rank == 0)
      std::printf("{\"workload\": \"%s\", \"size\": [%lld], \"unavailable\": \"bench_dist_peer runs all_reduce [n], makemore [batch] and makemore_mlp [batch] only\"}\n",
                  workload.c_str(), static_cast<long long>(std::max<int64_t>(n, 0)));
    return 0;
  }
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i + rank) % 7);
  const ravel::Tensor x = ravel::Tensor::from_vector(v, {n});
  // The check: every element against the sum over ranks, computed here.
  bool checked = true;
  const std::vector<float> got = dist::all_reduce(x).to_vector<float>();
  for (int64_t i = 0; i < n && checked; ++i) {
    int64_t want = 0;
    for (int r = 0; r < size; ++r) want += (i + r) % 7;
    checked = got[i] == static_cast<float>(want);
  }
  if (!checked) {
    if (rank == 0) std::fprintf(stderr, "bench_dist_peer: all_reduce gave a wrong sum\n");
    return 1;
  }
  std::vector<double> ms;
  for (int r = 0; r < warmup + reps; ++r) {
    dist::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    ravel::Tensor y = dist::all_reduce(x);
    y.realize();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r >= warmup) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  if (rank == 0)
    std::printf("{\"workload\": \"all_reduce\", \"size\": [%lld], \"median_ms\": %.6f, \"min_ms\": %.6f, "
                "\"max_ms\": %.6f, \"reps\": %d, \"checked\": true, \"threads\": \"%d ranks\"}\n",
                static_cast<long long>(n), ms[ms.size() / 2], ms.front(), ms.back(), reps, size);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_dist_peer: %s\n", e.what());
  return 1;
}
