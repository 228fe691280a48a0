// Plugins that misbehave in ways a C ABI cannot prevent, for the runtime's and ravel-info's
// robustness tests. One source, built once per MISBEHAVE case (see CMakeLists.txt):
//   1 THROW_ENTRY  rvl_backend_entry throws a C++ exception
//   2 THROW_PROBE  probe throws
//   3 THROW_INIT   initialize throws
//   4 CRASH_PROBE  probe segfaults
//   5 ABORT_INIT   initialize aborts (a plugin skipped by the config must never get that far)
//   6 MANY_DEVICES device_count reports INT32_MAX devices (the core must not allocate for them)
//   7 BAD_NAME     get_info names the backend "Bad Name:0", which no device name can spell
//   8 HANG_INIT    initialize ignores SIGALRM and never returns
//   9 HOG_INIT     initialize touches memory 64 MiB at a time until malloc fails (then bad_alloc)
// Everything else is forwarded to the real oneTBB plugin (dlopen'ed), under its own name.
#include <ravel/backend.h>

#include <dlfcn.h>

#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace {

const rvl_backend_api* real() {
  static const rvl_backend_api* api = [] {
    void* h = dlopen(RAVEL_REAL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h) { std::fprintf(stderr, "misbehaving_plugin: %s\n", dlerror()); std::abort(); }
    return reinterpret_cast<rvl_backend_entry_fn>(dlsym(h, RVL_BACKEND_ENTRY_SYMBOL))();
  }();
  return api;
}

rvl_error* get_info(rvl_backend_info* out) {
  out->name = MISBEHAVE == 7 ? "Bad Name:0" : MISBEHAVE_NAME;
  out->version = "0.0-misbehaving";
  out->description = "a plugin that misbehaves on purpose (tests)";
  return nullptr;
}

rvl_error* probe(rvl_probe_result* out) {
  if (MISBEHAVE == 2) throw std::runtime_error("probe threw on purpose");
  if (MISBEHAVE == 4) std::raise(SIGSEGV);
  return real()->probe(out);
}

rvl_error* initialize() {
  if (MISBEHAVE == 3) throw std::logic_error("initialize threw on purpose");
  if (MISBEHAVE == 5) std::abort();
  if (MISBEHAVE == 8) {
    std::signal(SIGALRM, SIG_IGN);
    for (;;) pause();
  }
  if (MISBEHAVE == 9) {
    for (int i = 0; i < 64; ++i) {  // at most 4 GiB; the tests give the examination 256 MiB
      void* p = std::malloc(size_t{64} << 20);
      if (!p) throw std::bad_alloc();
      std::memset(p, 1, size_t{64} << 20);
    }
  }
  // Case 6 is refused after initialize, and the core then calls shutdown: the real plugin (the
  // same library the runtime's own tbb_cpu is) must be neither initialised nor shut down by it.
  if (MISBEHAVE == 6) return nullptr;
  return real()->initialize();
}

void shutdown() {
  if (MISBEHAVE != 6) real()->shutdown();
}

rvl_error* device_count(int32_t* out) {
  if (MISBEHAVE == 6) {
    *out = INT32_MAX;
    return nullptr;
  }
  return real()->device_count(out);
}

rvl_backend_api make_table() {
  rvl_backend_api t = *real();
  t.get_info = get_info;
  t.probe = probe;
  t.initialize = initialize;
  t.device_count = device_count;
  t.shutdown = shutdown;
  return t;
}

}  // namespace

extern "C" RVL_EXPORT const rvl_backend_api* rvl_backend_entry(void) {
  if (MISBEHAVE == 1) throw std::runtime_error("rvl_backend_entry threw on purpose");
  static const rvl_backend_api table = make_table();
  return &table;
}
