// The plugin's live objects and the checks every table member makes on handles from the host.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "stream.hpp"

struct rvl_buffer {
  rvl::l0::DeviceState* dev;
  void* ptr;          // device memory; NULL only when size == 0
  uint64_t size;      // bytes asked for
  uint64_t capacity;  // bytes of the block (its size class, Note [Buffer reuse])
  // Set for foreign USM memory (buffer_wrap, ABI 1.2): freeing calls release(release_context)
  // instead of giving `ptr` to the allocator, which never saw it.
  void (*release)(void*) = nullptr;
  void* release_context = nullptr;
};

namespace rvl::l0 {

struct Registry {
  std::mutex mu;  // guards everything below; never held while waiting on the device
  bool initialized = false;
  std::vector<std::unique_ptr<DeviceState>> devices;
  std::unordered_set<const rvl_buffer*> buffers;
  std::unordered_set<const rvl_stream*> streams;  // user streams (default ones are not here)
  std::unordered_set<const rvl_event*> events;
};

Registry& registry();

DeviceState& device_state(int32_t device);                 // initialised and existing
rvl_buffer* lookup_buffer(const rvl_buffer* b, const char* what);
rvl_event* lookup_event(const rvl_event* e, const char* what);
// `s` if live (and of `dev` when given), else the default stream of `dev` for NULL.
rvl_stream& resolve_stream(rvl_stream* s, DeviceState* dev, const char* what);

bool device_busy(DeviceState& dev);       // some stream of the device has queued work
void synchronize_device(DeviceState& dev);  // host waits for all of them; deferred blocks freed

}  // namespace rvl::l0
