// CPU emulation of the HIP runtime subset (see emu_runtime.hpp).
#include "emu_runtime.hpp"

#include "emu_context.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct EmuStream {};
struct EmuEvent {};
struct EmuFunction {
  void (*entry)(void** args, const rvl_emu_ctx* ctx);
};
// A module owns its functions, as in HIP: they are freed by hipModuleUnload.
struct EmuModule {
  void* handle;
  std::string path;
  std::vector<std::unique_ptr<EmuFunction>> functions;
};

namespace {

std::mutex g_launch;  // one launch at a time: __shared__ memory is function-static

uint64_t memory_limit() {
  const char* e = std::getenv("RAVEL_HIP_EMU_MEMORY");
  return e ? std::strtoull(e, nullptr, 10) : (uint64_t(8) << 30);
}
int warp_width() {
  const char* e = std::getenv("RAVEL_HIP_EMU_WARP");
  return e && std::atoi(e) == 64 ? 64 : 32;
}

// RAVEL_HIP_EMU_DEVICES=N (1..16, default 1): N emulated devices, each with its own memory budget
// (RAVEL_HIP_EMU_MEMORY each), so the plugin's multi-device paths (peer copies, transfers between
// devices, per-device streams) run in CI. A value that is not such a count makes
// hipGetDeviceCount fail, and hipGetErrorString says why (the plugin's probe reports it).
constexpr int kMaxDevices = 16;
std::string& config_error() {
  static auto* s = new std::string;  // never destroyed: read until unload
  return *s;
}
int device_count() {
  static const int n = [] {
    const char* e = std::getenv("RAVEL_HIP_EMU_DEVICES");
    if (!e || !*e) return 1;
    const std::string v = e;
    bool digits = v.size() <= 2;
    for (char c : v) digits = digits && c >= '0' && c <= '9';
    const int count = digits ? std::atoi(v.c_str()) : 0;
    if (count < 1 || count > kMaxDevices) {
      config_error() = "RAVEL_HIP_EMU_DEVICES='" + v + "' is not a device count: expected an integer from 1 to " +
                       std::to_string(kMaxDevices);
      return 0;
    }
    return count;
  }();
  return n;
}
thread_local int t_device = 0;  // hipSetDevice is per host thread, as in HIP
std::atomic<uint64_t> g_used[kMaxDevices];

// Allocation header: the size and the device, so hipFree can give the bytes back to its budget.
constexpr size_t kHeader = 256;
struct Header {
  size_t bytes;
  int device;
};

// Live device blocks (user address -> size and device), so that rvl_hip_pointer_device can tell
// device memory from host memory, and whose it is, as hipPointerGetAttributes does on a GPU.
std::mutex g_blocks_mu;
std::map<uintptr_t, Header>& blocks() {
  static auto* b = new std::map<uintptr_t, Header>;  // never destroyed: used until unload
  return *b;
}

}  // namespace

const char* hipGetErrorName(hipError_t e) {
  switch (e) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorNoDevice: return "hipErrorNoDevice";
    case hipErrorInvalidImage: return "hipErrorInvalidImage";
    case hipErrorNotFound: return "hipErrorNotFound";
    case hipErrorNotReady: return "hipErrorNotReady";
    case hipErrorLaunchFailure: return "hipErrorLaunchFailure";
  }
  return "hipErrorUnknown";
}
const char* hipGetErrorString(hipError_t e) {
  if (e == hipSuccess) return "no error";
  return device_count() == 0 ? config_error().c_str() : "emulator error";
}
hipError_t hipGetDeviceCount(int* n) {
  *n = device_count();
  return *n > 0 ? hipSuccess : hipErrorInvalidValue;
}
hipError_t hipSetDevice(int d) {
  if (d < 0 || d >= device_count()) return hipErrorInvalidValue;
  t_device = d;
  return hipSuccess;
}
hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int d) {
  if (d < 0 || d >= device_count()) return hipErrorInvalidValue;
  std::memset(p, 0, sizeof *p);
  if (device_count() == 1) std::snprintf(p->name, sizeof p->name, "CPU emulation of a HIP device");
  else std::snprintf(p->name, sizeof p->name, "CPU emulation of a HIP device (%d of %d)", d, device_count());
  p->totalGlobalMem = memory_limit();
  p->multiProcessorCount = 1;
  p->warpSize = warp_width();
  return hipSuccess;
}
hipError_t hipDriverGetVersion(int* v) { *v = 0; return hipSuccess; }
hipError_t hipRuntimeGetVersion(int* v) { *v = 0; return hipSuccess; }
hipError_t hipMalloc(void** p, size_t n) {
  std::atomic<uint64_t>& used = g_used[t_device];
  if (used.load() + n > memory_limit()) return hipErrorOutOfMemory;
  void* raw = std::aligned_alloc(256, kHeader + ((n + 255) / 256) * 256);
  if (!raw) return hipErrorOutOfMemory;
  const Header h{n, t_device};
  std::memcpy(raw, &h, sizeof h);
  used += n;
  *p = static_cast<char*>(raw) + kHeader;
  std::lock_guard<std::mutex> lock(g_blocks_mu);
  blocks()[reinterpret_cast<uintptr_t>(*p)] = h;
  return hipSuccess;
}
hipError_t hipFree(void* p) {
  if (!p) return hipSuccess;
  {
    std::lock_guard<std::mutex> lock(g_blocks_mu);
    blocks().erase(reinterpret_cast<uintptr_t>(p));
  }
  char* raw = static_cast<char*>(p) - kHeader;
  Header h;
  std::memcpy(&h, raw, sizeof h);
  g_used[h.device] -= h.bytes;
  std::free(raw);
  return hipSuccess;
}
hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total) {
  *total = memory_limit();
  *free_bytes = *total - g_used[t_device].load();
  return hipSuccess;
}
hipError_t hipHostMalloc(void** p, size_t n, unsigned) {
  *p = std::malloc(n ? n : 1);
  return *p ? hipSuccess : hipErrorOutOfMemory;
}
hipError_t hipHostFree(void* p) { std::free(p); return hipSuccess; }
hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, hipMemcpyKind, hipStream_t) {
  if (n) std::memmove(d, s, n);
  return hipSuccess;
}
// Every call is synchronous, so a copy between two devices is ordered with both devices' work.
hipError_t hipMemcpyPeerAsync(void* d, int dst_device, const void* s, int src_device, size_t n, hipStream_t) {
  if (dst_device < 0 || dst_device >= device_count() || src_device < 0 || src_device >= device_count())
    return hipErrorInvalidValue;
  if (n) std::memmove(d, s, n);
  return hipSuccess;
}
hipError_t hipMemsetAsync(void* d, int v, size_t n, hipStream_t) {
  if (n) std::memset(d, v, n);
  return hipSuccess;
}
hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned) { *s = new EmuStream; return hipSuccess; }
hipError_t hipStreamDestroy(hipStream_t s) { delete s; return hipSuccess; }
hipError_t hipStreamSynchronize(hipStream_t) { return hipSuccess; }
hipError_t hipStreamWaitEvent(hipStream_t, hipEvent_t, unsigned) { return hipSuccess; }
hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned) { *e = new EmuEvent; return hipSuccess; }
hipError_t hipEventRecord(hipEvent_t, hipStream_t) { return hipSuccess; }
hipError_t hipEventSynchronize(hipEvent_t) { return hipSuccess; }
hipError_t hipEventQuery(hipEvent_t) { return hipSuccess; }
hipError_t hipEventDestroy(hipEvent_t e) { delete e; return hipSuccess; }
hipError_t hipDeviceSynchronize() { return hipSuccess; }
hipError_t rvl_hip_pointer_device(const void* p, int* device) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_blocks_mu);
  auto it = blocks().upper_bound(at);
  if (it == blocks().begin()) return hipErrorInvalidValue;
  --it;
  if (at >= it->first + std::max<size_t>(it->second.bytes, 1)) return hipErrorInvalidValue;
  *device = it->second.device;
  return hipSuccess;
}

