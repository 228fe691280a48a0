#include "rtc.hpp"

#include <ravel/backend.hpp>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#if defined(RAVEL_HIP_EMULATED)
#include "../emu/emu_runtime.hpp"
#endif

namespace rvl::hip {
namespace {

// NVRTC and hiprtc share one C API shape (hiprtc copied NVRTC's), so one loader serves both.
// Results are plain ints: 0 is success in both.
struct RtcApi {
  void* lib = nullptr;
  std::string error;  // why lib is NULL
  const char* (*get_error_string)(int) = nullptr;
  int (*create)(void** prog, const char* src, const char* name, int n, const char* const* h,
                const char* const* hn) = nullptr;
  int (*compile)(void* prog, int n, const char* const* opts) = nullptr;
  int (*log_size)(void* prog, size_t* n) = nullptr;
  int (*log)(void* prog, char* out) = nullptr;
  int (*code_size)(void* prog, size_t* n) = nullptr;
  int (*code)(void* prog, char* out) = nullptr;
  int (*destroy)(void** prog) = nullptr;
  int (*version)(int* major, int* minor) = nullptr;
  // Set for hiprtc: see run_rtc. Held by pointer so that RtcApi stays movable.
  std::shared_ptr<std::mutex> serial;
};

template <class F>
bool sym(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

RtcApi open_api(const std::vector<const char*>& libs, const char* prefix, const char* code_fn,
                const char* code_size_fn) {
  RtcApi api;
  for (const char* l : libs)
    if ((api.lib = dlopen(l, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  if (!api.lib) {
    api.error = std::string("cannot open ") + libs.front() + ": " + dlerror();
    return api;
  }
  const std::string p = prefix;
  bool ok = sym(api.lib, (p + "GetErrorString").c_str(), api.get_error_string) &&
            sym(api.lib, (p + "CreateProgram").c_str(), api.create) &&
            sym(api.lib, (p + "CompileProgram").c_str(), api.compile) &&
            sym(api.lib, (p + "GetProgramLogSize").c_str(), api.log_size) &&
            sym(api.lib, (p + "GetProgramLog").c_str(), api.log) &&
            sym(api.lib, code_size_fn, api.code_size) && sym(api.lib, code_fn, api.code) &&
            sym(api.lib, (p + "DestroyProgram").c_str(), api.destroy);
  sym(api.lib, (p + "Version").c_str(), api.version);  // optional
  if (!ok) {
    api.error = std::string(libs.front()) + " lacks the " + prefix + " API";
    api.lib = nullptr;
  }
  return api;
}

const RtcApi& nvrtc() {
  static const RtcApi api = open_api({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, "nvrtc",
                                     "nvrtcGetCUBIN", "nvrtcGetCUBINSize");
  return api;
}

// hiprtc of ROCm 5.2 (through comgr) is not thread-safe: concurrent compiles race on LLVM's
// global registries and either register the AMDGPU target twice (every later compile fails with
// "Cannot choose between targets "amdgcn" and "amdgcn"", as a CI run did) or abort the process
// ("LLVM ERROR: inconsistency in registered CommandLine options"). Reproduced with
// ravel-hip-compile-check --jobs 8 --batch 1, also when only the first compile is serialised.
// Every hiprtc compile in a process therefore runs alone; parallel checks use processes.
const RtcApi& hiprtc() {
  static const RtcApi api = [] {
    RtcApi a = open_api({"libamdhip64.so.5", "libhiprtc.so", "libamdhip64.so"}, "hiprtc",
                        "hiprtcGetCode", "hiprtcGetCodeSize");
    a.serial = std::make_shared<std::mutex>();
    return a;
  }();
  return api;
}

std::string run_rtc(const RtcApi& api, const char* what, const KernelSource& k,
                    const std::vector<std::string>& options) {
  if (!api.lib) fail(RVL_STATUS_DEVICE_ERROR, "kernel " + k.name + ": " + api.error);
  std::unique_lock<std::mutex> lock;
  if (api.serial) lock = std::unique_lock<std::mutex>(*api.serial);
  void* prog = nullptr;
  int r = api.create(&prog, k.source.c_str(), (k.name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != 0)
    fail(RVL_STATUS_DEVICE_ERROR, std::string(what) + " cannot create a program for kernel " +
                                      k.name + ": " + api.get_error_string(r));
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  r = api.compile(prog, int(opts.size()), opts.data());
  size_t n = 0;
  std::string log;
  if (api.log_size(prog, &n) == 0 && n > 1) {
    log.resize(n);
    api.log(prog, log.data());
    log.resize(n - 1);
  }
  if (r != 0) {
    api.destroy(&prog);
    fail(RVL_STATUS_DEVICE_ERROR, "kernel " + k.name + " (" + k.summary + "): " + what +
                                      " compile error: " + api.get_error_string(r) + "\n" + log);
  }
  std::string code;
  if (api.code_size(prog, &n) != 0 || n == 0) {
    api.destroy(&prog);
    fail(RVL_STATUS_DEVICE_ERROR, "kernel " + k.name + ": " + what + " produced no code");
  }
  code.resize(n);
  api.code(prog, code.data());
  api.destroy(&prog);
  return code;
}

#if defined(RAVEL_HIP_EMULATED)
// The emulator's "device compiler": the host C++ compiler, building a shared object.
std::string compile_host(const KernelSource& k) {
  char dir[] = "/tmp/ravel-emu-build-XXXXXX";
  if (!mkdtemp(dir)) fail(RVL_STATUS_DEVICE_ERROR, "kernel " + k.name + ": no temporary folder");
  const std::string base = std::string(dir) + "/" + k.name;
  std::string src = k.source + "\nextern \"C\" void " + k.name + "__emu(void** a, const rvl_emu_ctx* c) {\n"
                    "  rvl_emu_current = c;\n  " + k.name + "(";
  for (size_t i = 0; i < k.param_types.size(); ++i)
    src += (i ? ", " : "") + std::string("*(") + k.param_types[i] + "*)a[" + std::to_string(i) + "]";
  src += ");\n}\n";
  std::ofstream(base + ".cpp") << src;
  const char* cxx = std::getenv("RAVEL_HIP_EMU_CXX");
  const std::string cmd = std::string(cxx ? cxx : "c++") +
                          " -std=c++17 -O1 -w -shared -fPIC -ffp-contract=off -include " +
                          RAVEL_HIP_EMU_HEADER + " -o " + base + ".so " + base + ".cpp 2> " + base + ".log";
  const int rc = std::system(cmd.c_str());
  std::stringstream so, log;
  so << std::ifstream(base + ".so", std::ios::binary).rdbuf();
  log << std::ifstream(base + ".log").rdbuf();
  std::system(("rm -rf " + std::string(dir)).c_str());
  if (rc != 0)
    fail(RVL_STATUS_DEVICE_ERROR, "kernel " + k.name + " (" + k.summary +
                                      "): host compiler error:\n" + log.str());
  return emu::wrap_image(so.str());
}
#endif

}  // namespace

bool amd_arch_supported(const std::string& arch) {
  for (const char* a : {"gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030"})
    if (arch == a) return true;
  return false;
}

bool compiler_available(Platform p, std::string* why) {
  switch (p) {
    case Platform::Nvidia:
      if (why) *why = nvrtc().error;
      return nvrtc().lib != nullptr;
    case Platform::Amd:
      if (why) *why = hiprtc().error;
      return hiprtc().lib != nullptr;
    case Platform::Emulated:
#if defined(RAVEL_HIP_EMULATED)
      return true;
#else
      if (why) *why = "this build has no CPU emulator";
      return false;
#endif
  }
  return false;
}

std::string compiler_id(Platform p) {
  int major = 0, minor = 0;
  switch (p) {
    case Platform::Nvidia:
      if (nvrtc().version) nvrtc().version(&major, &minor);
      return "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
    case Platform::Amd: {
      if (hiprtc().version) hiprtc().version(&major, &minor);
      int rt = 0;
      auto get = reinterpret_cast<int (*)(int*)>(hiprtc().lib ? dlsym(hiprtc().lib, "hipRuntimeGetVersion") : nullptr);
      if (get) get(&rt);
      return "hiprtc " + std::to_string(major) + "." + std::to_string(minor) + " runtime " + std::to_string(rt);
    }
    case Platform::Emulated: return std::string("host c++ ") + __VERSION__;
  }
  return "?";
}

std::string compile_kernel(const KernelSource& k, const Target& t) {
  switch (t.platform) {
    case Platform::Nvidia:
      // A real arch (sm_90) yields a cubin: no JIT when the module loads. No FMA contraction:
      // each instruction is rounded on its own (contractions use fmaf explicitly).
      return run_rtc(nvrtc(), "nvrtc", k, {"--gpu-architecture=" + t.arch, "--std=c++17",
                                           "--fmad=false", "-default-device"});
    case Platform::Amd:
      if (!amd_arch_supported(t.arch))
        fail(RVL_STATUS_UNSUPPORTED, "kernel " + k.name + ": hiprtc of ROCm 5.2 does not know arch " +
                                         t.arch + " (supported: gfx900 gfx906 gfx908 gfx90a gfx1030)");
      return run_rtc(hiprtc(), "hiprtc", k, {"--offload-arch=" + t.arch, "-O3", "-std=c++17",
                                             "-ffp-contract=off"});
    case Platform::Emulated:
#if defined(RAVEL_HIP_EMULATED)
      return compile_host(k);
#else
      fail(RVL_STATUS_UNSUPPORTED, "this build has no CPU emulator");
#endif
  }
  fail(RVL_STATUS_INTERNAL, "compile_kernel: unknown platform");
}

}  // namespace rvl::hip
