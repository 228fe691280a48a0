// The template backend: its table and the members that are its own. Copy this folder to start
// a new backend; replace the device-specific parts (marked DEVICE).
//
// Buffers, streams, events and their live-object registry come from <ravel/host_backend.hpp>
// (rvl::host::Backend): every handle the host passes back is looked up before use (a stale or
// foreign pointer is an RVL_STATUS_INVALID_ARGUMENT error, never a crash), every byte range is
// checked, and every member runs inside rvl::guard (<ravel/backend.hpp>), so no exception
// crosses the ABI. This file adds what is particular to the backend, as Hooks: what get_info and
// probe report, the device description, and running kernels (with execute.cpp).
//
// Execution model: all work completes before the call returns (host memory is the "device"),
// so streams and events only exist to be validated; synchronise calls are no-ops. A real device
// keeps its own buffers and enqueues on the stream instead, so it writes those members itself.
#include "kernel.hpp"

#include <ravel/host_backend.hpp>

namespace tmpl {
namespace {  // nothing here is visible outside the plugin; only rvl_backend_entry is exported

// What rvl::host::Backend asks of this plugin (the full list is in <ravel/host_backend.hpp>).
// Memory comes from DefaultHooks (calloc/free); redefine allocate/deallocate to change that.
struct Hooks : rvl::host::DefaultHooks {
  static constexpr const char* name = "template";
  static constexpr const char* version = "0.1.0";
  static constexpr const char* description =
      "SDK template backend: scalar loops on the host, one thread";
  static constexpr int32_t probe_score = 1;  // below tbb_cpu: never chosen over a real backend

  static void describe_device(rvl_device_properties* out) {
    rvl::host::set_device_name(out, "Template CPU device (scalar, one thread)");
    out->compute_units = 1;
    // ABI 1.6: the rows execute.cpp implements. Its switch covers every row (a new row does not
    // compile until it does); a DEVICE lacking an op clears its bit and the host decomposes it.
    if (RVL_HAS_MEMBER(out, rvl_device_properties, ops)) out->ops = RVL_OPS_ALL;
  }

  // Validate against the ABI, with the registry's buffer lookup, then run (execute.cpp).
  // Device, stream and initialisation were checked already. DEVICE: dispatch to it instead.
  static void execute_program(const rvl_program* program);
  static void execute_contraction(const rvl_contraction* c);
};
using Host = rvl::host::Backend<Hooks>;

void Hooks::execute_program(const rvl_program* program) {
  run_program(
      rvl::validate::validate_program(program, Host::buffer_ref<rvl::validate::BufferRef>));
}

void Hooks::execute_contraction(const rvl_contraction* c) {
  run_contraction(
      rvl::validate::validate_contraction(c, Host::buffer_ref<rvl::validate::BufferRef>));
}

// The entry table: every member comes from Host, which calls the hooks above.
constexpr rvl_backend_api kTable = Host::table();

}  // namespace
}  // namespace tmpl

RVL_DEFINE_BACKEND_ENTRY(tmpl::kTable)
