// zecl: initialisation, the driver and its one device, contexts and USM memory.
#include <algorithm>
#include <cstdio>
#include <string>
#include <cstdlib>
#include <cstring>

#include "zecl.hpp"

namespace zecl {

namespace {
_ze_driver_handle_t g_driver;
// ZECL_DEVICES=N (1..8, default 1): N devices of the one driver, all backed by the same PoCL
// device and sharing its memory (SVM), so a client's multi-device paths (copies between devices
// of one context, per-device queues) run in CI. Any other value makes zeInit fail (ZECL_DEBUG=1
// says why).
constexpr int kMaxDevices = 8;
_ze_device_handle_t g_devices[kMaxDevices];
int g_device_count = 1;
int device_index(ze_device_handle_t d) {
  const auto i = d - g_devices;
  return i >= 0 && i < g_device_count ? static_cast<int>(i) : -1;
}

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}
}  // namespace

State& state() {
  static State* s = new State;  // never destroyed: the loader may call in from atexit handlers
  return *s;
}

bool log_error(const std::string& what) {
  if (state().debug) std::fprintf(stderr, "zecl: %s\n", what.c_str());
  return false;
}

bool in_allocation(const void* p, size_t n) {
  State& s = state();
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = s.allocs.upper_bound(a);
  if (it == s.allocs.begin()) return false;
  --it;
  return a >= it->first && a - it->first <= it->second && n <= it->second - (a - it->first) &&
         (n > 0 || a < it->first + it->second || it->second == 0);
}

uintptr_t allocation_base(const void* p) {
  if (!in_allocation(p, 0)) return 0;
  auto it = state().allocs.upper_bound(reinterpret_cast<uintptr_t>(p));
  return (--it)->first;
}

namespace {

// The first OpenCL CPU device with fine-grained SVM (PoCL's): USM maps onto it directly.
ze_result_t init(ze_init_flags_t) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (s.init_done) return s.init_result;
  s.init_done = true;
  s.strict = env_on("ZECL_STRICT");
  s.no_fp64 = env_on("ZECL_NO_FP64");
  s.debug = env_on("ZECL_DEBUG");
  if (const char* v = std::getenv("ZECL_DEVICES"); v && *v) {
    const std::string text = v;
    const bool digits = text.size() == 1 && text[0] >= '1' && text[0] <= '0' + kMaxDevices;
    if (!digits)
      return log_error("ZECL_DEVICES='" + text + "' is not a device count: expected an integer from 1 to " +
                       std::to_string(kMaxDevices)),
             s.init_result;
    g_device_count = text[0] - '0';
  }
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0)
    return log_error("no OpenCL platform"), s.init_result;
  std::vector<cl_platform_id> platforms(n);
  clGetPlatformIDs(n, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    cl_device_id d;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_CPU, 1, &d, nullptr) != CL_SUCCESS) continue;
    cl_device_svm_capabilities svm = 0;
    clGetDeviceInfo(d, CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, nullptr);
    if (svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) {
      s.dev = d;
      break;
    }
  }
  if (!s.dev) return log_error("no OpenCL CPU device with fine-grained SVM"), s.init_result;
  cl_int err;
  s.ctx = clCreateContext(nullptr, 1, &s.dev, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return s.init_result;
  s.queue = clCreateCommandQueueWithProperties(s.ctx, s.dev, nullptr, &err);
  if (err != CL_SUCCESS) return s.init_result;
  s.init_result = ZE_RESULT_SUCCESS;
  return s.init_result;
}

