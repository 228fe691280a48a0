// Plugin-wide object definitions: what the opaque ABI handles point to in this plugin.
// Every handle the host passes back is looked up in a registry before use (plugin.cpp), so a
// stale or foreign pointer is an RVL_STATUS_INVALID_ARGUMENT error, never a crash.
#pragma once

#include <ravel/backend.hpp>

#include <cstddef>
#include <cstdint>

// Device memory: plain host memory, 16-byte aligned (calloc), zero-filled on allocation.
struct rvl_buffer {
  std::byte* data;  // NULL only when size == 0
  uint64_t size;    // bytes
};
// The CPU backend completes all work before returning, so a stream only carries its device.
struct rvl_stream {
  int32_t device;
};
// An event marks completed work; it records its stream for diagnostics only.
struct rvl_event {
  const rvl_stream* stream;
};

namespace tmpl {

// Throws INVALID_ARGUMENT (naming `what`) unless `b` is a live buffer of this plugin.
rvl_buffer* lookup_buffer(const rvl_buffer* b, const char* what);
// NULL (the default stream) is accepted; anything else must be a live stream.
void check_stream(const rvl_stream* s);

}  // namespace tmpl
