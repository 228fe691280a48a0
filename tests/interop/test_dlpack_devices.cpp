// The core's DLPack device mapping, independent of any real backend: a test plugin ("vgpu",
// typed_memory_plugin.cpp) reports its buffers as kDLVulkan device 5 through ABI 1.3
// device_properties, and the core must pass that on in exports, share such memory only with
// that device, refuse it elsewhere naming the owner, and still copy host memory onto it. tbb_cpu
// says nothing (0) and is host memory, kDLCPU. GPU backends: hip_dlpack, l0_dlpack.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "ravel/dlpack.hpp"
#include "ravel/ravel.hpp"

using ravel::Device;
using ravel::Tensor;
namespace dl = ravel::dlpack;

namespace {

const Device kVgpu("vgpu", 0), kCpu("tbb_cpu", 0);

struct WithVgpu {
  WithVgpu() {
    ravel::RuntimeOptions o;
    o.extra_paths = {RAVEL_VGPU_DIR};
    // The CPU as the default device, also where a GPU plugin finds one (the GPU machine).
    o.config_path = RAVEL_CPU_CONFIG;
    o.use_environment = false;
    ravel::Runtime::reset(o);
  }
};
BOOST_GLOBAL_FIXTURE(WithVgpu);

struct Wrapper {  // a managed tensor over given memory, counting its deleter's calls
  dl::DLManagedTensorVersioned managed{};
  std::vector<int64_t> shape{4}, strides{1};
  int deleted = 0;
  Wrapper(void* data, dl::DLDevice dev) {
    managed.version = {1, 0};
    managed.manager_ctx = this;
    managed.deleter = [](dl::DLManagedTensorVersioned* self) { ++static_cast<Wrapper*>(self->manager_ctx)->deleted; };
    managed.dl_tensor = {data, dev, 1, {dl::kDLFloat, 32, 1}, shape.data(), strides.data(), 0};
  }
};

std::string device_error(dl::DLManagedTensorVersioned* m, const Device& target) {
  try {
    ravel::from_dlpack(m, target);
  } catch (const ravel::DeviceError& e) {
    return e.what();
  }
  BOOST_FAIL("no DeviceError was raised");
  return "";
}

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(the_plugin_states_the_memory_and_the_core_passes_it_on) {
  const Tensor t = Tensor::from_vector<float>({1, 2, 3, 4}, {4}, kVgpu);
  dl::DLManagedTensorVersioned* m = ravel::to_dlpack_versioned(t);
  BOOST_TEST(int(m->dl_tensor.device.device_type) == 7);  // kDLVulkan, a type the core never names
  BOOST_TEST(m->dl_tensor.device.device_id == 5);
  const auto* f = static_cast<const float*>(m->dl_tensor.data);
  BOOST_TEST(std::vector<float>(f, f + 4) == (std::vector<float>{1, 2, 3, 4}));
  dl::DLManagedTensorVersioned* c = ravel::to_dlpack_versioned(t.to(kCpu));
  BOOST_TEST((c->dl_tensor.device.device_type == dl::kDLCPU && c->dl_tensor.device.device_id == 0));
  c->deleter(c);

  Wrapper same(m->dl_tensor.data, {static_cast<dl::DLDeviceType>(7), 5});
  {
    const Tensor back = ravel::from_dlpack(&same.managed, kVgpu);  // shared: the very same address
    dl::DLManagedTensor* again = ravel::to_dlpack(back);
    BOOST_TEST(again->dl_tensor.data == m->dl_tensor.data);
    again->deleter(again);
    BOOST_TEST(back.to_vector<float>() == (std::vector<float>{1, 2, 3, 4}));
  }
  BOOST_TEST(same.deleted == 1);
  // Without a target, device memory stays with the device that owns it (the default device
  // here is tbb_cpu), shared as before.
  BOOST_TEST(ravel::Runtime::get().default_device().str() == "tbb_cpu:0");
  Wrapper no_target(m->dl_tensor.data, {static_cast<dl::DLDeviceType>(7), 5});
  {
    const Tensor back = ravel::from_dlpack(&no_target.managed);
    BOOST_TEST(back.device().str() == "vgpu:0");
    dl::DLManagedTensor* again = ravel::to_dlpack(back);
    BOOST_TEST(again->dl_tensor.data == m->dl_tensor.data);
    again->deleter(again);
  }
  BOOST_TEST(no_target.deleted == 1);

  Wrapper elsewhere(m->dl_tensor.data, {static_cast<dl::DLDeviceType>(7), 5});
  BOOST_TEST(has(device_error(&elsewhere.managed, kCpu), "import it with device vgpu:0, then .to(tbb_cpu:0)"));
  Wrapper other_id(m->dl_tensor.data, {static_cast<dl::DLDeviceType>(7), 4});
  BOOST_TEST(has(device_error(&other_id.managed, kVgpu), "no Ravel device here owns that memory"));
  BOOST_TEST((elsewhere.deleted == 0 && other_id.deleted == 0));
  m->deleter(m);
}

BOOST_AUTO_TEST_CASE(host_memory_onto_a_device_memory_device_is_copied) {
  std::vector<float> host{5, 6, 7, 8};
  Wrapper w(host.data(), {dl::kDLCPU, 0});
  const Tensor t = ravel::from_dlpack(&w.managed, kVgpu);
  BOOST_TEST(w.deleted == 1);  // copied, so given back at once
  host[0] = 50;                // and the copy does not see the owner's writes
  BOOST_TEST(t.to_vector<float>() == (std::vector<float>{5, 6, 7, 8}));
  dl::DLManagedTensor* e = ravel::to_dlpack(t);
  BOOST_TEST(e->dl_tensor.data != static_cast<void*>(host.data()));
  e->deleter(e);
}
