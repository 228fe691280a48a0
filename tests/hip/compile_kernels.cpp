// ravel-hip-compile-check --platform nvidia|amd --arch ARCH [--jobs N] [--cache] DIR
//
// Compiles every generated kernel (DIR/*.cu, as dumped by RAVEL_HIP_DUMP_DIR) with the real
// device compiler for ARCH: NVRTC for nvidia, hiprtc for amd. No GPU is needed. Kernels are
// compiled in batches (one prelude, many kernels: the per-call cost of the compiler dominates);
// a batch that fails is compiled kernel by kernel so the report names each failing kernel and
// the compiler's message. Exit status: 0 all compiled, 1 some failed, 2 usage or nothing found,
// 77 the compiler for the platform is not available here (CTest: skipped).
// --jobs N compiles N batches at once, in N processes (hiprtc is not thread-safe). --cache compiles each
// kernel on its own and stores the code object in the plugin's on-disk cache (RAVEL_CACHE_DIR),
// so that a later run of the plugin on this arch loads instead of compiling: gpu-check.sh
// precompiles every conformance kernel this way on 16 cores before running the suite.
#include "runtime/disk_cache.hpp"
#include "runtime/rtc.hpp"

#include <ravel/backend.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace rvl::hip;
namespace fs = std::filesystem;

namespace {

struct Source {
  std::string name, body;  // body: the source without the prelude
};

bool compiles(const std::string& name, const std::string& text, const Target& t, std::string* error) {
  KernelSource k;
  k.name = name;
  k.summary = "compile check";
  k.source = text;
  try {
    compile_kernel(k, t);
    return true;
  } catch (const rvl::Error& e) {
    *error = e.what();
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string platform, arch, dir;
  size_t batch = 64, jobs = 1;
  bool cache = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--platform" && i + 1 < argc) platform = argv[++i];
    else if (a == "--arch" && i + 1 < argc) arch = argv[++i];
    else if (a == "--batch" && i + 1 < argc) batch = size_t(std::max(1, std::atoi(argv[++i])));
    else if (a == "--jobs" && i + 1 < argc) jobs = size_t(std::max(1, std::atoi(argv[++i])));
    else if (a == "--cache") cache = true;
    else dir = a;
  }
  if ((platform != "nvidia" && platform != "amd") || arch.empty() || dir.empty()) {
    std::fprintf(stderr, "usage: ravel-hip-compile-check --platform nvidia|amd --arch ARCH [--batch N] DIR\n");
    return 2;
  }
  Target t;
  t.platform = platform == "amd" ? Platform::Amd : Platform::Nvidia;
  t.arch = arch;
  t.warp_size = arch == "gfx90a" || arch == "gfx908" || arch == "gfx906" ? 64 : 32;
  std::string why;
  if (!compiler_available(t.platform, &why)) {
    std::printf("skipped: no %s compiler here (%s)\n", platform.c_str(), why.c_str());
    return 77;
  }
  if (t.platform == Platform::Amd && !amd_arch_supported(arch)) {
    std::fprintf(stderr, "arch %s is not one hiprtc (ROCm 5.2) knows\n", arch.c_str());
    return 2;
  }
  // Every dumped source starts with the prelude of its target; it must be this target's.
  const std::string pre = prelude(t);
  std::vector<Source> sources;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".cu") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    std::stringstream ss;
    ss << std::ifstream(p).rdbuf();
    const std::string text = ss.str();
    if (text.compare(0, pre.size(), pre) != 0) {
      std::fprintf(stderr, "%s was not generated for %s %s\n", p.c_str(), platform.c_str(), arch.c_str());
      return 2;
    }
    sources.push_back({p.stem().string(), text.substr(pre.size())});
  }
  if (sources.empty()) {
    std::fprintf(stderr, "no kernels (*.cu) in %s\n", dir.c_str());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  if (cache) batch = 1;
  // The jobs are processes, not threads: hiprtc is not thread-safe (see run_rtc). They share
  // the batch counter and the failure count through an anonymous shared mapping.
  struct Shared {
    std::atomic<size_t> next{0}, failed{0};
  };
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmap");
    return 2;
  }
  Shared* shared = new (mem) Shared;
  std::atomic<size_t>& next = shared->next;
  std::atomic<size_t>& failed = shared->failed;
  std::fflush(stdout);
  auto fail_one = [&](const Source& src, const std::string& error) {
    ++failed;
    std::printf("FAIL %s: %s\n", src.name.c_str(), error.substr(0, 2000).c_str());
    std::fflush(stdout);
  };
  auto worker = [&] {
    for (size_t b; (b = next.fetch_add(batch)) < sources.size();) {
      const size_t end = std::min(sources.size(), b + batch);
      std::string error;
      if (cache) {  // one kernel, stored under the key the plugin will look for
        KernelSource k;
        k.name = sources[b].name;
        k.summary = "precompiled";
        k.source = pre + sources[b].body;
        const std::string key = disk_cache_key(k, t);
        std::string code;
        if (disk_cache_load(key, &code)) continue;
        try {
          disk_cache_store(key, compile_kernel(k, t));
        } catch (const rvl::Error& e) {
          fail_one(sources[b], e.what());
        }
        continue;
      }
      std::string text = pre;
      for (size_t i = b; i < end; ++i) text += sources[i].body;
      if (compiles("batch_" + std::to_string(b / batch), text, t, &error)) continue;
      for (size_t i = b; i < end; ++i)  // name the culprits
        if (!compiles(sources[i].name, pre + sources[i].body, t, &error)) fail_one(sources[i], error);
    }
  };
  std::vector<pid_t> pool;
  for (size_t j = 0; j < jobs; ++j) {
    const pid_t pid = fork();
    if (pid == 0) {
      worker();
      std::fflush(stdout);
      _exit(0);
    }
    if (pid < 0) {
      std::perror("fork");
      worker();  // the work still gets done, by this process
      break;
    }
    pool.push_back(pid);
  }
  bool crashed = false;
  for (pid_t pid : pool) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) crashed = true;
  }
  if (crashed) {
    std::printf("FAIL: a compile job died (a compiler crash); see its message above\n");
    ++failed;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s %s (%s): %zu kernels compiled%s, %zu failed, %.1f s\n", platform.c_str(),
              arch.c_str(), compiler_id(t.platform).c_str(), sources.size() - failed.load(),
              cache ? (" into " + disk_cache_dir()).c_str() : "", failed.load(), s);
  return failed ? 1 : 0;
}
