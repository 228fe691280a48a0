// Devices: discovery (probe, with the reason when there are none), properties, error checks.
#pragma once

#include "../codegen/target.hpp"
#include "hip_port.hpp"

#include <ravel/backend.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace rvl::hip {

// DLPack's DLDeviceType values for the memory of a HIP device (rvl_device_properties, ABI 1.3).
constexpr int32_t kDLCUDA = 2;
constexpr int32_t kDLROCM = 10;

struct DeviceInfo {
  std::string name;     // "NVIDIA H100 80GB HBM3"
  uint64_t memory = 0;  // bytes
  Target target;        // platform, arch, warp size, compute units
  std::string details;  // "key=value; ..." for rvl_device_properties.details
  int32_t dlpack_type = kDLROCM;  // what its pointers are to DLPack: kDLROCM or kDLCUDA
};

struct ProbeResult {
  int count = 0;
  std::string reason;  // why count == 0
};

// Asks the runtime how many devices there are; never throws. No context is created.
ProbeResult probe_devices();
// Reads every device's properties once (initialize); throws DEVICE_ERROR.
void load_devices();
const std::vector<DeviceInfo>& devices();
const DeviceInfo& device(int32_t d);  // throws INVALID_ARGUMENT for a device that does not exist
void use_device(int32_t d);           // hipSetDevice for the calling thread; throws

// Throws rvl::Error(DEVICE_ERROR) naming `what` and the runtime's status unless e == hipSuccess.
void check(hipError_t e, const std::string& what);

Platform build_platform();
const char* platform_label();  // "AMD (ROCm)", "NVIDIA (CUDA)", "CPU emulation"

}  // namespace rvl::hip
