// DeviceBuffer — device memory owned by a plugin; freed by the same plugin when the last
// reference goes (whoever allocates, frees). The layers before the runtime see it only as an
// opaque handle on a node (graph/node.hpp) and reach its contents through the Engine.
#pragma once

#include <cstdint>
#include <memory>

#include "ravel/backend.h"
#include "runtime/loaded_plugin.hpp"

namespace ravel::detail {

class DeviceBuffer {
 public:
  DeviceBuffer(std::shared_ptr<LoadedPlugin> plugin, int32_t device, uint64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  rvl_buffer* handle() const { return buffer_; }
  uint64_t bytes() const { return bytes_; }
  int32_t device() const { return device_; }
  LoadedPlugin& plugin() const { return *plugin_; }
  void write(const void* src, uint64_t bytes, uint64_t offset = 0);
  void read(void* dst, uint64_t bytes, uint64_t offset = 0) const;

 private:
  std::shared_ptr<LoadedPlugin> plugin_;
  int32_t device_;
  uint64_t bytes_;
  rvl_buffer* buffer_ = nullptr;
};

}  // namespace ravel::detail
