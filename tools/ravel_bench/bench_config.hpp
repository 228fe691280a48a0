// The "bench" section of a ravel-bench config (docs/bench.md): which workloads at which sizes, on
// which devices, under which fusion policies, how often, which peers, and the baseline row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ravel/schedule.hpp"

namespace ravel::bench {

using Size = std::vector<int64_t>;

struct WorkloadSpec {
  std::string name;
  std::vector<Size> sizes;  // empty: the workload's default sizes
  // This workload's own counts, overriding bench.warmup / bench.repetitions (a 0.3 ms GEMM needs
  // a hundred repetitions for a stable median where a 130 ms one needs ten); -1: the bench's.
  int warmup = -1;
  int repetitions = -1;
};

struct PeerSpec {
  std::string name;                  // "numpy"
  std::vector<std::string> command;  // argv; "{bin}" and "{config_dir}" are substituted
};

// Which row the others are compared with: the first row of the same workload and size whose
// runner (and, for "ravel", device and policy, when given) match.
struct Baseline {
  std::string runner;   // "ravel" or a peer name; empty: no baseline
  std::string device;   // empty: any
  std::string policy;   // empty: any
};

struct BenchConfig {
  std::string source;      // the config file
  std::string config_dir;  // its folder: peers run there, relative output paths do not
  std::vector<WorkloadSpec> workloads;
  std::vector<std::string> devices;  // empty: the runtime's default device
  std::vector<FusionPolicy> policies;  // empty: the config's fusion.policy
  int warmup = 1;
  int repetitions = 5;
  bool check = true;  // check each workload's result once against a naive computation
  std::vector<PeerSpec> peers;
  int peer_timeout_s = 600;   // a peer running longer is stopped and its row fails
  int peer_threads = 0;       // threads each peer is told to use; 0: every core this process may use
  Baseline baseline;
  std::string output_dir = "ravel-bench-results";
  std::string output_name = "results";  // <dir>/<name>.json, .csv, .svg
};

// Reads the "bench" section of the file (the rest is the runtime's, checked by Runtime). Throws
// ConfigError naming the JSON path, the bad value and what was expected.
BenchConfig load_bench_config(const std::string& path);
BenchConfig parse_bench_config(const std::string& text, const std::string& source, const std::string& dir);

// The counts a workload runs with (its peers too): its own, else the bench's.
inline int warmup_of(const BenchConfig& c, const WorkloadSpec& w) { return w.warmup >= 0 ? w.warmup : c.warmup; }
inline int repetitions_of(const BenchConfig& c, const WorkloadSpec& w) {
  return w.repetitions >= 1 ? w.repetitions : c.repetitions;
}
// ravel-bench's --warmup / --reps: a count given (warmup >= 0, repetitions >= 1) becomes the
// bench's and replaces every workload's own.
void override_counts(BenchConfig& c, int warmup, int repetitions);

}  // namespace ravel::bench