ze_result_t driver_get(uint32_t* count, ze_driver_handle_t* out) {
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (state().init_result != ZE_RESULT_SUCCESS) {
    *count = 0;
    return ZE_RESULT_ERROR_UNINITIALIZED;
  }
  if (out && *count >= 1) out[0] = &g_driver;
  *count = 1;
  return ZE_RESULT_SUCCESS;
}
ze_result_t driver_api_version(ze_driver_handle_t, ze_api_version_t* v) {
  *v = ZE_API_VERSION_1_4;
  return ZE_RESULT_SUCCESS;
}
ze_result_t driver_properties(ze_driver_handle_t, ze_driver_properties_t* p) {
  std::memset(p->uuid.id, 0, sizeof p->uuid.id);
  std::memcpy(p->uuid.id, "ravel-zecl-test", 15);
  p->driverVersion = 1;
  return ZE_RESULT_SUCCESS;
}
ze_result_t driver_extensions(ze_driver_handle_t, uint32_t* count, ze_driver_extension_properties_t*) {
  *count = 0;
  return ZE_RESULT_SUCCESS;
}
ze_result_t driver_ipc(ze_driver_handle_t, ze_driver_ipc_properties_t* p) {
  p->flags = 0;
  return ZE_RESULT_SUCCESS;
}

