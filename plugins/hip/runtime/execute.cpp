// Running kernels: validate (SDK), look the compiled kernel up (kernels.cpp), launch on the
// stream. Launches are asynchronous; the host waits only when it reads (buffer_read) or asks to.
#include "execute.hpp"

#include "device.hpp"
#include "kernels.hpp"
#include "objects.hpp"

#include <ravel/validate.hpp>

#include <cstdlib>
#include <vector>

namespace rvl::hip {
namespace {

// The validator's view of our buffers: device addresses as opaque bases (never dereferenced on
// the host). Records which buffers the kernel uses, and rejects a buffer of another device.
struct Lookup {
  int32_t device;
  std::vector<rvl_buffer*> used;
  validate::BufferRef operator()(const rvl_buffer* b, const char* what) {
    rvl_buffer* live = live_buffer(b, what);
    if (live->device != device)
      invalid(std::string(what) + ": buffer lives on hip:" + std::to_string(live->device) +
              ", the kernel runs on hip:" + std::to_string(device));
    used.push_back(live);
    return {static_cast<std::byte*>(live->data), live->size};
  }
};

// RAVEL_HIP_SYNC=1: wait for every kernel (like CUDA_LAUNCH_BLOCKING). For timing with a host
// that does not synchronise the device after its work (ravel-bench today), and for debugging.
bool sync_each_kernel() {
  static const bool on = [] {
    const char* e = std::getenv("RAVEL_HIP_SYNC");
    return e && *e && *e != '0';
  }();
  return on;
}

void launch(const Kernel& k, hipStream_t s, std::vector<void*>& ptrs) {
  if (k.grid[0] == 0 || dry_run()) return;  // empty iteration space: nothing to do
  if (k.grid[1] > 65535 || k.grid[2] > 65535 || k.grid[0] > 0x7fffffffu)
    fail(RVL_STATUS_UNSUPPORTED, "kernel " + k.name + ": grid too large (" + k.summary + ")");
  std::vector<void*> args(ptrs.size());
  for (size_t i = 0; i < ptrs.size(); ++i) args[i] = &ptrs[i];
  check(hipModuleLaunchKernel(k.function, unsigned(k.grid[0]), unsigned(k.grid[1]),
                              unsigned(k.grid[2]), k.block[0], k.block[1], k.block[2], 0, s,
                              args.data(), nullptr),
        "launching kernel " + k.name + " (" + k.summary + ")");
  if (sync_each_kernel()) check(hipStreamSynchronize(s), "kernel " + k.name + " (" + k.summary + ")");
}

void mark_used(const std::vector<rvl_buffer*>& used, rvl_stream* s) {
  for (rvl_buffer* b : used) remember_stream(b, s);
}

}  // namespace

uint32_t reduce_ops() {
  const char* off = std::getenv("RAVEL_HIP_NO_LOGSUMEXP");
  return RVL_REDUCE_OPS_BASIC | (off && *off && *off != '0' ? 0u : 1u << RVL_REDUCE_LOGSUMEXP);
}

void launch_program(int32_t device, rvl_stream* stream, const rvl_program* program) {
  require_initialized();
  hip::device(device);
  const hipStream_t s = stream_on(stream, device, "execute_program");
  Lookup lookup{device, {}};
  const validate::Program p = validate::validate_program(program, std::ref(lookup), RVL_DTYPES_ALL, reduce_ops(), reduce_ops());
  use_device(device);
  const Kernel& k = kernel_cache().program(device, p);
  std::vector<void*> ptrs;
  for (const validate::View& v : p.inputs) ptrs.push_back(v.data);
  ptrs.push_back(p.out.data);
  launch(k, s, ptrs);
  mark_used(lookup.used, live_stream(stream, "execute_program"));
}

void launch_contraction(int32_t device, rvl_stream* stream, const rvl_contraction* c) {
  require_initialized();
  hip::device(device);
  const hipStream_t s = stream_on(stream, device, "execute_contraction");
  Lookup lookup{device, {}};
  const validate::Contraction v = validate::validate_contraction(c, std::ref(lookup), RVL_DTYPES_ALL);
  use_device(device);
  const Kernel& k = kernel_cache().contraction(device, v);
  std::vector<void*> ptrs{v.a.data, v.b.data};
  for (const validate::View& in : v.epilogue.inputs) ptrs.push_back(in.data);
  ptrs.push_back(v.epilogue.out.data);
  launch(k, s, ptrs);
  mark_used(lookup.used, live_stream(stream, "execute_contraction"));
}

}  // namespace rvl::hip
