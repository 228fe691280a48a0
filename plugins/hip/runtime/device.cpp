#include "device.hpp"

#include <cstdlib>
#include <mutex>

namespace rvl::hip {
namespace {
std::vector<DeviceInfo>& table() {
  static auto* t = new std::vector<DeviceInfo>;  // never destroyed: used until unload
  return *t;
}
std::mutex& table_mu() {
  static auto* m = new std::mutex;
  return *m;
}
}  // namespace

Platform build_platform() {
#if defined(RAVEL_HIP_AMD)
  return Platform::Amd;
#elif defined(RAVEL_HIP_NVIDIA)
  return Platform::Nvidia;
#else
  return Platform::Emulated;
#endif
}

const char* platform_label() {
  switch (build_platform()) {
    case Platform::Amd: return "AMD (ROCm HIP runtime, hiprtc)";
    case Platform::Nvidia: return "NVIDIA (CUDA runtime, NVRTC)";
    case Platform::Emulated: return "CPU emulation";
  }
  return "?";
}

void check(hipError_t e, const std::string& what) {
  if (e != hipSuccess) fail(RVL_STATUS_DEVICE_ERROR, what + ": " + rvl_hip_error(e));
}

ProbeResult probe_devices() {
  ProbeResult r;
  int n = 0;
  const hipError_t e = hipGetDeviceCount(&n);
  if (e != hipSuccess) {
    r.reason = std::string("no usable ") + platform_label() + " device: hipGetDeviceCount: " +
               rvl_hip_error(e);
    return r;
  }
  if (n <= 0) r.reason = std::string("the ") + platform_label() + " runtime reports no device";
  r.count = n > 0 ? n : 0;
  return r;
}

void load_devices() {
  std::lock_guard<std::mutex> lock(table_mu());
  if (!table().empty()) return;
  const ProbeResult p = probe_devices();
  std::vector<DeviceInfo> found;
  for (int d = 0; d < p.count; ++d) {
    hipDeviceProp_t prop{};
    check(hipGetDeviceProperties(&prop, d), "hipGetDeviceProperties(" + std::to_string(d) + ")");
    DeviceInfo info;
    info.name = prop.name;
    info.memory = prop.totalGlobalMem;
    info.target.platform = build_platform();
    info.target.arch = rvl_hip_arch(prop);
    info.target.warp_size = prop.warpSize;
    info.target.compute_units = prop.multiProcessorCount;
    int driver = 0, runtime = 0;
    (void)hipDriverGetVersion(&driver);
    (void)hipRuntimeGetVersion(&runtime);
    info.details = std::string("platform=") + platform_name(info.target.platform) +
                   "; driver=" + std::to_string(driver) + "; runtime=" + std::to_string(runtime);
#if defined(RAVEL_HIP_EMULATED)
    // RAVEL_HIP_EMU_TARGET=PLATFORM:ARCH:WARP[:UNITS] (amd:gfx90a:64, nvidia:sm_90:32:132)
    // makes the emulated device generate code for that target: with RAVEL_HIP_DRY_RUN the
    // compile tests collect a real target's sources (and gpu-check.sh precompiles them).
    if (const char* t = std::getenv("RAVEL_HIP_EMU_TARGET")) {
      std::vector<std::string> f;
      std::string spec = std::string(t) + ":";
      for (size_t a = 0, b; (b = spec.find(':', a)) != std::string::npos; a = b + 1) f.push_back(spec.substr(a, b - a));
      if (f.size() >= 3) {
        info.target.platform = f[0] == "amd" ? Platform::Amd : Platform::Nvidia;
        info.target.arch = f[1];
        info.target.warp_size = std::atoi(f[2].c_str());
        info.target.compute_units = f.size() >= 4 ? std::atoi(f[3].c_str()) : 100;
      }
    }
#endif
    // HIP on AMD hands out ROCm device pointers, HIP on NVIDIA CUDA ones. The emulator emulates
    // AMD's HIP runtime, so it says kDLROCM, unless RAVEL_HIP_EMU_TARGET names an NVIDIA target:
    // then it stands in for that device entirely, pointers included (the kDLCUDA path's test).
    info.dlpack_type = info.target.platform == Platform::Nvidia ? kDLCUDA : kDLROCM;
    found.push_back(info);
  }
  table() = std::move(found);
}

const std::vector<DeviceInfo>& devices() { return table(); }

const DeviceInfo& device(int32_t d) {
  const auto& t = table();
  if (d < 0 || size_t(d) >= t.size())
    invalid("device " + std::to_string(d) + " does not exist (the hip backend has " +
            std::to_string(t.size()) + ")");
  return t[size_t(d)];
}

void use_device(int32_t d) {
  device(d);
  check(hipSetDevice(d), "hipSetDevice(" + std::to_string(d) + ")");
}

}  // namespace rvl::hip
