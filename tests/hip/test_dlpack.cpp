// DLPack on the HIP backend, through the core, on the CPU emulator (ravel_backend_hip_emu, found
// before the real plugin by an extra search path): exports carry the device pointer and the
// DLPack device type the plugin reports (kDLROCM: the emulator emulates AMD's HIP runtime;
// kDLCUDA when RAVEL_HIP_EMU_TARGET names an NVIDIA target, the second CTest registration), and
// an import of that memory on hip:0 wraps the very same pointer (buffer_wrap) with its strides,
// values and lifetimes intact. The error paths: memory of another device, of another kind, host
// memory claiming to be device memory, and a GPU tensor imported onto the CPU.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ravel/dlpack.hpp"
#include "ravel/ravel.hpp"

using ravel::Device;
using ravel::Tensor;
namespace dl = ravel::dlpack;

namespace {

const Device kHip("hip", 0);

// The emulator's folder first: its plugin is also called "hip", and the first one found wins.
struct EmulatorRuntime {
  EmulatorRuntime() {
    ravel::RuntimeOptions o;
    std::string plugin = RAVEL_HIP_EMU_PLUGIN;
    o.extra_paths = {plugin.substr(0, plugin.rfind('/'))};
    o.use_environment = false;
    ravel::Runtime::reset(o);
  }
};
BOOST_GLOBAL_FIXTURE(EmulatorRuntime);

// What the plugin must report for its pointers on this run.
dl::DLDeviceType expected_type() {
  const char* t = std::getenv("RAVEL_HIP_EMU_TARGET");
  return t && std::string(t).rfind("nvidia", 0) == 0 ? dl::kDLCUDA : dl::kDLROCM;
}

// A managed tensor of our own over someone else's DLTensor, counting its deleter's calls (and
// passing the call on to `inner`, when there is one).
struct Wrapper {
  dl::DLManagedTensorVersioned managed{};
  dl::DLManagedTensorVersioned* inner = nullptr;
  std::vector<int64_t> shape, strides;
  int deleted = 0;
  Wrapper(void* data, dl::DLDevice dev, std::vector<int64_t> sh, std::vector<int64_t> st,
          dl::DLManagedTensorVersioned* in = nullptr)
      : inner(in), shape(std::move(sh)), strides(std::move(st)) {
    managed.version = {1, 0};
    managed.manager_ctx = this;
    managed.deleter = [](dl::DLManagedTensorVersioned* self) {
      auto* w = static_cast<Wrapper*>(self->manager_ctx);
      ++w->deleted;
      if (w->inner) w->inner->deleter(w->inner);
    };
    managed.dl_tensor = {data, dev, static_cast<int32_t>(shape.size()), {dl::kDLFloat, 32, 1}, shape.data(),
                         strides.empty() ? nullptr : strides.data(), 0};
  }
};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  BOOST_FAIL("no error was raised");
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(device_type_follows_the_platform) {
  const Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, kHip);
  dl::DLManagedTensorVersioned* m = ravel::to_dlpack_versioned(t);
  const dl::DLTensor& d = m->dl_tensor;
  BOOST_TEST(d.device.device_type == expected_type());
  BOOST_TEST(d.device.device_id == 0);
  BOOST_TEST(m->flags == dl::kFlagReadOnly);
  BOOST_TEST(std::vector<int64_t>(d.strides, d.strides + 2) == (std::vector<int64_t>{3, 1}));
  // Import it again on hip:0: the same pointer is wrapped, nothing is copied.
  Wrapper w(d.data, d.device, {2, 3}, {3, 1}, m);
  {
    const Tensor back = ravel::from_dlpack(&w.managed, kHip);
    dl::DLManagedTensor* again = ravel::to_dlpack(back);
    BOOST_TEST(again->dl_tensor.data == d.data);
    BOOST_TEST(again->dl_tensor.device.device_type == expected_type());
    again->deleter(again);
    BOOST_TEST(back.to_vector<float>() == (std::vector<float>{1, 2, 3, 4, 5, 6}));
    BOOST_TEST(w.deleted == 0);
  }
  BOOST_TEST(w.deleted == 1);  // the last Ravel tensor on the memory went: given back once
}

