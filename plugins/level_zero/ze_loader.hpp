// The Level Zero loader, opened at run time.
//
// The plugin does not link libze_loader: a machine without Level Zero must still be able to load
// the plugin and hear "0 devices, because ..." from probe, instead of the host failing to dlopen
// it with an unresolved-library error. The entry points are resolved by name from
// libze_loader.so.1 into one table; the types come from the loader's own headers, so a
// signature mismatch is a compile error.
#pragma once

#include <level_zero/ze_api.h>

#include <string>

namespace rvl::l0 {

#define RVL_ZE_FUNCTIONS(X)                  \
  X(zeInit)                                  \
  X(zeDriverGet)                             \
  X(zeDriverGetApiVersion)                   \
  X(zeDriverGetProperties)                   \
  X(zeDeviceGet)                             \
  X(zeDeviceGetProperties)                   \
  X(zeDeviceGetComputeProperties)            \
  X(zeDeviceGetModuleProperties)             \
  X(zeDeviceGetMemoryProperties)             \
  X(zeDeviceGetCommandQueueGroupProperties)  \
  X(zeContextCreate)                         \
  X(zeContextDestroy)                        \
  X(zeMemAllocDevice)                        \
  X(zeMemAllocHost)                          \
  X(zeMemFree)                               \
  X(zeMemGetAllocProperties)                 \
  X(zeMemGetAddressRange)                    \
  X(zeCommandListCreateImmediate)            \
  X(zeCommandListDestroy)                    \
  X(zeCommandListAppendMemoryCopy)           \
  X(zeCommandListAppendMemoryFill)           \
  X(zeCommandListAppendBarrier)              \
  X(zeCommandListAppendLaunchKernel)         \
  X(zeCommandListAppendSignalEvent)          \
  X(zeCommandListAppendWaitOnEvents)         \
  X(zeEventPoolCreate)                       \
  X(zeEventPoolDestroy)                      \
  X(zeEventCreate)                           \
  X(zeEventDestroy)                          \
  X(zeEventHostSynchronize)                  \
  X(zeEventHostReset)                        \
  X(zeModuleCreate)                          \
  X(zeModuleDestroy)                         \
  X(zeModuleBuildLogGetString)               \
  X(zeModuleBuildLogDestroy)                 \
  X(zeKernelCreate)                          \
  X(zeKernelDestroy)                         \
  X(zeKernelSetGroupSize)                    \
  X(zeKernelSetArgumentValue)

struct ZeApi {
#define RVL_ZE_MEMBER_(fn) decltype(&::fn) fn = nullptr;
  RVL_ZE_FUNCTIONS(RVL_ZE_MEMBER_)
#undef RVL_ZE_MEMBER_
};

// The loader's table, or nullptr with `why` set (library missing, symbol missing). Opened once;
// never closed (drivers keep threads and atexit handlers that must outlive every caller).
const ZeApi* ze_api(std::string* why);

// "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (0x70000002)"
std::string ze_result_name(ze_result_t r);

// Throws rvl::Error unless r == ZE_RESULT_SUCCESS; the status follows the result (out of memory,
// unsupported, device lost...), the message names the call.
void ze_check(ze_result_t r, const char* call);

}  // namespace rvl::l0
