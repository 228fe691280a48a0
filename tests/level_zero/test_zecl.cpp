// The test driver itself, through the real loader (run with ZECL_STRICT=1): work runs only when
// the host waits, copy ranges and kernel pointers are checked against live allocations (at
// append and again at execution), and unset kernel arguments are refused. If zecl stopped
// doing these, the plugin tests that rely on them would silently prove less.
#include <boost/test/unit_test.hpp>

#include <level_zero/ze_api.h>

#include <cstring>
#include <vector>

#include "emitters.hpp"

namespace {

#define ZE_OK(call) BOOST_REQUIRE_EQUAL(int(call), int(ZE_RESULT_SUCCESS))

struct Fixture {
  ze_driver_handle_t driver = nullptr;
  ze_device_handle_t device = nullptr;
  ze_context_handle_t ctx = nullptr;
  ze_command_list_handle_t list = nullptr;
  ze_event_pool_handle_t pool = nullptr;
  ze_event_handle_t event = nullptr;

  Fixture() {
    ZE_OK(zeInit(0));
    uint32_t n = 1;
    ZE_OK(zeDriverGet(&n, &driver));
    n = 1;
    ZE_OK(zeDeviceGet(driver, &n, &device));
    ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ZE_OK(zeContextCreate(driver, &cd, &ctx));
    ze_command_queue_desc_t qd{};
    qd.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
    qd.mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
    ZE_OK(zeCommandListCreateImmediate(ctx, device, &qd, &list));
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, ZE_EVENT_POOL_FLAG_HOST_VISIBLE, 1};
    ZE_OK(zeEventPoolCreate(ctx, &pd, 1, &device, &pool));
    ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, 0, ZE_EVENT_SCOPE_FLAG_HOST, ZE_EVENT_SCOPE_FLAG_HOST};
    ZE_OK(zeEventCreate(pool, &ed, &event));
  }
  ~Fixture() {
    zeEventDestroy(event);
    zeEventPoolDestroy(pool);
    zeCommandListDestroy(list);
    zeContextDestroy(ctx);
  }
  float* alloc(size_t n) {
    ze_device_mem_alloc_desc_t d{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    void* p = nullptr;
    ZE_OK(zeMemAllocDevice(ctx, &d, n * sizeof(float), 64, device, &p));
    return static_cast<float*>(p);  // zecl's device memory is host-visible SVM
  }
  ze_result_t wait() {  // the host synchronisation point
    zeEventHostReset(event);
    ze_result_t r = zeCommandListAppendBarrier(list, event, 0, nullptr);
    return r != ZE_RESULT_SUCCESS ? r : zeEventHostSynchronize(event, UINT64_MAX);
  }
  // A copy kernel out[i] = in[i] from the plugin's emitter.
  ze_kernel_handle_t copy_kernel(ze_module_handle_t* module) {
    rvl::l0::ProgramSig sig;
    sig.kept = 1;
    sig.out_dtype = RVL_DTYPE_F32;
    sig.inputs = {{RVL_DTYPE_F32, false, false}};
    rvl_instruction load{};
    load.op = RVL_OP_LOAD;
    load.dtype = RVL_DTYPE_F32;
    load.src[0] = load.src[1] = load.src[2] = -1;
    sig.ins = {load};
    const std::vector<uint32_t> spirv = rvl::l0::emit_program(sig);
    ze_module_desc_t md{};
    md.stype = ZE_STRUCTURE_TYPE_MODULE_DESC;
    md.format = ZE_MODULE_FORMAT_IL_SPIRV;
    md.inputSize = spirv.size() * 4;
    md.pInputModule = reinterpret_cast<const uint8_t*>(spirv.data());
    ZE_OK(zeModuleCreate(ctx, device, &md, module, nullptr));
    ze_kernel_desc_t kd{ZE_STRUCTURE_TYPE_KERNEL_DESC, nullptr, 0, "rvl_kernel"};
    ze_kernel_handle_t k = nullptr;
    ZE_OK(zeKernelCreate(*module, &kd, &k));
    ZE_OK(zeKernelSetGroupSize(k, rvl::l0::kElementwiseGroup, 1, 1));
    return k;
  }
};

