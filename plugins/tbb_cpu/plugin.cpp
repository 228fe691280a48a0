// The tbb_cpu backend: what is its own (info, device description, the block cache, running
// kernels) on top of the SDK's host-memory object model.
//
// Buffers, streams, events, their live-object registry and the table members come from
// <ravel/host_backend.hpp> (rvl::host::Backend): it checks every handle and byte range and runs
// each member inside rvl::guard, so no exception crosses the ABI. This file supplies Hooks.
//
// Execution model: all work completes before the call returns (the CPU is the "device"), so
// streams and events only exist to be validated; synchronise calls are no-ops.
#include "block_cache.hpp"
#include "gemm_kernels.hpp"
#include "kernel.hpp"

#include <ravel/host_backend.hpp>

#include <tbb/info.h>

#include <cstdlib>
#include <string>

namespace tbbcpu {
namespace {

// ---- hooks for rvl::host::Backend: what makes this plugin itself ---------------------------
struct Hooks : rvl::host::DefaultHooks {
  static constexpr const char* name = "tbb_cpu";
  static constexpr const char* version = "0.1.0";
  static constexpr const char* description =
      "CPU backend: block-interpreted kernel programs and packed GEMM on oneTBB";
  static constexpr int32_t probe_score = 10;  // the portable fallback: any accelerator should win

  static void describe_device(rvl_device_properties* out) {
    const int threads = tbb::info::default_concurrency();
    rvl::host::set_device_name(out, "CPU (oneTBB, " + std::to_string(threads) + " threads)");
    out->compute_units = threads;
    // Details: the GEMM micro-kernel chosen and the block cache's statistics (Note [Block cache]).
    rvl::host::set_device_arch(out, "x86-64",
                               std::string("gemm=") + gemm::isa_name() + "; " + block_cache().details());
    // ABI 1.4: LOGSUMEXP is implemented (lse_reduce.cpp). RAVEL_TBB_NO_LOGSUMEXP=1 hides it, so
    // the core's fallback (max, then sum of exp) can be tested on this device.
    const char* no_lse = std::getenv("RAVEL_TBB_NO_LOGSUMEXP");
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_ops))
      out->reduce_ops = RVL_REDUCE_OPS_BASIC | (no_lse && *no_lse && *no_lse != '0' ? 0u : 1u << RVL_REDUCE_LOGSUMEXP);
  }

  // Note [Block cache]: size classes, reuse, a cap; contents of a new buffer are unspecified.
  static void* allocate(uint64_t bytes) { return block_cache().allocate(bytes); }
  static void deallocate(void* data, uint64_t bytes) { block_cache().release(data, bytes); }
  static void on_initialize() { block_cache().set_enabled(true); }
  static void on_shutdown() { block_cache().set_enabled(false); }

  static void execute_program(const rvl_program* program);
  static void execute_contraction(const rvl_contraction* c);
};
using Host = rvl::host::Backend<Hooks>;

// The validator's view of this plugin's buffers: throws unless `b` is live.
constexpr auto buffer_ref = Host::buffer_ref<rvl::validate::BufferRef>;

void Hooks::execute_program(const rvl_program* program) {
  run_program(rvl::validate::validate_program(program, buffer_ref));
}

void Hooks::execute_contraction(const rvl_contraction* c) {
  run_contraction(rvl::validate::validate_contraction(c, buffer_ref));
}

constexpr rvl_backend_api kTable = Host::table();

}  // namespace
}  // namespace tbbcpu

RVL_DEFINE_BACKEND_ENTRY(tbbcpu::kTable)
