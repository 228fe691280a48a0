// tbb_cpu with several devices (RAVEL_TBB_DEVICES): what a copy between two devices costs against
// one memcpy of the same bytes in the same run, and whether two devices with one thread each run
// two independent kernels at the same time (their queues, Note [Device queues]). Talks to the
// plugin through its C table only (dlopen), so the numbers are the plugin's, not the core's.
//   bench_multidevice [MiB (64)] [reps (15)]
// Measures, never asserts (bench/CMakeLists.txt); docs/performance.md records the results.
#include <ravel/backend.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

const rvl_backend_api* api = nullptr;

void ok(rvl_error* e, const char* what) {
  if (!e) return;
  std::fprintf(stderr, "bench_multidevice: %s: %s\n", what, api->error_message(e));
  std::exit(1);
}

double median_ms(int reps, const std::function<void()>& body) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Initialises the plugin with `devices` devices (queues on or off).
void start(int devices, const char* async) {
  setenv("RAVEL_TBB_DEVICES", std::to_string(devices).c_str(), 1);
  setenv("RAVEL_TBB_ASYNC", async, 1);
  ok(api->initialize(), "initialize");
}

// A kernel of `n` f32 elements that costs ~`chain` additions each: out = v + 0 + 0 + ...
void launch_chain(int32_t device, rvl_buffer* out, int64_t n, int chain) {
  std::vector<rvl_instruction> code(2);
  for (auto& i : code) i.src[0] = i.src[1] = i.src[2] = -1;
  code[0].op = code[1].op = RVL_OP_CONST;
  code[0].dtype = code[1].dtype = RVL_DTYPE_F32;
  code[1].value.f = 1.0;
  for (int k = 0; k < chain; ++k) {
    rvl_instruction a{};
    a.op = RVL_OP_ADD;
    a.dtype = RVL_DTYPE_F32;
    a.src[0] = static_cast<int32_t>(code.size()) - 1;
    a.src[1] = 0;
    a.src[2] = -1;
    code.push_back(a);
  }
  rvl_program p{};
  p.struct_size = sizeof p;
  p.rank = 1;
  p.shape[0] = n;
  p.n_instructions = static_cast<int32_t>(code.size());
  p.instructions = code.data();
  p.output.struct_size = sizeof p.output;
  p.output.buffer = out;
  p.output.dtype = RVL_DTYPE_F32;
  p.output.view.struct_size = sizeof p.output.view;
  p.output.view.strides[0] = 1;
  p.output.view.valid_hi[0] = n;
  ok(api->execute_program(device, nullptr, &p), "execute_program");
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 15;
  const uint64_t bytes = mib << 20;
  void* h = dlopen(RAVEL_TBB_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!h) return std::fprintf(stderr, "dlopen: %s\n", dlerror()), 1;
  api = reinterpret_cast<rvl_backend_entry_fn>(dlsym(h, RVL_BACKEND_ENTRY_SYMBOL))();

  // ---- 1. a copy between two devices against one memcpy of the same bytes --------------------
  start(2, "1");
  rvl_buffer* a = nullptr;
  rvl_buffer* b = nullptr;
  ok(api->buffer_allocate(0, bytes, &a), "allocate");
  ok(api->buffer_allocate(1, bytes, &b), "allocate");
  std::vector<unsigned char> host(bytes, 7), host2(bytes, 9);
  ok(api->buffer_write(nullptr, a, 0, host.data(), bytes), "write");
  ok(api->buffer_write(nullptr, b, 0, host.data(), bytes), "write");
  const double memcpy_ms = median_ms(reps, [&] { std::memcpy(host2.data(), host.data(), bytes); });
  const double peer_ms = median_ms(reps, [&] {
    ok(api->buffer_copy_peer(nullptr, a, 0, nullptr, b, 0, bytes), "buffer_copy_peer");
    ok(api->synchronize(1), "synchronize");
  });
  const double staged_ms = median_ms(reps, [&] {  // what the core did before ABI 1.5
    ok(api->buffer_read(nullptr, a, 0, host2.data(), bytes), "read");
    ok(api->buffer_write(nullptr, b, 0, host2.data(), bytes), "write");
    ok(api->synchronize(1), "synchronize");
  });
  auto gbs = [&](double ms) { return static_cast<double>(bytes) / (ms * 1e-3) / 1e9; };
  std::printf("copy of %llu MiB, median of %d (GB/s counts the bytes once):\n", static_cast<unsigned long long>(mib),
              reps);
  std::printf("  memcpy (host)                       %8.2f ms  %6.2f GB/s\n", memcpy_ms, gbs(memcpy_ms));
  std::printf("  buffer_copy_peer tbb_cpu:0 -> :1    %8.2f ms  %6.2f GB/s  %.2fx memcpy's speed\n", peer_ms,
              gbs(peer_ms), memcpy_ms / peer_ms);
  std::printf("  through host (read + write)         %8.2f ms  %6.2f GB/s  %.2fx memcpy's speed\n", staged_ms,
              gbs(staged_ms), memcpy_ms / staged_ms);
  ok(api->buffer_free(a), "free");
  ok(api->buffer_free(b), "free");
  api->shutdown();

  // ---- 2. two devices with a share of the cores each: one kernel each, at the same time? ------
  constexpr int64_t n = 1 << 20;
  constexpr int chain = 48;
  for (const char* async : {"1", "0"}) {
    start(2, async);
    rvl_device_properties p{};
    p.struct_size = sizeof p;
    ok(api->device_properties(0, &p), "device_properties");
    rvl_buffer* o0 = nullptr;
    rvl_buffer* o1 = nullptr;
    ok(api->buffer_allocate(0, n * 4, &o0), "allocate");
    ok(api->buffer_allocate(1, n * 4, &o1), "allocate");
    launch_chain(0, o0, n, chain);  // warm up both arenas
    launch_chain(1, o1, n, chain);
    ok(api->synchronize(0), "synchronize");
    ok(api->synchronize(1), "synchronize");
    const double one = median_ms(reps, [&] {
      launch_chain(0, o0, n, chain);
      ok(api->synchronize(0), "synchronize");
    });
    const double both = median_ms(reps, [&] {
      launch_chain(0, o0, n, chain);
      launch_chain(1, o1, n, chain);
      ok(api->synchronize(0), "synchronize");
      ok(api->synchronize(1), "synchronize");
    });
    // Independence, which a loaded machine cannot hide: device 1's short kernel is done long
    // before device 0's long one when each device has its own queue.
    double long_ms = 0, short_ms = 0;
    {
      const auto t0 = std::chrono::steady_clock::now();
      launch_chain(0, o0, n, chain * 8);
      launch_chain(1, o1, n / 64, chain);
      ok(api->synchronize(1), "synchronize");
      const auto t1 = std::chrono::steady_clock::now();
      ok(api->synchronize(0), "synchronize");
      const auto t2 = std::chrono::steady_clock::now();
      short_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
      long_ms = std::chrono::duration<double, std::milli>(t2 - t0).count();
    }
    std::printf("two devices of %d thread(s) each, queues %s: one kernel %.2f ms, one on each device %.2f ms "
                "(%.2fx; 1.0 = fully concurrent, 2.0 = one after the other); a short kernel on device 1 "
                "launched after a long one on device 0 is done after %.2f ms, the long one after %.2f ms\n",
                p.compute_units, async[0] == '1' ? "on " : "off", one, both, both / one, short_ms, long_ms);
    ok(api->buffer_free(o0), "free");
    ok(api->buffer_free(o1), "free");
    api->shutdown();
  }
  return 0;
}
