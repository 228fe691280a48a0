// The workloads ravel-bench runs (docs/bench.md): what each computes, its nominal work (the flop
// and byte counts its throughput is computed from) and a naive host computation that checks its
// result once, so that a benchmark never times wrong answers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench_config.hpp"
#include "ravel/device.hpp"
#include "workload.hpp"

namespace ravel::bench {

struct WorkloadInfo {
  std::string name;
  std::string description;
  size_t size_rank = 1;               // numbers per size
  std::string size_meaning;           // "m, k, n"
  std::vector<Size> default_sizes;
  bool flop_bound = false;            // throughput in GFLOP/s (else GB/s)
  std::string unavailable;            // non-empty: why this workload cannot run yet
};

const std::vector<WorkloadInfo>& workload_catalog();
const WorkloadInfo& find_workload(const std::string& name);  // the name must be in the catalog
Work work_of(const std::string& name, const Size& size);
std::unique_ptr<Instance> make_instance(const std::string& name, const Size& size, const Device& device);

}  // namespace ravel::bench