// The test cases share the fixture's anonymous namespace: in a unity build this file is not the
// main file, and GCC warns (-Wsubobject-linkage) when an outside type derives from a local one.

BOOST_FIXTURE_TEST_CASE(strict_mode_runs_work_only_when_the_host_waits, Fixture) {
  float* dst = alloc(4);
  float* src = alloc(4);
  std::memset(dst, 0, 16);
  const float v[4] = {1, 2, 3, 4};
  std::memcpy(src, v, 16);
  ZE_OK(zeCommandListAppendMemoryCopy(list, dst, src, 16, nullptr, 0, nullptr));
  BOOST_TEST(dst[3] == 0.0f);  // queued, not run: a client reading now reads stale data
  ZE_OK(wait());
  BOOST_TEST(dst[3] == 4.0f);
  ZE_OK(zeMemFree(ctx, dst));
  ZE_OK(zeMemFree(ctx, src));
}

BOOST_FIXTURE_TEST_CASE(copies_must_stay_inside_their_allocation, Fixture) {
  float* a = alloc(4);
  float* b = alloc(4);
  BOOST_TEST(zeCommandListAppendMemoryCopy(list, a + 2, b, 16, nullptr, 0, nullptr) ==
             ZE_RESULT_ERROR_INVALID_ARGUMENT);
  BOOST_TEST(zeMemFree(ctx, a + 1) == ZE_RESULT_ERROR_INVALID_ARGUMENT);  // not an allocation
  ZE_OK(zeMemFree(ctx, a));
  ZE_OK(zeMemFree(ctx, b));
}

BOOST_FIXTURE_TEST_CASE(kernel_pointers_and_arguments_are_checked, Fixture) {
  ze_module_handle_t module = nullptr;
  ze_kernel_handle_t k = copy_kernel(&module);
  float* out = alloc(64);
  float* in = alloc(64);
  float stack_value = 0;
  float* bogus = &stack_value;
  const ze_group_count_t one{1, 1, 1};
  ZE_OK(zeKernelSetArgumentValue(k, 0, sizeof(void*), &out));
  ZE_OK(zeKernelSetArgumentValue(k, 1, sizeof(void*), &in));
  // The meta argument is still unset.
  BOOST_TEST(zeCommandListAppendLaunchKernel(list, k, &one, nullptr, 0, nullptr) ==
             ZE_RESULT_ERROR_INVALID_ARGUMENT);
  ZE_OK(zeKernelSetArgumentValue(k, 2, sizeof(void*), &bogus));  // not device memory
  BOOST_TEST(zeCommandListAppendLaunchKernel(list, k, &one, nullptr, 0, nullptr) ==
             ZE_RESULT_ERROR_INVALID_ARGUMENT);

  // Freed while queued: caught when the work finally runs at the host's wait.
  int64_t* meta = reinterpret_cast<int64_t*>(alloc(16));
  const int64_t m[] = {64, 64, 1, 0, 1, 0, 1};  // extent; n_out, n_red; in (offset, stride); out
  std::memcpy(meta, m, sizeof m);
  ZE_OK(zeKernelSetArgumentValue(k, 2, sizeof(void*), &meta));
  ZE_OK(zeCommandListAppendLaunchKernel(list, k, &one, nullptr, 0, nullptr));
  ZE_OK(zeMemFree(ctx, in));
  BOOST_TEST(wait() != ZE_RESULT_SUCCESS);

  zeKernelDestroy(k);
  zeModuleDestroy(module);
  zeMemFree(ctx, out);
  zeMemFree(ctx, meta);
}

}  // namespace
