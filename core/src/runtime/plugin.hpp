// A loaded backend plugin and the device buffers it owns.
//
// Plugin wraps the C ABI table: it checks each optional member before calling it (Note [ABI
// members]) and turns every rvl_error into a typed ravel::Error carrying the plugin's message,
// destroying the error with the plugin's own error_destroy (whoever allocates frees).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <boost/dll/shared_library.hpp>

#include "ravel/backend.h"

namespace ravel::detail {

// Note [ABI members]
// A member is usable iff it lies inside the table's struct_size (an older minor version may
// end before it) and is not NULL. Calling anything else is what crashed hosts of older plugins
// (iree#19223), so every call site goes through has().
#define RAVEL_API_HAS(api, member)                                                        \
  ((api) != nullptr &&                                                                    \
   offsetof(rvl_backend_api, member) + sizeof((api)->member) <= (api)->struct_size &&     \
   (api)->member != nullptr)

class Plugin {
 public:
  // Loads, negotiates, probes and initialises (or returns the live Plugin already loaded from
  // `path`); throws PluginError naming `path` and the reason.
  static std::shared_ptr<Plugin> load(const std::string& path);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const rvl_backend_api& api() const { return *api_; }
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  const std::string& version() const { return version_; }
  int32_t device_count() const { return device_count_; }
  int32_t score() const { return score_; }  // the probe's preference; higher is better
  // Throws DeviceError (OutOfMemoryError for RVL_STATUS_OUT_OF_MEMORY) if `err` is not NULL,
  // with `what` and the plugin's message; always destroys `err`.
  void check(rvl_error* err, const std::string& what) const;

 private:
  Plugin() = default;
  static std::shared_ptr<Plugin> load_new(const std::string& path);
  boost::dll::shared_library lib_;
  const rvl_backend_api* api_ = nullptr;
  std::string name_, path_, version_;
  int32_t device_count_ = 0;
  int32_t score_ = 0;
  bool initialized_ = false;
};

// Device memory owned by a plugin; freed by the same plugin when the last reference goes.
class DeviceBuffer {
 public:
  DeviceBuffer(std::shared_ptr<Plugin> plugin, int32_t device, uint64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  rvl_buffer* handle() const { return buffer_; }
  uint64_t bytes() const { return bytes_; }
  int32_t device() const { return device_; }
  Plugin& plugin() const { return *plugin_; }
  void write(const void* src, uint64_t bytes, uint64_t offset = 0);
  void read(void* dst, uint64_t bytes, uint64_t offset = 0) const;

 private:
  std::shared_ptr<Plugin> plugin_;
  int32_t device_;
  uint64_t bytes_;
  rvl_buffer* buffer_ = nullptr;
};

}  // namespace ravel::detail
