// The fusion policy and its limits: how the scheduler may cut the graph into kernels.
//
// Fusion policies (docs/config.md, "fusion"):
//   none         one kernel per primitive (a matmul is a product kernel and a sum kernel)
//   elementwise  chains of elementwise ops become one kernel program
//   reduce       also: elementwise producers fuse into the reduction that consumes them, and a
//                sum of a product becomes one contraction kernel
//   full         also: an elementwise epilogue (bias, activation) fuses into its contraction
// Results are the same under every policy, within floating-point rounding. The options in force
// (config, RAVEL_FUSION, set_fusion_options) and the kernel counters are in ravel/schedule.hpp.
#pragma once

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
  int max_inputs = 20;         // distinct input views per kernel program (decision 76: a 3x3 depthwise conv + bias reads 19)
  // An elementwise value used by several kernels is recomputed inside each (instead of being
  // written to memory once and read back) when its inlined size is at most this many
  // instructions and the work recomputation adds, (uses - 1) x its size, is at most this too;
  // 0 disables recomputation. Only under `reduce` and `full`. The second bound keeps makemore's
  // tanh layer (7 readers) stored once: 298 -> 248-260 us of kernels per step, same losses.
  int max_recompute_instructions = 8;
  // Kernel cache (Note [Kernel cache], core/src/schedule/kernel_cache.cpp): a realization of a
  // graph with the same structure as an earlier one reuses its plan and lowered kernels and
  // only binds buffers. RAVEL_KERNEL_CACHE=0 in the environment (read when the runtime starts)
  // also disables it.
  bool cache_kernels = true;
  int kernel_cache_entries = 256;  // least recently used entries are evicted beyond this
};

}  // namespace ravel
