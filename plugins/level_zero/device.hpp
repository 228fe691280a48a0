// Drivers, devices and their properties, and one context per driver.
//
// Discovery (zeInit, then every driver's GPU devices) happens once, the first time probe,
// device_count or device_properties needs it; a machine without the loader or without a driver
// ends up with no devices and a reason the host can show. Contexts are made by initialize() (one
// per driver, shared by its devices, so buffers of devices of one driver can be copied between
// them) and destroyed by shutdown().
#pragma once

#include <level_zero/ze_api.h>
#include <ravel/backend.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ze_loader.hpp"

namespace rvl::l0 {

struct Device {
  int32_t index = 0;
  ze_driver_handle_t driver = nullptr;
  ze_device_handle_t handle = nullptr;
  ze_context_handle_t context = nullptr;  // set between initialize() and shutdown()

  std::string name;          // from the driver
  std::string arch;          // "dg2", "pvc", ... from the PCI id ("" when unknown)
  std::string details;       // "key=value; ..." for ravel-info
  bool fp64 = false;         // ZE_DEVICE_MODULE_FLAG_FP64
  bool is_gpu = true;
  uint64_t memory_bytes = 0;
  int32_t eu_count = 0;      // slices x sub-slices x EUs per sub-slice
  int32_t subgroup_size = 0; // the largest the device supports
  uint32_t max_group_size = 0;
  uint32_t local_memory = 0; // bytes of shared local memory per work-group
  uint32_t compute_ordinal = 0;  // command queue group with the COMPUTE flag
};

// The dtypes a device runs: every one (ABI 1.7's through Int8/Int16 registers and halves as
// bits computed in f32, Note [Halves in SPIR-V] in scalar_ops.cpp), f64 only with fp64 units.
inline uint32_t dtypes_of(const Device& d) {
  return RVL_DTYPES_ALL & ~(d.fp64 ? 0u : 1u << RVL_DTYPE_F64);
}

struct Discovery {
  const ZeApi* api = nullptr;  // null when the loader is missing
  std::vector<Device> devices;
  std::string reason;          // why there are no devices ("" when there are some)
};

// Runs discovery once (thread-safe) and returns its result; never throws.
Discovery& discovery();

// Creates the per-driver contexts (idempotent) / destroys them.
void create_contexts(Discovery& d);
void destroy_contexts(Discovery& d);

// Intel GPU generation from a PCI device id ("" when not recognised).
std::string intel_arch(uint32_t vendor, uint32_t device_id);

}  // namespace rvl::l0
