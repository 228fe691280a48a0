// The CPU emulation of the HIP runtime subset in runtime/hip_port.hpp (RAVEL_HIP_EMULATED).
//
// RAVEL_HIP_EMU_DEVICES (1..16, default 1) devices ("host"), memory from aligned_alloc, every
// call synchronous. Modules are shared
// objects built by rtc.cpp from the generated source with the host compiler and emu_device.hpp;
// a launch runs every block on a team of host threads (one per GPU thread of the block).
// RAVEL_HIP_EMU_WARP (default 32) sets the warp width, so the 64-wide wavefront paths of AMD
// are exercised too; RAVEL_HIP_EMU_MEMORY (bytes) caps device memory to test out-of-memory.
#pragma once

#include <cstddef>
#include <string>

enum hipError_t {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorNoDevice = 100,
  hipErrorInvalidImage = 200,
  hipErrorNotFound = 500,
  hipErrorNotReady = 600,
  hipErrorLaunchFailure = 719,
};
enum hipMemcpyKind { hipMemcpyHostToDevice = 1, hipMemcpyDeviceToHost = 2, hipMemcpyDeviceToDevice = 3 };
struct EmuStream;
struct EmuEvent;
struct EmuModule;
struct EmuFunction;
using hipStream_t = EmuStream*;
using hipEvent_t = EmuEvent*;
using hipModule_t = EmuModule*;
using hipFunction_t = EmuFunction*;
constexpr unsigned hipStreamDefault = 0;
constexpr unsigned hipEventDisableTiming = 2;
constexpr unsigned hipHostMallocDefault = 0;

struct hipDeviceProp_t {
  char name[256];
  size_t totalGlobalMem;
  int multiProcessorCount;
  int warpSize;
};

const char* hipGetErrorName(hipError_t e);
const char* hipGetErrorString(hipError_t e);
hipError_t hipGetDeviceCount(int* n);
hipError_t hipSetDevice(int d);
hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int d);
hipError_t hipDriverGetVersion(int* v);
hipError_t hipRuntimeGetVersion(int* v);
hipError_t hipMalloc(void** p, size_t n);
hipError_t hipFree(void* p);
hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total);
hipError_t hipHostMalloc(void** p, size_t n, unsigned flags);
hipError_t hipHostFree(void* p);
hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, hipMemcpyKind k, hipStream_t st);
hipError_t hipMemcpyPeerAsync(void* d, int dst_device, const void* s, int src_device, size_t n, hipStream_t st);
hipError_t hipMemsetAsync(void* d, int v, size_t n, hipStream_t st);
hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned f);
hipError_t hipStreamDestroy(hipStream_t s);
hipError_t hipStreamSynchronize(hipStream_t s);
hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned f);
hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned f);
hipError_t hipEventRecord(hipEvent_t e, hipStream_t s);
hipError_t hipEventSynchronize(hipEvent_t e);
hipError_t hipEventQuery(hipEvent_t e);
hipError_t hipEventDestroy(hipEvent_t e);
hipError_t hipDeviceSynchronize();
hipError_t hipModuleLoadData(hipModule_t* m, const void* image);
hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name);
hipError_t hipModuleUnload(hipModule_t m);
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shared, hipStream_t s,
                                 void** params, void** extra);
inline std::string rvl_hip_arch(const hipDeviceProp_t&) { return "host"; }
// The device whose memory `p` points into (the emulator tracks its live hipMalloc blocks);
// hipErrorInvalidValue for any other address, as for host memory on a real GPU.
hipError_t rvl_hip_pointer_device(const void* p, int* device);

// The emulated module image: "RVLEMU" + 8-byte little-endian length + the shared object.
namespace rvl::hip::emu {
std::string wrap_image(const std::string& shared_object);
}
