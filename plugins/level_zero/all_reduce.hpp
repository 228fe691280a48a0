// All-reduce across this plugin's devices (all_reduce, ABI 1.9; Note [Level Zero all-reduce]).
#pragma once

#include "registry.hpp"

#include <ravel/backend.hpp>

namespace rvl::l0 {

// Checks every argument (throws INVALID_ARGUMENT), then runs the collective; throws DEVICE_ERROR
// on a driver failure. Returns when it is complete (the host orders it, as the peer copies).
void run_all_reduce(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs, rvl_buffer* const* outputs,
                    uint64_t count, int32_t dtype, int32_t op);

}  // namespace rvl::l0