ze_result_t device_get(ze_driver_handle_t, uint32_t* count, ze_device_handle_t* out) {
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (out) {
    const uint32_t n = std::min<uint32_t>(*count, static_cast<uint32_t>(g_device_count));
    for (uint32_t i = 0; i < n; ++i) out[i] = &g_devices[i];
    *count = n;
    return ZE_RESULT_SUCCESS;
  }
  *count = static_cast<uint32_t>(g_device_count);
  return ZE_RESULT_SUCCESS;
}
ze_result_t device_sub_devices(ze_device_handle_t, uint32_t* count, ze_device_handle_t*) {
  *count = 0;
  return ZE_RESULT_SUCCESS;
}
template <class T>
T cl_info(cl_device_info what, T fallback) {
  T v = fallback;
  clGetDeviceInfo(state().dev, what, sizeof v, &v, nullptr);
  return v;
}
ze_result_t device_properties(ze_device_handle_t d, ze_device_properties_t* p) {
  const int index = device_index(d);
  if (index < 0) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  p->type = ZE_DEVICE_TYPE_GPU;  // what a GPU backend looks for
  p->vendorId = 0;               // not Intel: no architecture is claimed
  p->deviceId = 0;
  p->flags = 0;
  p->subdeviceId = 0;
  p->coreClockRate = cl_info<cl_uint>(CL_DEVICE_MAX_CLOCK_FREQUENCY, 0);
  p->maxMemAllocSize = cl_info<cl_ulong>(CL_DEVICE_MAX_MEM_ALLOC_SIZE, 0);
  p->maxHardwareContexts = 1;
  p->maxCommandQueuePriority = 0;
  p->numThreadsPerEU = 1;
  p->physicalEUSimdWidth = 8;
  p->numEUsPerSubslice = 1;
  p->numSubslicesPerSlice = 1;
  p->numSlices = cl_info<cl_uint>(CL_DEVICE_MAX_COMPUTE_UNITS, 1);
  p->timerResolution = 1;
  p->timestampValidBits = 64;
  p->kernelTimestampValidBits = 64;
  std::memset(p->uuid.id, 0, sizeof p->uuid.id);
  p->uuid.id[0] = static_cast<uint8_t>(index + 1);  // distinct devices have distinct UUIDs
  if (g_device_count == 1)
    std::snprintf(p->name, sizeof p->name, "zecl test device (PoCL CPU%s)", state().no_fp64 ? ", no fp64" : "");
  else
    std::snprintf(p->name, sizeof p->name, "zecl test device %d of %d (PoCL CPU%s)", index, g_device_count,
                  state().no_fp64 ? ", no fp64" : "");
  return ZE_RESULT_SUCCESS;
}
ze_result_t device_compute(ze_device_handle_t, ze_device_compute_properties_t* p) {
  size_t wi[3] = {256, 256, 256};
  clGetDeviceInfo(state().dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof wi, wi, nullptr);
  p->maxTotalGroupSize = uint32_t(cl_info<size_t>(CL_DEVICE_MAX_WORK_GROUP_SIZE, 256));
  p->maxGroupSizeX = uint32_t(wi[0]);
  p->maxGroupSizeY = uint32_t(wi[1]);
  p->maxGroupSizeZ = uint32_t(wi[2]);
  p->maxGroupCountX = p->maxGroupCountY = p->maxGroupCountZ = 0x7fffffffu;
  p->maxSharedLocalMemory = uint32_t(cl_info<cl_ulong>(CL_DEVICE_LOCAL_MEM_SIZE, 0));
  p->numSubGroupSizes = 1;
  p->subGroupSizes[0] = 8;
  return ZE_RESULT_SUCCESS;
}
ze_result_t device_module(ze_device_handle_t, ze_device_module_properties_t* p) {
  p->spirvVersionSupported = ZE_MAKE_VERSION(1, 2);
  p->flags = (state().no_fp64 ? 0 : ZE_DEVICE_MODULE_FLAG_FP64) | ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS;
  p->fp16flags = 0;
  p->fp32flags = ZE_DEVICE_FP_FLAG_DENORM | ZE_DEVICE_FP_FLAG_INF_NAN |
                 ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST | ZE_DEVICE_FP_FLAG_FMA;
  p->fp64flags = state().no_fp64 ? 0 : p->fp32flags;
  p->maxArgumentsSize = 1024;
  p->printfBufferSize = 1 << 20;
  std::memset(p->nativeKernelSupported.id, 0, sizeof p->nativeKernelSupported.id);
  return ZE_RESULT_SUCCESS;
}
ze_result_t device_queue_groups(ze_device_handle_t, uint32_t* count,
                                ze_command_queue_group_properties_t* p) {
  if (p && *count >= 1) {
    p[0].flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
    p[0].maxMemoryFillPatternSize = 128;
    p[0].numQueues = 1;
  }
  *count = 1;
  return ZE_RESULT_SUCCESS;
}
ze_result_t device_memory(ze_device_handle_t, uint32_t* count, ze_device_memory_properties_t* p) {
  if (p && *count >= 1) {
    p[0].flags = 0;
    p[0].maxClockRate = 0;
    p[0].maxBusWidth = 64;
    p[0].totalSize = cl_info<cl_ulong>(CL_DEVICE_GLOBAL_MEM_SIZE, 0);
    std::snprintf(p[0].name, sizeof p[0].name, "host RAM (SVM)");
  }
  *count = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t context_create(ze_driver_handle_t, const ze_context_desc_t*, ze_context_handle_t* out) {
  *out = new _ze_context_handle_t{};
  return ZE_RESULT_SUCCESS;
}
ze_result_t context_destroy(ze_context_handle_t c) {
  delete c;
  return ZE_RESULT_SUCCESS;
}
ze_result_t context_status(ze_context_handle_t) { return ZE_RESULT_SUCCESS; }

ze_result_t svm_alloc(ze_context_handle_t ctx, ze_memory_type_t kind, size_t size, size_t align, void** out) {
  if (size == 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
  if (align & (align - 1)) return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  void* p = clSVMAlloc(s.ctx, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, size,
                       cl_uint(align > 128 ? align : 128));
  if (!p) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  s.allocs[reinterpret_cast<uintptr_t>(p)] = size;
  s.alloc_kind[reinterpret_cast<uintptr_t>(p)] = {ctx, kind};
  *out = p;
  return ZE_RESULT_SUCCESS;
}
ze_result_t mem_device(ze_context_handle_t c, const ze_device_mem_alloc_desc_t*, size_t size,
                       size_t align, ze_device_handle_t d, void** out) {
  if (device_index(d) < 0) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  const ze_result_t r = svm_alloc(c, ZE_MEMORY_TYPE_DEVICE, size, align, out);
  if (r == ZE_RESULT_SUCCESS) {
    std::lock_guard<std::recursive_mutex> lock(state().mu);
    state().alloc_device[reinterpret_cast<uintptr_t>(*out)] = d;
  }
  return r;
}
ze_result_t mem_host(ze_context_handle_t c, const ze_host_mem_alloc_desc_t*, size_t size, size_t align,
                     void** out) {
  return svm_alloc(c, ZE_MEMORY_TYPE_HOST, size, align, out);
}
ze_result_t mem_shared(ze_context_handle_t c, const ze_device_mem_alloc_desc_t*,
                       const ze_host_mem_alloc_desc_t*, size_t size, size_t align,
                       ze_device_handle_t, void** out) {
  return svm_alloc(c, ZE_MEMORY_TYPE_SHARED, size, align, out);
}
ze_result_t mem_free(ze_context_handle_t, void* p) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  auto it = s.allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.allocs.end())
    return log_error("zeMemFree of a pointer that is not a live allocation"),
           ZE_RESULT_ERROR_INVALID_ARGUMENT;
  clFinish(s.queue);
  clSVMFree(s.ctx, p);
  s.alloc_kind.erase(it->first);
  s.alloc_device.erase(it->first);
  s.allocs.erase(it);
  return ZE_RESULT_SUCCESS;
}
// As a real driver: memory of another context (or none) is UNKNOWN; host USM has no device.
ze_result_t mem_properties(ze_context_handle_t c, const void* p, ze_memory_allocation_properties_t* props,
                           ze_device_handle_t* dev) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  const uintptr_t base = allocation_base(p);
  auto it = base ? s.alloc_kind.find(base) : s.alloc_kind.end();
  const bool ours = it != s.alloc_kind.end() && it->second.first == c;
  props->type = ours ? it->second.second : ZE_MEMORY_TYPE_UNKNOWN;
  props->id = base;
  props->pageSize = 4096;
  if (dev) {
    auto owner = s.alloc_device.find(base);
    *dev = !ours || props->type == ZE_MEMORY_TYPE_HOST ? nullptr
           : owner != s.alloc_device.end()             ? owner->second
                                                       : &g_devices[0];  // shared memory: the first device
  }
  return ZE_RESULT_SUCCESS;
}
ze_result_t mem_range(ze_context_handle_t c, const void* p, void** base, size_t* size) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  const uintptr_t b = allocation_base(p);
  auto it = b ? s.alloc_kind.find(b) : s.alloc_kind.end();
  if (it == s.alloc_kind.end() || it->second.first != c)
    return log_error("zeMemGetAddressRange of a pointer that is not an allocation of this context"),
           ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (base) *base = reinterpret_cast<void*>(b);
  if (size) *size = s.allocs[b];
  return ZE_RESULT_SUCCESS;
}

}  // namespace

