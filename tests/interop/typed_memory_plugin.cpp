// A test backend whose device states a DLPack memory type the core has never heard of as a
// backend: "vgpu", a GPU-kind device whose buffers it reports (ABI 1.3) as kDLVulkan, device 5.
// Its memory is host memory underneath (ravel/host_backend.hpp), so the test can look at it;
// what matters is that the core learns the type only from device_properties: a new backend
// needs no change in the core. It runs no kernels (the test needs none).
#include <ravel/host_backend.hpp>

namespace {

struct Hooks : rvl::host::DefaultHooks {
  static constexpr const char* name = "vgpu";
  static constexpr const char* version = "0.1.0";
  static constexpr const char* description = "test backend: buffers reported as DLPack kDLVulkan memory";
  static constexpr int32_t probe_score = 1;  // never the default device

  static void describe_device(rvl_device_properties* out) {
    rvl::host::set_device_name(out, "DLPack-typed test device");
    out->kind = RVL_DEVICE_GPU;
    if (RVL_HAS_MEMBER(out, rvl_device_properties, dlpack_device_id)) {
      out->dlpack_device_type = 7;  // kDLVulkan
      out->dlpack_device_id = 5;
    }
  }
  static void execute_program(const rvl_program*) { rvl::fail(RVL_STATUS_UNSUPPORTED, "vgpu runs no kernels"); }
  static void execute_contraction(const rvl_contraction*) {
    rvl::fail(RVL_STATUS_UNSUPPORTED, "vgpu runs no kernels");
  }
};

constexpr rvl_backend_api kTable = rvl::host::Backend<Hooks>::table();

}  // namespace

RVL_DEFINE_BACKEND_ENTRY(kTable)
