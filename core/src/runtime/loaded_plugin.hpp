// LoadedPlugin — one backend shared object, loaded, negotiated and initialised.
//
// It wraps the C ABI table: it checks each optional member before calling it (Note [ABI members])
// and turns every rvl_error into a typed ravel::Error carrying the plugin's message, destroying
// the error with the plugin's own error_destroy (whoever allocates frees). (Named so as not to be
// confused with the conformance kit's Plugin, which drives a plugin under test.)
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

class LoadedPlugin {
 public:
  // Loads, negotiates, probes and initialises (or returns the live LoadedPlugin loaded from
  // `path`); throws PluginError naming `path` and the reason.
  static std::shared_ptr<LoadedPlugin> load(const std::string& path);
  ~LoadedPlugin();
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;

  const rvl_backend_api& api() const { return *api_; }
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  const std::string& version() const { return version_; }
  int32_t device_count() const { return device_count_; }
  int32_t score() const { return score_; }  // the probe's preference; higher is better
  // Throws DeviceError (OutOfMemoryError for RVL_STATUS_OUT_OF_MEMORY) if `err` is not NULL,
  // with `what` and the plugin's message; always destroys `err`.
  void check(rvl_error* err, const std::string& what) const;
  // The message of `err` ("(no message)" if it has none); destroys `err`.
  std::string take_message(rvl_error* err) const;

 private:
  LoadedPlugin() = default;
  static std::shared_ptr<LoadedPlugin> load_new(const std::string& path);
  boost::dll::shared_library lib_;
  const rvl_backend_api* api_ = nullptr;
  std::string name_, path_, version_;
  int32_t device_count_ = 0;
  int32_t score_ = 0;
  bool initialized_ = false;
};

}  // namespace ravel::detail
