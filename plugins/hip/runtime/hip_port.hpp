// The thin portability layer: the few dozen hip* names this backend uses, on three platforms.
//
//  - RAVEL_HIP_AMD:      the real HIP runtime (<hip/hip_runtime_api.h>, Debian's ROCm 5.2).
//  - RAVEL_HIP_NVIDIA:   mapped one to one onto the CUDA runtime. AMD's own NVIDIA headers do not
//                        compile against CUDA 13 (../shared/gpu/README.md), so we map only what we
//                        use. Modules are cudaLibrary_t (CUDA >= 12 runtime API), so the plugin
//                        links the static CUDA runtime and no libcuda: on a machine without the
//                        driver it still loads and reports 0 devices with the reason.
//  - RAVEL_HIP_EMULATED: a CPU emulation (emu/emu_runtime.cpp) that runs generated kernels
//                        compiled by the host compiler: the whole plugin is tested without a GPU.
// Everything outside this header and rtc.cpp uses hip* names only.
#pragma once

#include <cstddef>
#include <string>

#if defined(RAVEL_HIP_AMD)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <hip/hip_runtime_api.h>

inline std::string rvl_hip_arch(const hipDeviceProp_t& p) {
  std::string a = p.gcnArchName;  // "gfx90a:sramecc+:xnack-": the features are not the arch
  return a.substr(0, a.find(':'));
}
// The device whose memory `p` points into; hipErrorInvalidValue when it is not device memory
// (buffer_wrap's check on foreign pointers). ROCm 6 renamed memoryType to type.
inline hipError_t rvl_hip_pointer_device(const void* p, int* device) {
  hipPointerAttribute_t a{};
  const hipError_t e = hipPointerGetAttributes(&a, p);
  if (e != hipSuccess) return e;
#if HIP_VERSION_MAJOR >= 6
  if (a.type != hipMemoryTypeDevice) return hipErrorInvalidValue;
#else
  if (a.memoryType != hipMemoryTypeDevice) return hipErrorInvalidValue;
#endif
  *device = a.device;
  return hipSuccess;
}

#elif defined(RAVEL_HIP_NVIDIA)
#include <cuda_runtime_api.h>

using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipDeviceProp_t = cudaDeviceProp;
using hipModule_t = cudaLibrary_t;
using hipFunction_t = cudaKernel_t;
constexpr hipError_t hipSuccess = cudaSuccess;
constexpr hipError_t hipErrorNotReady = cudaErrorNotReady;
constexpr unsigned hipStreamDefault = cudaStreamDefault;
constexpr unsigned hipEventDisableTiming = cudaEventDisableTiming;
constexpr unsigned hipHostMallocDefault = cudaHostAllocDefault;
constexpr cudaMemcpyKind hipMemcpyHostToDevice = cudaMemcpyHostToDevice;
constexpr cudaMemcpyKind hipMemcpyDeviceToHost = cudaMemcpyDeviceToHost;
constexpr cudaMemcpyKind hipMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice;

inline const char* hipGetErrorName(hipError_t e) { return cudaGetErrorName(e); }
inline const char* hipGetErrorString(hipError_t e) { return cudaGetErrorString(e); }
inline hipError_t hipGetDeviceCount(int* n) { return cudaGetDeviceCount(n); }
inline hipError_t hipSetDevice(int d) { return cudaSetDevice(d); }
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int d) { return cudaGetDeviceProperties(p, d); }
inline hipError_t hipDriverGetVersion(int* v) { return cudaDriverGetVersion(v); }
inline hipError_t hipRuntimeGetVersion(int* v) { return cudaRuntimeGetVersion(v); }
inline hipError_t hipMalloc(void** p, size_t n) { return cudaMalloc(p, n); }
inline hipError_t hipFree(void* p) { return cudaFree(p); }
inline hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total) { return cudaMemGetInfo(free_bytes, total); }
inline hipError_t hipHostMalloc(void** p, size_t n, unsigned flags) { return cudaHostAlloc(p, n, flags); }
inline hipError_t hipHostFree(void* p) { return cudaFreeHost(p); }
inline hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, hipStream_t st) {
  return cudaMemcpyAsync(d, s, n, k, st);
}
inline hipError_t hipMemsetAsync(void* d, int v, size_t n, hipStream_t st) { return cudaMemsetAsync(d, v, n, st); }
inline hipError_t hipMemcpyPeerAsync(void* d, int dd, const void* s, int sd, size_t n, hipStream_t st) {
  return cudaMemcpyPeerAsync(d, dd, s, sd, n, st);
}
inline hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned f) { return cudaStreamCreateWithFlags(s, f); }
inline hipError_t hipStreamDestroy(hipStream_t s) { return cudaStreamDestroy(s); }
inline hipError_t hipStreamSynchronize(hipStream_t s) { return cudaStreamSynchronize(s); }
inline hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned f) { return cudaStreamWaitEvent(s, e, f); }
inline hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned f) { return cudaEventCreateWithFlags(e, f); }
inline hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) { return cudaEventRecord(e, s); }
inline hipError_t hipEventSynchronize(hipEvent_t e) { return cudaEventSynchronize(e); }
inline hipError_t hipEventQuery(hipEvent_t e) { return cudaEventQuery(e); }
inline hipError_t hipEventDestroy(hipEvent_t e) { return cudaEventDestroy(e); }
inline hipError_t hipDeviceSynchronize() { return cudaDeviceSynchronize(); }
inline hipError_t hipModuleLoadData(hipModule_t* m, const void* image) {
  return cudaLibraryLoadData(m, image, nullptr, nullptr, 0, nullptr, nullptr, 0);
}
inline hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name) {
  return cudaLibraryGetKernel(f, m, name);
}
inline hipError_t hipModuleUnload(hipModule_t m) { return cudaLibraryUnload(m); }
// A cudaKernel_t is launched through cudaLaunchKernel cast to a function pointer (CUDA >= 12).
inline hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                        hipStream_t s, void** params, void** /*extra*/) {
  return cudaLaunchKernel(reinterpret_cast<const void*>(f), dim3(gx, gy, gz), dim3(bx, by, bz),
                          params, shared, s);
}
inline std::string rvl_hip_arch(const hipDeviceProp_t& p) {
  return "sm_" + std::to_string(p.major * 10 + p.minor);
}
// See the AMD version. Plain host memory is cudaMemoryTypeUnregistered (CUDA >= 11); managed
// memory is device-accessible and counts as the device's.
inline hipError_t rvl_hip_pointer_device(const void* p, int* device) {
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) return e;
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) return cudaErrorInvalidValue;
  *device = a.device;
  return cudaSuccess;
}

#elif defined(RAVEL_HIP_EMULATED)
#include "../emu/emu_runtime.hpp"
#else
#error "define one of RAVEL_HIP_AMD, RAVEL_HIP_NVIDIA, RAVEL_HIP_EMULATED"
#endif

// "hipErrorOutOfMemory (out of memory)": names and explains a status in messages.
inline std::string rvl_hip_error(hipError_t e) {
  return std::string(hipGetErrorName(e)) + " (" + hipGetErrorString(e) + ")";
}
