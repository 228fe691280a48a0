// The collectives across this plugin's devices: all_reduce (ABI 1.9), reduce_scatter and
// all_gather (ABI 1.12); Note [HIP collectives].
#pragma once

#include "objects.hpp"

#include <ravel/validate_collective.hpp>

namespace rvl::hip {

// Checks everything (the SDK validator's rules for `kind`: n, arrays, op, dtype, sizes, distinct
// devices, streams, aliasing), then queues the collective on the devices' streams: throws
// rvl::Error on bad arguments or a runtime failure. Returns before it completes. `op` is ignored
// for all_gather.
void run_collective(validate::CollectiveKind kind, int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                    rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op);

}  // namespace rvl::hip
