// Copies between two HIP devices of this plugin (buffer_copy_peer, ABI 1.5; Note [Peer copies]).
#pragma once

#include "objects.hpp"

namespace rvl::hip {

// Records an event on `s` (of `device`) and makes `waiter` (of `waiter_device`) wait for it:
// later work on `waiter` starts after the work queued on `s` so far. Nothing blocks the host.
void order_streams(int32_t device, hipStream_t s, int32_t waiter_device, hipStream_t waiter, const char* what);

// Checks everything (live buffers, each stream on its buffer's device, ranges, overlap), then
// queues the copy: throws rvl::Error on bad arguments or a runtime failure.
void copy_peer(rvl_stream* src_stream, const rvl_buffer* src, uint64_t src_offset, rvl_stream* dst_stream,
               rvl_buffer* dst, uint64_t dst_offset, uint64_t bytes);

}  // namespace rvl::hip
