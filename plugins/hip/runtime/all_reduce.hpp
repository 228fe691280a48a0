// All-reduce across this plugin's devices (all_reduce, ABI 1.9; Note [HIP all-reduce]).
#pragma once

#include "objects.hpp"

namespace rvl::hip {

// Checks everything (n, arrays, op, dtype, sizes, distinct devices, streams, aliasing), then
// queues the collective on the devices' streams: throws rvl::Error on bad arguments or a runtime
// failure. Returns before it completes.
void run_all_reduce(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs, rvl_buffer* const* outputs,
                uint64_t count, int32_t dtype, int32_t op);

}  // namespace rvl::hip
