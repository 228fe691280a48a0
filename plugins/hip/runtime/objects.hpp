// The plugin's handles and their registry: every handle the host passes back is checked here.
#pragma once

#include "hip_port.hpp"

#include <ravel/backend.hpp>
#include <ravel/plugin_kit.hpp>

#include <atomic>
#include <mutex>
#include <string>

struct rvl_stream {
  int32_t device;
  hipStream_t stream;  // a blocking stream: it orders with the legacy default stream
};
struct rvl_buffer {
  int32_t device;
  void* data;   // device memory; NULL only when size == 0
  uint64_t size;  // bytes asked for (the allocator's block may be larger)
  rvl_stream* last_stream;  // last plugin stream that used it (NULL: default stream only)
  // Set for foreign memory (buffer_wrap, ABI 1.2): freeing calls release(release_context)
  // instead of giving `data` to the allocator, which never saw it.
  void (*release)(void*) = nullptr;
  void* release_context = nullptr;
};
struct rvl_event {
  int32_t device;
  hipEvent_t event;
};

namespace rvl::hip {

// The live handles, in the SDK's registry (<ravel/plugin_kit.hpp>), one set per kind.
struct Registry {
  std::atomic<bool> initialized{false};
  rvl::LiveSet<rvl_buffer> buffers{"buffer"};
  rvl::LiveSet<rvl_stream> streams{"stream"};
  rvl::LiveSet<rvl_event> events{"event"};
  // Guards every rvl_buffer::last_stream, and makes buffer_free (which reads it) and
  // stream_destroy (which clears it on every buffer) one step each with respect to the other.
  std::mutex last_stream_mu;
};
Registry& registry();

void require_initialized();
// Throw INVALID_ARGUMENT naming `what` unless the handle is live.
rvl_buffer* live_buffer(const rvl_buffer* b, const char* what);
rvl_stream* live_stream(const rvl_stream* s, const char* what);  // NULL stays NULL
rvl_event* live_event(const rvl_event* e, const char* what);
// The hip stream behind an ABI stream on `device` (NULL: the legacy default stream); a stream
// of another device is INVALID_ARGUMENT.
hipStream_t stream_on(const rvl_stream* s, int32_t device, const char* what);
// Records that `s` (a plugin stream; NULL: nothing to record) last used `b`, for buffer_free's
// fence (Note [Caching allocator]), under the registry's last-stream lock.
void remember_stream(rvl_buffer* b, rvl_stream* s);
using rvl::check_range;  // [offset, offset + bytes) inside `size` bytes, without overflow

}  // namespace rvl::hip
