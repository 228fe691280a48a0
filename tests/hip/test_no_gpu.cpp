// The real hip plugin as the runtime sees it. With no GPU (CI): it loads, its probe reports 0
// devices with the reason, ravel-info's record says why, and configs/gpu.json's placement
// ["hip:0", "tbb_cpu:0"] falls back to the CPU, where work runs. With a GPU: hip:0 is chosen and
// its results agree with tbb_cpu's. Plus the error paths of the plugin on the CPU emulator:
// out of memory names the request and the free memory; a compile error names the kernel.
#include <boost/test/unit_test.hpp>

#include <ravel/backend.h>

#include <dlfcn.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Device;
using ravel::Runtime;
using ravel::RuntimeOptions;
using ravel::Tensor;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct Loaded {  // a plugin opened directly, as ravel-conformance does
  void* handle = nullptr;
  const rvl_backend_api* api = nullptr;
  explicit Loaded(const std::string& path) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    BOOST_REQUIRE_MESSAGE(handle, "dlopen " << path << ": " << dlerror());
    auto entry = reinterpret_cast<rvl_backend_entry_fn>(dlsym(handle, RVL_BACKEND_ENTRY_SYMBOL));
    BOOST_REQUIRE(entry);
    api = entry();
  }
  ~Loaded() { dlclose(handle); }
  std::string take(rvl_error* e, rvl_status* code) {
    *code = api->error_code(e);
    std::string m = api->error_message(e);
    api->error_destroy(e);
    return m;
  }
};

Runtime& gpu_runtime() {
  RuntimeOptions o;
  o.config_path = RAVEL_GPU_CONFIG;
  o.use_environment = false;
  return Runtime::reset(o);
}

}  // namespace

namespace {
// Without the real plugin there is nothing to run the case on: it is reported as skipped, with
// the reason, rather than as a pass that checked nothing.
boost::test_tools::assertion_result hip_plugin_built(boost::unit_test::test_unit_id) {
#ifdef RAVEL_HIP_PLUGIN_BUILT
  return true;
#else
  boost::test_tools::assertion_result r(false);
  r.message() << "the hip plugin is not built here (no hipcc, no CUDA)";
  return r;
#endif
}
}  // namespace

BOOST_AUTO_TEST_CASE(placement_prefers_hip_and_falls_back_to_the_cpu,
                     *boost::unit_test::precondition(hip_plugin_built)) {
#ifdef RAVEL_HIP_PLUGIN_BUILT
  Runtime& rt = gpu_runtime();
  const ravel::PluginRecord* hip = nullptr;
  for (const ravel::PluginRecord& r : rt.plugins())
    if (has(r.path, "libravel_backend_hip.so")) hip = &r;
  BOOST_REQUIRE_MESSAGE(hip, "the runtime did not find libravel_backend_hip.so");
  Loaded plugin(hip->path);
  rvl_probe_result probe{};
  probe.struct_size = sizeof probe;
  BOOST_REQUIRE(plugin.api->probe(&probe) == nullptr);
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_vector<float>({1, 0, 2, 1, 0, 3}, {3, 2});
  // [[1,2,3],[4,5,6]] @ [[1,0],[2,1],[0,3]] = [[1+4+0, 0+2+9], [4+10+0, 0+5+18]]
  const std::vector<float> want{5, 11, 14, 23};
  if (probe.device_count == 0) {
    BOOST_TEST_MESSAGE("no GPU: " << probe.reason);
    BOOST_TEST(std::string(probe.reason).size() > 10u);  // says why
    BOOST_TEST(!hip->loaded);
    BOOST_TEST(has(hip->status, "no devices"));
    BOOST_TEST(has(hip->status, probe.reason));  // ravel-info shows the plugin's reason
    BOOST_TEST(rt.default_device().str() == "tbb_cpu:0");
    const std::vector<ravel::PlacementRule> rules = rt.placement_rules();
    BOOST_REQUIRE(rules.size() == 2u);
    BOOST_TEST(!rules[0].available);
    BOOST_TEST(rules[1].available);
    BOOST_TEST(a.matmul(b).to_vector<float>() == want, boost::test_tools::per_element());
  } else {
    BOOST_TEST(hip->loaded);
    BOOST_TEST(rt.default_device().str() == "hip:0");
    BOOST_TEST(a.matmul(b).to_vector<float>() == want, boost::test_tools::per_element());
    const Tensor x = Tensor::linspace(-3, 3, 1000).reshape({10, 100});
    const Tensor cpu = x.to(Device("tbb_cpu", 0));
    const std::vector<float> g = x.exp().sum(1).to_vector<float>();
    const std::vector<float> c = cpu.exp().sum(1).to_vector<float>();
    for (size_t i = 0; i < g.size(); ++i) BOOST_TEST(g[i] == c[i], boost::test_tools::tolerance(1e-5f));
  }
#endif
}

