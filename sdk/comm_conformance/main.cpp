// ravel-comm-conformance: checks a communicator plugin (collectives.h) from the outside, as a
// third party would run it, under the plugin's launcher:
//   mpirun -np 2 ravel-comm-conformance build/lib/ravel/plugins/libravel_comm_mpi.so [--big]
// Every rank runs every case; the failure counts are all-reduced so that every rank exits with
// the same status (0: all passed). --big adds a 64 MiB all-reduce. docs/distributed.md.
#include <cstdio>
#include <cstring>

#include "cases.hpp"

using namespace ravel::comm_conformance;

int main(int argc, char** argv) {
  const char* path = nullptr;
  bool big = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--big") == 0) big = true;
    else if (std::strcmp(argv[i], "--help") == 0 || path) path = nullptr, argc = 0;
    else path = argv[i];
  }
  if (!path) {
    std::puts("usage: [mpirun -np N] ravel-comm-conformance PLUGIN.so [--big]");
    return 2;
  }
  CommPlugin plugin(path);
  if (!plugin.api()) {
    std::fprintf(stderr, "ravel-comm-conformance: %s\n", plugin.error().c_str());
    return 1;
  }
  const rvl_collectives_api* api = plugin.api();
  rvl_collectives_info info{};
  info.struct_size = sizeof info;
  rvl_coll_probe_result probe{};
  probe.struct_size = sizeof probe;
  Status s = plugin.take(api->get_info(&info));
  if (s.ok()) s = plugin.take(api->probe(&probe));
  if (!s.ok() || !info.name) {
    std::fprintf(stderr, "ravel-comm-conformance: get_info/probe failed: %s\n", s.message.c_str());
    return 1;
  }
  if (!probe.available) {
    std::fprintf(stderr, "ravel-comm-conformance: %s: no launcher environment (%s); run under its launcher\n",
                 info.name, probe.reason);
    return 1;
  }
  if ((api->device_kinds() & RVL_COLL_DEVICE_HOST) == 0) {
    std::fprintf(stderr, "ravel-comm-conformance: %s does not read host memory\n", info.name);
    return 1;
  }
  rvl_communicator* world = nullptr;
  s = plugin.take(api->comm_create_world(nullptr, 60000, &world));
  if (!s.ok()) {
    std::fprintf(stderr, "ravel-comm-conformance: comm_create_world: %s: %s\n", status_name(s.code), s.message.c_str());
    return 1;
  }
  int32_t rank = -1, size = -1;
  plugin.take(api->comm_rank(world, &rank));
  plugin.take(api->comm_size(world, &size));
  Runner run{plugin, world, rank, size};
  if (rank != probe.rank || size != probe.world_size)
    run.fail("probe", "probe said rank " + std::to_string(probe.rank) + " of " + std::to_string(probe.world_size) +
                          ", the world communicator says " + std::to_string(rank) + " of " + std::to_string(size));
  if (rank == 0) std::printf("%s %s: %d ranks\n", info.name, info.version ? info.version : "", size);
  run_data_cases(run, big);
  run_error_cases(run);
  run_checked_cases(run);

  int64_t failed = run.failed, total_failed = 0;
  s = plugin.run([&](rvl_coll_request** q) { return api->all_reduce(world, &failed, &total_failed, 1, RVL_DTYPE_I64, RVL_COLL_SUM, q); },
                 60000);
  if (!s.ok()) total_failed = failed + 1;
  std::printf("[rank %d] %lld passed, %lld failed (all ranks: %lld failed)\n", rank, static_cast<long long>(run.passed),
              static_cast<long long>(run.failed), static_cast<long long>(total_failed));
  s = plugin.take(api->comm_destroy(world));
  if (!s.ok()) {
    std::printf("[rank %d] FAIL comm_destroy: %s\n", rank, s.message.c_str());
    return 1;
  }
  return total_failed == 0 ? 0 : 1;
}
