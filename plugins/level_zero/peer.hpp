// Copies between devices of this plugin (buffer_copy_peer, ABI 1.5; Note [Peer copies on Level Zero]).
#pragma once

#include "registry.hpp"

#include <ravel/backend.hpp>

namespace rvl::l0 {

// Checks every argument (throws INVALID_ARGUMENT), then copies; throws DEVICE_ERROR on a driver
// failure.
void copy_peer(rvl_stream* src_stream, const rvl_buffer* src, uint64_t src_offset, rvl_stream* dst_stream,
               rvl_buffer* dst, uint64_t dst_offset, uint64_t bytes);

}  // namespace rvl::l0
