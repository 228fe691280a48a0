// The tbb_cpu table members, defined in plugin.cpp (info, devices, lifetime, kernels), memory.cpp
// (buffers and copies), streams.cpp (streams, events, synchronisation) and collective.cpp
// (all_reduce); table.cpp lists them.
#pragma once

#include <ravel/backend.h>

namespace tbbcpu {

rvl_error* probe(rvl_probe_result* out);
rvl_error* initialize();
void shutdown();
rvl_error* get_info(rvl_backend_info* out);
rvl_error* device_count(int32_t* out);
rvl_error* device_properties(int32_t device, rvl_device_properties* out);
rvl_error* buffer_allocate(int32_t device, uint64_t bytes, rvl_buffer** out);
rvl_error* buffer_free(rvl_buffer* buffer);
rvl_error* buffer_size(const rvl_buffer* buffer, uint64_t* out);
rvl_error* buffer_write(rvl_stream* stream, rvl_buffer* dst, uint64_t dst_offset, const void* src, uint64_t bytes);
rvl_error* buffer_read(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset, void* dst, uint64_t bytes);
rvl_error* buffer_copy(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset, rvl_buffer* dst,
                       uint64_t dst_offset, uint64_t bytes);
rvl_error* buffer_copy_peer(rvl_stream* src_stream, const rvl_buffer* src, uint64_t src_offset,
                            rvl_stream* dst_stream, rvl_buffer* dst, uint64_t dst_offset, uint64_t bytes);
rvl_error* buffer_address(const rvl_buffer* buffer, void** out);
rvl_error* buffer_wrap(int32_t device, void* address, uint64_t bytes, void (*release)(void*), void* context,
                       rvl_buffer** out);
rvl_error* stream_create(int32_t device, rvl_stream** out);
rvl_error* stream_destroy(rvl_stream* stream);
rvl_error* stream_synchronize(rvl_stream* stream);
rvl_error* event_record(rvl_stream* stream, rvl_event** out);
rvl_error* event_wait(rvl_stream* stream, rvl_event* event);
rvl_error* event_synchronize(rvl_event* event);
rvl_error* event_destroy(rvl_event* event);
rvl_error* execute_program(int32_t device, rvl_stream* stream, const rvl_program* program);
rvl_error* execute_contraction(int32_t device, rvl_stream* stream, const rvl_contraction* contraction);
rvl_error* synchronize(int32_t device);
// ABI 1.9, collective.cpp (Note [Host all-reduce]).
rvl_error* all_reduce(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs, rvl_buffer* const* outputs,
                      uint64_t count, int32_t dtype, int32_t op);
// ABI 1.12, collective.cpp (Note [Host reduce-scatter and all-gather]).
rvl_error* reduce_scatter(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                          rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op);
rvl_error* all_gather(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs, rvl_buffer* const* outputs,
                      uint64_t count, int32_t dtype);

}  // namespace tbbcpu