BOOST_AUTO_TEST_CASE(round_trip_keeps_strides_values_and_lifetimes) {
  dl::DLManagedTensorVersioned* m;
  const void* address;
  {
    const Tensor base = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4}, kHip);
    m = ravel::to_dlpack_versioned(base.transpose());  // strides (1, 4), 4 x 3
    address = m->dl_tensor.data;
  }
  // The export outlives every Ravel tensor: the emulator's device memory is host-readable.
  const auto* f = static_cast<const float*>(m->dl_tensor.data);
  BOOST_TEST((f[0] == 0.f && f[1] == 1.f && f[4] == 4.f && f[11] == 11.f));
  BOOST_TEST(std::vector<int64_t>(m->dl_tensor.strides, m->dl_tensor.strides + 2) == (std::vector<int64_t>{1, 4}));
  Wrapper w(m->dl_tensor.data, m->dl_tensor.device, {4, 3}, {1, 4}, m);
  Tensor t = ravel::from_dlpack(&w.managed, kHip);
  BOOST_TEST(t.strides() == (std::vector<int64_t>{1, 4}));  // a view of the wrapped memory
  Tensor row = t.at(1);                                     // [1, 5, 9]
  dl::DLManagedTensor* r = ravel::to_dlpack(row);
  BOOST_TEST(r->dl_tensor.data == static_cast<const char*>(address) + sizeof(float));
  r->deleter(r);
  BOOST_TEST(t.to_vector<float>() == (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  t = Tensor();
  BOOST_TEST(w.deleted == 0);  // the row still reads the memory
  BOOST_TEST((row * 2.0f).to_vector<float>() == (std::vector<float>{2, 10, 18}));
  row = Tensor();
  BOOST_TEST(w.deleted == 1);
}

BOOST_AUTO_TEST_CASE(memory_of_another_device_or_kind_is_refused_and_kept_by_its_owner) {
  const Tensor t = Tensor::from_vector<float>({1, 2, 3}, {3}, kHip);
  dl::DLManagedTensorVersioned* m = ravel::to_dlpack_versioned(t);
  void* p = m->dl_tensor.data;
  const dl::DLDeviceType mine = expected_type();
  const dl::DLDeviceType other = mine == dl::kDLROCM ? dl::kDLCUDA : dl::kDLROCM;
  Wrapper device1(p, {mine, 1}, {3}, {1});  // no hip:1 here
  std::string e = error_of<ravel::DeviceError>([&] { ravel::from_dlpack(&device1.managed, kHip); });
  BOOST_TEST(has(e, "device 1 memory"));
  BOOST_TEST(has(e, "no Ravel device here owns that memory"));
  Wrapper kind(p, {other, 0}, {3}, {1});
  e = error_of<ravel::DeviceError>([&] { ravel::from_dlpack(&kind.managed, kHip); });
  BOOST_TEST(has(e, mine == dl::kDLROCM ? "kDLCUDA device 0 memory" : "kDLROCM device 0 memory"));
  // Device memory onto the CPU: not copied behind the user's back; the message says how.
  Wrapper to_cpu(p, {mine, 0}, {3}, {1});
  e = error_of<ravel::DeviceError>([&] { ravel::from_dlpack(&to_cpu.managed, Device("tbb_cpu", 0)); });
  BOOST_TEST(has(e, "import it with device hip:0, then .to(tbb_cpu:0)"));
  // Host memory that claims to be device memory: the plugin checks the pointer and refuses.
  std::vector<float> host{1, 2, 3};
  Wrapper liar(host.data(), {mine, 0}, {3}, {1});
  e = error_of<ravel::DeviceError>([&] { ravel::from_dlpack(&liar.managed, kHip); });
  BOOST_TEST(has(e, "buffer_wrap"));
  BOOST_TEST(has(e, "first byte is not device memory"));
  // Device memory, but the tensor reaches far past the end of its block.
  Wrapper overrun(p, {mine, 0}, {int64_t{1} << 38}, {1});
  e = error_of<ravel::DeviceError>([&] { ravel::from_dlpack(&overrun.managed, kHip); });
  BOOST_TEST(has(e, "last byte is not device memory"));
  // Every refusal left the tensor with its owner.
  BOOST_TEST((device1.deleted == 0 && kind.deleted == 0 && to_cpu.deleted == 0 && liar.deleted == 0 &&
              overrun.deleted == 0));
  m->deleter(m);
}
