// The plugin's handles and their registry: every handle the host passes back is checked here.
#pragma once

#include "hip_port.hpp"

#include <ravel/backend.hpp>

#include <mutex>
#include <string>
#include <unordered_set>

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

struct Registry {
  std::mutex mu;
  bool initialized = false;
  std::unordered_set<const rvl_buffer*> buffers;
  std::unordered_set<const rvl_stream*> streams;
  std::unordered_set<const rvl_event*> events;
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
// Checks [offset, offset + bytes) lies inside `size` bytes without overflow.
void check_range(const char* what, uint64_t offset, uint64_t bytes, uint64_t size);

}  // namespace rvl::hip