BOOST_AUTO_TEST_CASE(out_of_memory_names_device_request_and_free_bytes) {
  setenv("RAVEL_HIP_EMU_MEMORY", "1048576", 1);  // a 1 MiB device
  {
    Loaded p(RAVEL_HIP_EMU_PLUGIN);
    BOOST_REQUIRE(p.api->initialize() == nullptr);
    rvl_buffer* small = nullptr;
    BOOST_REQUIRE(p.api->buffer_allocate(0, 512 * 1024, &small) == nullptr);
    BOOST_REQUIRE(p.api->buffer_free(small) == nullptr);  // cached: the retry must empty the cache
    rvl_buffer* mid = nullptr;
    BOOST_TEST(p.api->buffer_allocate(0, 768 * 1024, &mid) == nullptr);  // fits after emptying
    rvl_buffer* big = nullptr;
    rvl_status code{};
    const std::string m = p.take(p.api->buffer_allocate(0, 4u << 20, &big), &code);
    BOOST_TEST(code == RVL_STATUS_OUT_OF_MEMORY);
    BOOST_TEST(has(m, "hip:0"));
    BOOST_TEST(has(m, "4194304 bytes requested"));
    BOOST_TEST(has(m, "bytes free of 1048576"));
    p.api->shutdown();
  }
  unsetenv("RAVEL_HIP_EMU_MEMORY");
}

BOOST_AUTO_TEST_CASE(a_compile_error_is_a_device_error_naming_the_kernel) {
  setenv("RAVEL_HIP_EMU_CXX", "false", 1);  // a "compiler" that always fails
  setenv("RAVEL_CACHE_DIR", "off", 1);
  {
    Loaded p(RAVEL_HIP_EMU_PLUGIN);
    BOOST_REQUIRE(p.api->initialize() == nullptr);
    rvl_buffer* buf = nullptr;
    BOOST_REQUIRE(p.api->buffer_allocate(0, 64, &buf) == nullptr);
    rvl_instruction in{};
    in.op = RVL_OP_CONST;
    in.dtype = RVL_DTYPE_F32;
    in.src[0] = in.src[1] = in.src[2] = -1;
    in.value.f = 1.5;
    rvl_program prog{};
    prog.struct_size = sizeof prog;
    prog.rank = 1;
    prog.shape[0] = 16;
    prog.n_instructions = 1;
    prog.instructions = &in;
    prog.output.struct_size = sizeof prog.output;
    prog.output.buffer = buf;
    prog.output.dtype = RVL_DTYPE_F32;
    prog.output.view.struct_size = sizeof prog.output.view;
    prog.output.view.strides[0] = 1;
    prog.output.view.valid_hi[0] = 16;
    rvl_status code{};
    const std::string m = p.take(p.api->execute_program(0, nullptr, &prog), &code);
    BOOST_TEST(code == RVL_STATUS_DEVICE_ERROR);
    BOOST_TEST(has(m, "kernel rvl_ew_"));
    BOOST_TEST(has(m, "compiler error"));
    p.api->shutdown();
  }
  unsetenv("RAVEL_HIP_EMU_CXX");
  unsetenv("RAVEL_CACHE_DIR");
}
