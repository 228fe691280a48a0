// bench_comm_plugin: the communicator plugin alone (collectives.h, no tensors, no staging, no
// argument header): out-of-place f32 all-reduces on reused buffers, timed like the peer.
//   mpirun -np 2 build/bin/bench_comm_plugin build/lib/ravel/plugins/libravel_comm_mpi.so
// Prints "plugin SIZE_BYTES MEDIAN_US" on rank 0 (bench/distributed/run.sh reads it). With
// --checked (a third argument), all_reduce_checked (collectives.h 1.1) with a 96-byte header, as
// the core calls it, printed as "plugin-checked".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "comm_plugin.hpp"

using namespace ravel::comm_conformance;

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) return 2;
  const bool checked = argc == 3 && std::strcmp(argv[2], "--checked") == 0;
  CommPlugin p(argv[1]);
  if (!p.api()) {
    std::fprintf(stderr, "bench_comm_plugin: %s\n", p.error().c_str());
    return 1;
  }
  const rvl_collectives_api* api = p.api();
  if (checked && (!RVL_HAS_MEMBER(api, rvl_collectives_api, all_reduce_checked) || !api->all_reduce_checked)) {
    std::fprintf(stderr, "bench_comm_plugin: the plugin has no all_reduce_checked\n");
    return 1;
  }
  rvl_communicator* w = nullptr;
  if (Status s = p.take(api->comm_create_world(nullptr, 60000, &w)); !s.ok()) {
    std::fprintf(stderr, "bench_comm_plugin: %s\n", s.message.c_str());
    return 1;
  }
  int32_t rank = 0;
  p.take(api->comm_rank(w, &rank));
  const char* max_env = std::getenv("RAVEL_BENCH_MAX_BYTES");  // stop after this size
  const long max_bytes = max_env && *max_env ? std::atol(max_env) : (64L << 20);
  for (long bytes : {4L << 10, 16L << 10, 64L << 10, 1L << 20, 16L << 20, 64L << 20}) {
    if (bytes > max_bytes) break;
    const long n = bytes / 4;
    const int reps = bytes <= (64L << 10) ? 200 : bytes <= (1L << 20) ? 40 : 8;
    std::vector<float> in(n, 1.0f + rank), out(n);
    uint8_t header[96] = {1, 2, 3};
    std::vector<uint8_t> headers(96 * 64);
    std::vector<double> us;
    for (int r = 0; r < reps + 2; ++r) {
      p.run([&](rvl_coll_request** q) { return api->barrier(w, q); }, 60000);
      const auto t0 = std::chrono::steady_clock::now();
      Status s = p.run([&](rvl_coll_request** q) {
        if (checked)
          return api->all_reduce_checked(w, header, sizeof header, headers.data(), in.data(), out.data(), n,
                                         RVL_DTYPE_F32, RVL_COLL_SUM, q);
        return api->all_reduce(w, in.data(), out.data(), n, RVL_DTYPE_F32, RVL_COLL_SUM, q);
      }, 60000);
      if (!s.ok()) {
        std::fprintf(stderr, "bench_comm_plugin: %s\n", s.message.c_str());
        return 1;
      }
      if (r >= 2) us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    if (rank == 0) std::printf("%s %ld %.2f\n", checked ? "plugin-checked" : "plugin", bytes, us[us.size() / 2]);
  }
  p.take(api->comm_destroy(w));
  return 0;
}