void fill_global(ze_global_dditable_t* t) { t->pfnInit = init; }
void fill_driver(ze_driver_dditable_t* t) {
  t->pfnGet = driver_get;
  t->pfnGetApiVersion = driver_api_version;
  t->pfnGetProperties = driver_properties;
  t->pfnGetIpcProperties = driver_ipc;
  t->pfnGetExtensionProperties = driver_extensions;
}
void fill_device(ze_device_dditable_t* t) {
  t->pfnGet = device_get;
  t->pfnGetSubDevices = device_sub_devices;
  t->pfnGetProperties = device_properties;
  t->pfnGetComputeProperties = device_compute;
  t->pfnGetModuleProperties = device_module;
  t->pfnGetCommandQueueGroupProperties = device_queue_groups;
  t->pfnGetMemoryProperties = device_memory;
}
void fill_context(ze_context_dditable_t* t) {
  t->pfnCreate = context_create;
  t->pfnDestroy = context_destroy;
  t->pfnGetStatus = context_status;
}
void fill_mem(ze_mem_dditable_t* t) {
  t->pfnAllocDevice = mem_device;
  t->pfnAllocHost = mem_host;
  t->pfnAllocShared = mem_shared;
  t->pfnFree = mem_free;
  t->pfnGetAllocProperties = mem_properties;
  t->pfnGetAddressRange = mem_range;
}

}  // namespace zecl