namespace rvl::hip::emu {
std::string wrap_image(const std::string& so) {
  std::string img = "RVLEMU";
  const uint64_t n = so.size();
  img.append(reinterpret_cast<const char*>(&n), 8);
  return img + so;
}
}  // namespace rvl::hip::emu

hipError_t hipModuleLoadData(hipModule_t* m, const void* image) {
  const char* p = static_cast<const char*>(image);
  if (std::memcmp(p, "RVLEMU", 6) != 0) return hipErrorInvalidImage;
  uint64_t n;
  std::memcpy(&n, p + 6, 8);
  char path[] = "/tmp/ravel-emu-XXXXXX.so";
  const int fd = mkstemps(path, 3);
  if (fd < 0) return hipErrorInvalidImage;
  const bool ok = write(fd, p + 14, n) == ssize_t(n);
  close(fd);
  void* h = ok ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  unlink(path);
  if (!h) return hipErrorInvalidImage;
  *m = new EmuModule{h, path, {}};
  return hipSuccess;
}
hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name) {
  void* sym = dlsym(m->handle, (std::string(name) + "__emu").c_str());
  if (!sym) return hipErrorNotFound;
  m->functions.push_back(
      std::make_unique<EmuFunction>(EmuFunction{reinterpret_cast<void (*)(void**, const rvl_emu_ctx*)>(sym)}));
  *f = m->functions.back().get();
  return hipSuccess;
}
hipError_t hipModuleUnload(hipModule_t m) {
  dlclose(m->handle);
  delete m;
  return hipSuccess;
}

namespace {
struct Team {
  std::barrier<> bar;
  explicit Team(unsigned n) : bar(std::ptrdiff_t(n)) {}
};
void team_sync(void* t) { static_cast<Team*>(t)->bar.arrive_and_wait(); }
}  // namespace

hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned, hipStream_t, void** params,
                                 void**) {
  if (by != 1 || bz != 1 || bx == 0 || bx > 1024) return hipErrorInvalidValue;
  std::lock_guard<std::mutex> lock(g_launch);
  Team team(bx);
  std::vector<uint64_t> exchange(bx);
  const int warp = warp_width();
  auto run = [&](unsigned t) {
    rvl_emu_ctx c{};
    c.thread = {t, 0, 0};
    c.grid_dim = {gx, gy, gz};
    c.block_dim = {bx, by, bz};
    c.warp = warp;
    c.sync = team_sync;
    c.team = &team;
    c.exchange = exchange.data();
    for (unsigned z = 0; z < gz; ++z)
      for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x) {
          c.block = {x, y, z};
          f->entry(params, &c);
          team.bar.arrive_and_wait();  // the next block may reuse __shared__ memory
        }
  };
  std::vector<std::thread> threads;
  threads.reserve(bx);
  for (unsigned t = 0; t < bx; ++t) threads.emplace_back(run, t);
  for (std::thread& th : threads) th.join();
  return hipSuccess;
}
