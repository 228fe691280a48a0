// DLPack on the Level Zero backend, through the core, on the zecl test driver in strict mode
// (queued work runs only when the host synchronises): an export is the buffer's USM pointer as
// kDLOneAPI, taken after the device finished writing it; an import of that memory on
// level_zero:0 wraps the very same pointer with its strides, values and lifetimes. The error
// paths: USM memory of another context (zeMemGetAllocProperties says so), host memory, another
// device or kind of memory, and a tensor reaching past its allocation.
#include <boost/test/unit_test.hpp>

#include <level_zero/ze_api.h>

#include <string>
#include <vector>

#include "ravel/dlpack.hpp"
#include "ravel/ravel.hpp"

using ravel::Device;
using ravel::Tensor;
namespace dl = ravel::dlpack;

namespace {

const Device kGpu("level_zero", 0);

struct DefaultRuntime {
  DefaultRuntime() {
    ravel::RuntimeOptions o;
    o.use_environment = false;
    ravel::Runtime::reset(o);
  }
};
BOOST_GLOBAL_FIXTURE(DefaultRuntime);

// A managed tensor of our own over someone else's memory, counting its deleter's calls (and
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
                         strides.data(), 0};
  }
};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::string device_error(dl::DLManagedTensorVersioned* m, const Device& target) {
  try {
    ravel::from_dlpack(m, target);
  } catch (const ravel::DeviceError& e) {
    return e.what();
  }
  BOOST_FAIL("no DeviceError was raised");
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(export_is_the_usm_pointer_after_the_device_finished) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, kGpu);
  const Tensor y = x * 2.0f + 1.0f;  // a kernel, queued: zecl runs it only at a host wait
  dl::DLManagedTensorVersioned* m = ravel::to_dlpack_versioned(y);
  const dl::DLTensor& d = m->dl_tensor;
  BOOST_TEST(d.device.device_type == dl::kDLOneAPI);
  BOOST_TEST(d.device.device_id == 0);
  BOOST_TEST(m->flags == dl::kFlagReadOnly);
  BOOST_TEST_REQUIRE(d.ndim == 2);
  BOOST_TEST((d.shape[0] == 2 && d.shape[1] == 3 && d.strides[0] == 3 && d.strides[1] == 1));
  // zecl's USM is host-visible: read what a consumer would, with no wait of its own.
  const auto* f = static_cast<const float*>(d.data);
  BOOST_TEST(std::vector<float>(f, f + 6) == (std::vector<float>{3, 5, 7, 9, 11, 13}));
  m->deleter(m);
}

BOOST_AUTO_TEST_CASE(round_trip_shares_the_pointer_with_strides_and_lifetimes) {
  dl::DLManagedTensorVersioned* m;
  {
    const Tensor base = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4}, kGpu);
    m = ravel::to_dlpack_versioned(base.transpose());  // 4 x 3, strides (1, 4)
  }
  const auto* f = static_cast<const float*>(m->dl_tensor.data);  // outlives every Ravel tensor
  BOOST_TEST((f[0] == 0.f && f[5] == 5.f && f[11] == 11.f));
  Wrapper w(m->dl_tensor.data, m->dl_tensor.device, {4, 3}, {1, 4}, m);
  Tensor t = ravel::from_dlpack(&w.managed, kGpu);
  BOOST_TEST(t.strides() == (std::vector<int64_t>{1, 4}));
  dl::DLManagedTensor* again = ravel::to_dlpack(t);
  BOOST_TEST(again->dl_tensor.data == static_cast<const void*>(f));  // the same memory, not a copy
  again->deleter(again);
  BOOST_TEST(t.to_vector<float>() == (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  Tensor col = t.sum(0);
  t = Tensor();
  BOOST_TEST(w.deleted == 0);  // `col` is not realized yet: it still reads the memory
  BOOST_TEST(col.to_vector<float>() == (std::vector<float>{6, 22, 38}));
  col = Tensor();
  BOOST_TEST(w.deleted == 1);  // given back exactly once
}

BOOST_AUTO_TEST_CASE(foreign_memory_is_refused_with_the_reason_and_kept_by_its_owner) {
  // USM device memory of a context of our own: the plugin's context does not know it.
  BOOST_REQUIRE(zeInit(0) == ZE_RESULT_SUCCESS);
  uint32_t n = 1;
  ze_driver_handle_t driver = nullptr;
  BOOST_REQUIRE(zeDriverGet(&n, &driver) == ZE_RESULT_SUCCESS);
  ze_device_handle_t device = nullptr;
  n = 1;
  BOOST_REQUIRE(zeDeviceGet(driver, &n, &device) == ZE_RESULT_SUCCESS);
  ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
  ze_context_handle_t ctx = nullptr;
  BOOST_REQUIRE(zeContextCreate(driver, &cd, &ctx) == ZE_RESULT_SUCCESS);
  ze_device_mem_alloc_desc_t md{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
  void* other = nullptr;
  BOOST_REQUIRE(zeMemAllocDevice(ctx, &md, 64, 64, device, &other) == ZE_RESULT_SUCCESS);
  Wrapper foreign(other, {dl::kDLOneAPI, 0}, {4}, {1});
  std::string e = device_error(&foreign.managed, kGpu);
  BOOST_TEST(has(e, "buffer_wrap"));
  BOOST_TEST(has(e, "not a USM allocation of this plugin's Level Zero context"));
  std::vector<float> host(4);
  Wrapper liar(host.data(), {dl::kDLOneAPI, 0}, {4}, {1});
  BOOST_TEST(has(device_error(&liar.managed, kGpu), "not a USM allocation of this plugin's Level Zero context"));

  const Tensor t = Tensor::from_vector<float>({1, 2, 3, 4}, {4}, kGpu);
  dl::DLManagedTensorVersioned* m = ravel::to_dlpack_versioned(t);
  Wrapper overrun(m->dl_tensor.data, {dl::kDLOneAPI, 0}, {1 << 20}, {1});
  BOOST_TEST(has(device_error(&overrun.managed, kGpu), "run past the end of their allocation"));
  Wrapper device3(m->dl_tensor.data, {dl::kDLOneAPI, 3}, {4}, {1});
  BOOST_TEST(has(device_error(&device3.managed, kGpu), "no Ravel device here owns that memory"));
  Wrapper cuda(m->dl_tensor.data, {dl::kDLCUDA, 0}, {4}, {1});
  BOOST_TEST(has(device_error(&cuda.managed, kGpu), "kDLCUDA device 0 memory"));
  Wrapper to_cpu(m->dl_tensor.data, {dl::kDLOneAPI, 0}, {4}, {1});
  BOOST_TEST(has(device_error(&to_cpu.managed, Device("tbb_cpu", 0)),
                 "import it with device level_zero:0, then .to(tbb_cpu:0)"));
  BOOST_TEST((foreign.deleted == 0 && liar.deleted == 0 && overrun.deleted == 0 && device3.deleted == 0 &&
              cuda.deleted == 0 && to_cpu.deleted == 0));
  m->deleter(m);
  zeMemFree(ctx, other);
  zeContextDestroy(ctx);
}
