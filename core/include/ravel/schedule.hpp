// The scheduler's knobs and counters: the fusion policy and kernel statistics.
//
// Fusion policies (docs/config.md, "fusion"):
//   none         one kernel per primitive (a matmul is a product kernel and a sum kernel)
//   elementwise  chains of elementwise ops become one kernel program
//   reduce       also: elementwise producers fuse into the reduction that consumes them, and a
//                sum of a product becomes one contraction kernel
//   full         also: an elementwise epilogue (bias, activation) fuses into its contraction
// Results are the same under every policy, within floating-point rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace ravel {

enum class FusionPolicy : uint8_t { None, Elementwise, Reduce, Full };
const char* fusion_policy_name(FusionPolicy p);
// "none", "elementwise", "reduce", "full"; ConfigError naming the accepted names otherwise.
FusionPolicy parse_fusion_policy(const std::string& name);
std::ostream& operator<<(std::ostream& os, FusionPolicy p);

struct FusionOptions {
  FusionPolicy policy = FusionPolicy::Full;
  int max_instructions = 128;  // per kernel program (an op that would exceed it starts a new kernel)
  int max_inputs = 16;         // distinct input views per kernel program
  // An elementwise value used by several kernels is recomputed inside each (instead of being
  // written to memory once and read back) when its inlined size is at most this many
  // instructions; 0 disables recomputation. Only under `reduce` and `full`.
  int max_recompute_instructions = 8;
  // Kernel cache (Note [Kernel cache], core/src/schedule/kernel_cache.cpp): a realization of a
  // graph with the same structure as an earlier one reuses its plan and lowered kernels and
  // only binds buffers. RAVEL_KERNEL_CACHE=0 in the environment also disables it.
  bool cache_kernels = true;
  int kernel_cache_entries = 256;  // least recently used entries are evicted beyond this
};

// The options in force: the config's "fusion" section, with RAVEL_FUSION (a policy name)
// overriding the policy. set_fusion_options replaces them for this process.
FusionOptions fusion_options();
void set_fusion_options(const FusionOptions& options);

// Counters for kernels run by realizations. Bytes read and written count the elements a kernel
// touches through its views (padding excluded) times the element size.
struct KernelStats {
  int64_t realizations = 0;
  int64_t programs = 0;       // kernel programs launched (elementwise, reduce, copy)
  int64_t contractions = 0;   // contraction (GEMM) kernels launched
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  int64_t bytes_allocated = 0;  // device buffers allocated for results and intermediates
  double schedule_seconds = 0;  // planning and lowering
  double execute_seconds = 0;   // inside the plugin
  int64_t kernels() const { return programs + contractions; }
  // Realizations whose plan and kernels came from the kernel cache / had to be built (and were
  // then cached). A realization with nothing to run, or with the cache disabled, counts as neither.
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  // Copies between devices (Tensor::to, or mixed-device ops under on_mixed_devices = "copy").
  int64_t transfers = 0;
  int64_t bytes_transferred = 0;
};
KernelStats last_realization_stats();
KernelStats cumulative_stats();
void reset_stats();

// Empties the kernel cache (tests, benchmarks of the uncached path); its current entry count.
void clear_kernel_cache();
size_t kernel_cache_size();

}  // namespace ravel
