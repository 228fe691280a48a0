// The case table, the error measure and the runner's report.
#pragma once

#include "plugin.hpp"

#include <functional>
#include <string>
#include <vector>

namespace rvl::conformance {

// What one case produced. A case body fills `error`/`threshold` when it measures something and
// throws Failure (fail) or Skip (not supported) otherwise it passes.
struct Measure {
  double error = 0;
  double threshold = 0;
};

struct Case {
  std::string group;
  std::string name;
  std::function<void(Measure&)> body;
};

std::vector<Case>& cases();
void add_case(const std::string& group, const std::string& name, std::function<void(Measure&)> body);

// The case groups, one registration function per file.
void register_abi_cases();
void register_elementwise_cases();
void register_view_cases();
void register_reduction_cases();
void register_logsumexp_cases();
void register_row_epilogue_cases();  // ABI 1.10
void register_row_chain_cases();     // ABI 1.11
void register_contraction_cases();
void register_window_contraction_cases();  // ABI 1.8 im2col block
void register_fused_cases();
void register_malformed_cases();
void register_edge_cases();
void register_half_rounding_cases();
void register_peer_cases();  // ABI 1.5 buffer_copy_peer, between devices
void register_all_reduce_cases();  // ABI 1.9 all_reduce, across devices
void register_scatter_gather_cases();  // ABI 1.12 reduce_scatter and all_gather

std::string dtype_str(int32_t dtype);
std::string op_str(int32_t op);

// ---- error measure -----------------------------------------------------------------------
// Per-op thresholds on the normalised mean squared error (NMSE) of float results:
//   sum((got - want)^2) / max(sum(want^2), n * 1e-30)
// over the finite expected elements; NaN and +-Inf positions must match exactly. Integer and
// bool results (and float results of integer/bool kernels) must match exactly.
// A single instruction's class comes from the op table (rvl::OpAccuracy, <ravel/op_table.hpp>);
// Accumulation is the harness's own class for whole kernels that sum (reductions,
// contractions, fused programs: the order of summation and FMA contraction may differ).
enum class Accuracy { Exact, Rounding, Transcendental, Accumulation };
double threshold(Accuracy a, int32_t dtype);  // 0 for non-float dtypes
Accuracy accuracy_of(int32_t op);             // the op table's class

// Compares whole buffers; returns the NMSE (0 for exact dtypes); throws Failure on a mismatch.
double compare(const ref::HostBuffer& got, const ref::HostBuffer& want, double threshold,
               const std::string& what);

// ---- runner (runner.cpp, isolation.cpp) -----------------------------------------------------
struct RunOptions {
  std::string filter;  // ECMAScript regex on "group/name"; empty = all
  std::string json;    // report path; empty = none
  bool list = false;
  bool verbose = false;
  std::string plugin_path;
  int32_t device = 0;
  // Run each case group in a child process (POSIX): a plugin that crashes, aborts or hangs in a
  // case fails that case, and the run goes on in a fresh process. Off: everything in-process.
  bool isolate = true;
  int case_timeout_s = 300;  // per case, in isolated mode (SIGALRM in the child)
  int jobs = 1;              // isolated mode: child processes at once (each its own session)
  // --decompose: ops to treat the device as lacking, so that kernels reach it rewritten by the
  // host's decompositions (<ravel/decompose.hpp>); "all": every instruction that has one.
  std::string decompose;
};

}  // namespace rvl::conformance
