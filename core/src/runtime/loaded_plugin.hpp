// LoadedPlugin — one backend shared object, loaded, negotiated and initialised.
//
// It wraps the C ABI table: it checks each optional member before calling it (Note [ABI members])
// and turns every rvl_error into a typed ravel::Error carrying the plugin's message, destroying
// the error with the plugin's own error_destroy (whoever allocates frees). (Named so as not to be
// confused with the conformance kit's Plugin, which drives a plugin under test.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/dll/shared_library.hpp>

#include "graph/ops.hpp"
#include "ravel/backend.h"
#include "ravel/device.hpp"

namespace ravel {
class Runtime;
}

namespace ravel::detail {

// Note [ABI members]
// A member is usable iff it lies inside the table's struct_size (an older minor version may
// end before it) and is not NULL. Calling anything else is what crashed hosts of older plugins
// (iree#19223), so every call site goes through has().
#define RAVEL_API_HAS(api, member)                                                        \
  ((api) != nullptr &&                                                                    \
   offsetof(rvl_backend_api, member) + sizeof((api)->member) <= (api)->struct_size &&     \
   (api)->member != nullptr)

// Decides from a plugin's name (read with get_info, before probe or initialize run) whether to
// start it: "" admits it, anything else is the reason it is skipped.
using AdmitFn = std::function<std::string(const std::string& name)>;

// Thrown by LoadedPlugin::load for a plugin the admit function turned away (not an error).
struct PluginNotAdmitted {
  std::string name, version, reason;
  uint32_t abi_major = 0, abi_minor = 0;
};

class LoadedPlugin {
 public:
  // Opens the library, checks its table, reads its name (get_info may precede initialize,
  // docs/abi.md §4), asks `admit`, and only then probes and initialises it; or returns the live
  // LoadedPlugin loaded from `path`. Throws PluginError naming `path` and the reason —
  // including for a C++ exception that a misbehaving plugin lets escape through the C ABI —
  // or PluginNotAdmitted.
  // `name_out`, if given, receives the plugin's name as soon as it is known (so that a failure
  // after get_info is recorded against the name).
  static std::shared_ptr<LoadedPlugin> load(const std::string& path, const AdmitFn& admit = {},
                                            std::string* name_out = nullptr);
  ~LoadedPlugin();
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;

  const rvl_backend_api& api() const { return *api_; }
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  const std::string& version() const { return version_; }
  int32_t device_count() const { return device_count_; }
  static constexpr int32_t kMaxDevices = 1024;  // more from one plugin is refused (a broken plugin)
  int32_t score() const { return score_; }  // the probe's preference; higher is better
  // What the scheduler and the composites may ask of a device, read once when the plugin starts.
  struct DeviceCaps {
    uint32_t reduce_ops = RVL_REDUCE_OPS_BASIC;  // bit (1u << rvl_reduce_op); never 0 (ABI 1.4)
    uint64_t ops = RVL_OPS_1_0;                  // bit RVL_OP_BIT(rvl_op), as rvl::effective_ops reads it (1.6)
    uint32_t dtypes = (1u << RVL_DTYPE_COUNT_) - 1u;
    int32_t contraction_axes = 1;                // rvl_device_properties.contraction_axes (1.8 im2col), >= 1
    uint32_t reduce_epilogue_ops = 0;            // rvl_device_properties.reduce_epilogue_ops (1.10), within reduce_ops
    uint32_t reduce_chain_ops = 0;               // rvl_device_properties.reduce_chain_ops (1.11), within reduce_ops
    // buffer_address (1.2) gives host memory (1.3 dlpack_device_type kDLCPU, or unstated on a CPU
    // device): the host may read and write a buffer through it (Note [Host memory without staging]
    // in distributed/collective_op.cpp).
    bool host_addressable = false;
  };
  // The capabilities of `device` (0 .. device_count() - 1; others get the defaults).
  const DeviceCaps& caps(int32_t device) const;
  // Throws DeviceError (OutOfMemoryError for RVL_STATUS_OUT_OF_MEMORY) if `err` is not NULL,
  // with `what` and the plugin's message; always destroys `err`.
  void check(rvl_error* err, const std::string& what) const;
  // The message of `err` ("(no message)" if it has none); destroys `err`.
  std::string take_message(rvl_error* err) const;

 private:
  LoadedPlugin() = default;
  static std::shared_ptr<LoadedPlugin> open(const std::string& path);  // dlopen, table, get_info
  void start();                                                        // probe, initialize, devices
  boost::dll::shared_library lib_;
  const rvl_backend_api* api_ = nullptr;
  std::string name_, path_, version_;
  int32_t device_count_ = 0;
  int32_t score_ = 0;
  std::vector<DeviceCaps> caps_;
  bool initialized_ = false;
};

// What `device` of `rt` runs: its plugin's capabilities minus the settings' RAVEL_MASK_OPS
// (Note [Capabilities] in graph/ops.hpp). DeviceError unless the device exists.
OpSet device_op_set(const Runtime& rt, const Device& device);

}  // namespace ravel::detail
