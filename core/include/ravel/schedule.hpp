// The scheduler's knobs and counters as the runtime applies them: the fusion options in force
// and kernel statistics. The policy and option types themselves are in ravel/fusion.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ravel/fusion.hpp"

namespace ravel {

// The options in force: the config's "fusion" section, with RAVEL_FUSION (a policy name, read
// when the runtime starts) overriding the policy. set_fusion_options replaces them for this
// process (across Runtime::reset too).
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
