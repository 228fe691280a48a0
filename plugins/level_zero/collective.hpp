// The collectives across this plugin's devices: all_reduce (ABI 1.9), reduce_scatter and
// all_gather (ABI 1.12); Note [Level Zero collectives].
#pragma once

#include "registry.hpp"

#include <ravel/backend.hpp>
#include <ravel/validate_collective.hpp>

namespace rvl::l0 {

// Checks every argument (the SDK validator's rules for `kind`; throws INVALID_ARGUMENT), then
// runs the collective; throws DEVICE_ERROR on a driver failure. Returns when it is complete (the
// host orders it, as the peer copies). `op` is ignored for all_gather.
void run_collective(validate::CollectiveKind kind, int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                    rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op);

}  // namespace rvl::l0
