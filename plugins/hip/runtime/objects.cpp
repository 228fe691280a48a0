#include "objects.hpp"

namespace rvl::hip {

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: the plugin may be called until unload
  return *r;
}

void require_initialized() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.initialized) invalid("hip backend not initialized: call initialize() first");
}

rvl_buffer* live_buffer(const rvl_buffer* b, const char* what) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (b == nullptr || r.buffers.count(b) == 0)
    invalid(std::string(what) + ": buffer " + (b ? "is not live (freed or foreign)" : "is NULL"));
  return const_cast<rvl_buffer*>(b);
}

rvl_stream* live_stream(const rvl_stream* s, const char* what) {
  if (s == nullptr) return nullptr;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.streams.count(s) == 0) invalid(std::string(what) + ": stream is not live (destroyed or foreign)");
  return const_cast<rvl_stream*>(s);
}

rvl_event* live_event(const rvl_event* e, const char* what) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (e == nullptr || r.events.count(e) == 0)
    invalid(std::string(what) + ": event " + (e ? "is not live (destroyed or foreign)" : "is NULL"));
  return const_cast<rvl_event*>(e);
}

hipStream_t stream_on(const rvl_stream* s, int32_t device, const char* what) {
  rvl_stream* live = live_stream(s, what);
  if (!live) return nullptr;
  if (live->device != device)
    invalid(std::string(what) + ": stream belongs to hip:" + std::to_string(live->device) +
            ", the work to hip:" + std::to_string(device));
  return live->stream;
}

void check_range(const char* what, uint64_t offset, uint64_t bytes, uint64_t size) {
  if (offset > size || bytes > size - offset)
    invalid(std::string(what) + ": byte range [" + std::to_string(offset) + ", " +
            std::to_string(offset) + " + " + std::to_string(bytes) + ") is outside the buffer of " +
            std::to_string(size) + " bytes");
}

}  // namespace rvl::hip
