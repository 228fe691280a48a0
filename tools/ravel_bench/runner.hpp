// Running a benchmark config: every workload x size over the config's devices x fusion policies
// (interleaved repetition by repetition, so that drift in the machine's speed hits every variant
// alike), then each peer for the same workload and size.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "bench_config.hpp"

namespace ravel::bench {

// One row of the results: one runner on one workload at one size.
struct Row {
  std::string workload, size;
  std::string runner = "ravel";   // "ravel" or the peer's name
  std::string device, policy;     // "-" for peers
  std::string status = "ok";      // "ok", "failed" or "unavailable"
  std::string message;            // why it failed or is unavailable
  int reps = 0;
  double median_ms = 0, min_ms = 0, max_ms = 0, mean_ms = 0;
  double flops = 0, bytes = 0;    // nominal work of one repetition
  bool flop_bound = false;        // throughput in GFLOP/s, else GB/s
  double throughput = 0;          // from the median
  double kernels = -1;            // kernels launched per repetition (Ravel rows; -1: unknown)
  double bytes_moved = -1;        // bytes read + written by those kernels per repetition
  std::string checked = "no";     // "yes": the result matched the naive computation
  std::string threads;            // the runner's thread settings, as it reports them
  double ratio = 0;               // baseline median / this median (>1: faster); 0: none
  bool is_baseline = false;
  std::string label() const;      // "ravel tbb_cpu:0 full", "numpy"
  const char* unit() const { return flop_bound ? "GFLOP/s" : "GB/s"; }
};

struct RunOptions {
  bool progress = true;    // a progress line on stderr
  bool peers = true;       // run the config's peers
  bool ravel = true;       // run Ravel's rows (false: the peers only)
  std::string bin_dir;     // substituted for {bin} in peer commands
};

struct RunResult {
  std::vector<Row> rows;
  int failures = 0;  // failed rows (a missing device, a failing or wrong workload, a failing peer)
};

// Runs against the process-wide Runtime (the caller resets it with the same config file).
RunResult run_bench(const BenchConfig& config, const RunOptions& options);

// Threads a peer is told to use (config.peer_threads, or every core this process may use).
int peer_thread_count(const BenchConfig& config);

// The peer protocol (docs/bench.md): runs `peer` for one workload and size; one row back.
Row run_peer(const BenchConfig& config, const PeerSpec& peer, const std::string& workload, const Size& size,
             int warmup, int reps, const std::string& bin_dir);

}  // namespace ravel::bench
