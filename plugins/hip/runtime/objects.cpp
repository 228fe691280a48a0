#include "objects.hpp"

namespace rvl::hip {

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: the plugin may be called until unload
  return *r;
}

void require_initialized() {
  if (!registry().initialized.load()) invalid("hip backend not initialized: call initialize() first");
}

rvl_buffer* live_buffer(const rvl_buffer* b, const char* what) { return registry().buffers.get(b, what); }

rvl_stream* live_stream(const rvl_stream* s, const char* what) {
  return s == nullptr ? nullptr : registry().streams.get(s, what);  // NULL: the default stream
}

rvl_event* live_event(const rvl_event* e, const char* what) { return registry().events.get(e, what); }

void remember_stream(rvl_buffer* b, rvl_stream* s) {
  if (!s) return;
  std::lock_guard<std::mutex> lock(registry().last_stream_mu);
  b->last_stream = s;
}

hipStream_t stream_on(const rvl_stream* s, int32_t device, const char* what) {
  rvl_stream* live = live_stream(s, what);
  if (!live) return nullptr;
  if (live->device != device)
    invalid(std::string(what) + ": stream belongs to hip:" + std::to_string(live->device) +
            ", the work to hip:" + std::to_string(device));
  return live->stream;
}

}  // namespace rvl::hip
