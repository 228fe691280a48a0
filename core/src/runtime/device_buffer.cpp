#include "runtime/device_buffer.hpp"

#include <cstdio>
#include <string>

namespace ravel::detail {

DeviceBuffer::DeviceBuffer(std::shared_ptr<LoadedPlugin> plugin, int32_t device, uint64_t bytes)
    : plugin_(std::move(plugin)), device_(device), bytes_(bytes) {
  // Zero-byte tensors still get a (1-byte) buffer so every node has a handle.
  // The message only on failure: formatting it on every allocation was a visible part of a 4 KiB
  // all-reduce's fixed cost (docs/distributed.md, "The tensor path's fixed cost").
  if (rvl_error* e = plugin_->api().buffer_allocate(device, bytes ? bytes : 1, &buffer_))
    plugin_->check(e, "allocating " + std::to_string(bytes) + " bytes on device " + std::to_string(device));
}

DeviceBuffer::~DeviceBuffer() {
  rvl_error* e = plugin_->api().buffer_free(buffer_);
  if (e) {
    // A destructor cannot throw: report and go on (the plugin keeps ownership of the error).
    std::string msg = plugin_->take_message(e);
    std::fprintf(stderr, "ravel: warning: %s: freeing a buffer failed: %s\n", plugin_->name().c_str(),
                 msg.c_str());
  }
}

void DeviceBuffer::write(const void* src, uint64_t bytes, uint64_t offset) {
  if (pending_) end_deferred(pending_);
  if (bytes == 0) return;
  plugin_->check(plugin_->api().buffer_write(nullptr, buffer_, offset, src, bytes), "buffer_write");
}

void DeviceBuffer::read(void* dst, uint64_t bytes, uint64_t offset) const {
  if (pending_) end_deferred(pending_);
  if (bytes == 0) return;
  plugin_->check(plugin_->api().buffer_read(nullptr, buffer_, offset, dst, bytes), "buffer_read");
}

}  // namespace ravel::detail
