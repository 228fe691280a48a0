#include "ze_loader.hpp"

#include <ravel/backend.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

namespace rvl::l0 {

const ZeApi* ze_api(std::string* why) {
  static std::once_flag once;
  static ZeApi api;
  static const ZeApi* result = nullptr;
  static std::string error;
  std::call_once(once, [] {
    // RTLD_LOCAL: the loader's symbols stay out of the global namespace of the host.
    void* lib = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      error = std::string("the Level Zero loader (libze_loader.so.1) is not installed: ") +
              (e ? e : "dlopen failed");
      return;
    }
#define RVL_ZE_RESOLVE_(fn)                                                            \
  api.fn = reinterpret_cast<decltype(api.fn)>(dlsym(lib, #fn));                        \
  if (!api.fn) {                                                                       \
    error = "the Level Zero loader lacks " #fn " (too old? 1.4 or newer is needed)";   \
    return;                                                                            \
  }
    RVL_ZE_FUNCTIONS(RVL_ZE_RESOLVE_)
#undef RVL_ZE_RESOLVE_
    result = &api;
  });
  if (!result && why) *why = error;
  return result;
}

std::string ze_result_name(ze_result_t r) {
  const char* name = "ZE_RESULT_<unknown>";
  switch (r) {
#define RVL_ZE_CASE_(x) \
  case x: name = #x; break;
    RVL_ZE_CASE_(ZE_RESULT_SUCCESS)
    RVL_ZE_CASE_(ZE_RESULT_NOT_READY)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_DEVICE_LOST)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_MODULE_LINK_FAILURE)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_UNINITIALIZED)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_UNSUPPORTED_VERSION)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_INVALID_ARGUMENT)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_INVALID_NULL_HANDLE)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_INVALID_NULL_POINTER)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_INVALID_SIZE)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_UNSUPPORTED_SIZE)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_INVALID_ENUMERATION)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_INVALID_NATIVE_BINARY)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_INVALID_KERNEL_NAME)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_NOT_AVAILABLE)
    RVL_ZE_CASE_(ZE_RESULT_ERROR_UNKNOWN)
#undef RVL_ZE_CASE_
    default: break;
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, " (0x%x)", unsigned(r));
  return name + std::string(hex);
}

void ze_check(ze_result_t r, const char* call) {
  if (r == ZE_RESULT_SUCCESS) return;
  rvl_status s = RVL_STATUS_DEVICE_ERROR;
  if (r == ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY || r == ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    s = RVL_STATUS_OUT_OF_MEMORY;
  else if (r == ZE_RESULT_ERROR_UNSUPPORTED_FEATURE || r == ZE_RESULT_ERROR_UNSUPPORTED_SIZE)
    s = RVL_STATUS_UNSUPPORTED;
  fail(s, std::string("level_zero: ") + call + " failed: " + ze_result_name(r));
}

}  // namespace rvl::l0
