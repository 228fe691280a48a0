// The workloads ravel-bench runs (docs/bench.md): what each computes, its nominal work (the flop
// and byte counts its throughput is computed from) and a naive host computation that checks its
// result once, so that a benchmark never times wrong answers.
#pragma once

#include <stdexcept>

#include <memory>
#include <string>
#include <vector>

#include "bench_config.hpp"
#include "ravel/device.hpp"

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
std::string size_str(const Size& s);                          // "256x256x256"

// Nominal work of one repetition: the flops the math needs and the bytes it must move at least
// (inputs read once, outputs written once), whatever the schedule actually does.
struct Work {
  double flops = 0;
  double bytes = 0;
};
Work work_of(const std::string& name, const Size& size);

// One workload at one size with its inputs made and realized on one device.
class Instance {
 public:
  virtual ~Instance() = default;
  // One timed repetition: builds the graph and realizes it.
  virtual void run() = 0;
  // Runs once and compares with the naive host computation: "" when correct, else what differs.
  virtual std::string check() = 0;
};
// make_instance throws this where the workload cannot run on what this process has (an
// all_reduce over a plugin with one device): the row is reported unavailable, not failed.
struct Unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};
std::unique_ptr<Instance> make_instance(const std::string& name, const Size& size, const Device& device);

}  // namespace ravel::bench
