// bench_allreduce: Ravel's all-reduce of f32 tensors (ravel::distributed::all_reduce: realize,
// stage to host, argument header, the plugin's MPI_Iallreduce polled, upload) against the same
// bytes through a plain MPI_Allreduce (mpi_allreduce_peer.c), in one run:
//   mpirun -np 2 build/bin/bench_allreduce [--no-check]      (bench/distributed/run.sh runs both)
// Prints one line per size on rank 0: "ravel SIZE_BYTES MEDIAN_US". A benchmark, never a test.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ravel/distributed.hpp"
#include "ravel/ravel.hpp"

namespace dist = ravel::distributed;

int main(int argc, char** argv) try {
  dist::Options o;
  o.check_arguments = !(argc > 1 && std::strcmp(argv[1], "--no-check") == 0);
  dist::init(o);
  const char* label = o.check_arguments ? "ravel" : "ravel-nocheck";
  // RAVEL_BENCH_MAX_BYTES: stop after this size (a profile of the small sizes alone).
  const char* max_env = std::getenv("RAVEL_BENCH_MAX_BYTES");
  const int64_t max_bytes = max_env && *max_env ? std::atoll(max_env) : (int64_t{64} << 20);
  for (int64_t bytes : {int64_t{4} << 10, int64_t{16} << 10, int64_t{64} << 10, int64_t{1} << 20, int64_t{16} << 20, int64_t{64} << 20}) {
    if (bytes > max_bytes) break;
    const int64_t n = bytes / 4;
    const char* reps_env = std::getenv("RAVEL_BENCH_REPS");  // more repetitions for a profile
    const int reps = reps_env && *reps_env ? std::atoi(reps_env) : bytes <= (64 << 10) ? 200 : bytes <= (1 << 20) ? 40 : 8;
    // A tensor with a buffer of its own (a realized `full` is a constant, computed on each read).
    ravel::Tensor x = ravel::Tensor::from_vector(std::vector<float>(n, 1.0f + dist::rank()), {n});
    std::vector<double> us;
    for (int r = 0; r < reps + 2; ++r) {
      dist::barrier();
      const auto t0 = std::chrono::steady_clock::now();
      ravel::Tensor y = dist::all_reduce(x);
      y.realize();
      const double t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 2) us.push_back(t);  // two warm-up rounds
    }
    std::sort(us.begin(), us.end());
    if (dist::rank() == 0) std::printf("%s %lld %.2f\n", label, static_cast<long long>(bytes), us[us.size() / 2]);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
  return 1;
}
