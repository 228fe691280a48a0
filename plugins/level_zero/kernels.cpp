#include "kernels.hpp"

#include <ravel/backend.hpp>
#include <ravel/validate.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "emitters.hpp"
#include "registry.hpp"

namespace rvl::l0 {

namespace {

constexpr int64_t kMaxGroups = 1 << 16;  // kernels walk their space grid-stride beyond this

// Buffers of the kernel's device only: another device's memory is not addressable here.
rvl::validate::BufferLookup lookup_on(DeviceState& dev) {
  return [&dev](const rvl_buffer* b, const char* what) {
    rvl_buffer* live = lookup_buffer(b, what);
    if (live->dev != &dev)
      invalid(std::string(what) + ": the buffer lives on level_zero device " +
              std::to_string(live->dev->dev.index) + ", the kernel runs on device " +
              std::to_string(dev.dev.index));
    return rvl::validate::BufferRef{static_cast<std::byte*>(live->ptr), live->size};
  };
}

// Many Intel GPUs (Arc/DG2, Xe-LP) have no fp64: such kernels are refused, never emulated or
// silently computed in f32. The message names the dtype so the core can raise a DTypeError.
void require_dtype(const Device& dev, bool uses_f64) {
  if (uses_f64 && !dev.fp64)
    fail(RVL_STATUS_UNSUPPORTED, "dtype f64 is not supported by level_zero device " +
                                     std::to_string(dev.index) + " (" + dev.name +
                                     "): it has no fp64 units; use f32");
}

bool any_f64(const std::vector<rvl_instruction>& ins, const std::vector<InputSig>& inputs,
             int32_t out) {
  bool f = out == RVL_DTYPE_F64;
  for (const rvl_instruction& i : ins) f |= i.dtype == RVL_DTYPE_F64;
  for (const InputSig& s : inputs) f |= s.dtype == RVL_DTYPE_F64;
  return f;
}

void launch(rvl_stream& s, CompiledKernel& k, const std::vector<void*>& pointers,
            const std::vector<int64_t>& meta, int64_t groups) {
  const ZeApi& ze = s.dev.ze;
  std::lock_guard<std::recursive_mutex> stream_lock(s.mu);
  void* meta_dev = s.upload(meta.data(), meta.size() * sizeof(int64_t));
  std::lock_guard<std::mutex> kernel_lock(k.launch_mu);
  uint32_t arg = 0;
  for (void* p : pointers)
    ze_check(ze.zeKernelSetArgumentValue(k.kernel, arg++, sizeof(void*), &p),
             "zeKernelSetArgumentValue");
  ze_check(ze.zeKernelSetArgumentValue(k.kernel, arg, sizeof(void*), &meta_dev),
           "zeKernelSetArgumentValue (meta)");
  const ze_group_count_t count{uint32_t(std::min(groups, kMaxGroups)), 1, 1};
  s.enqueue([&] {
    return ze.zeCommandListAppendLaunchKernel(s.list, k.kernel, &count, nullptr, 0, nullptr);
  }, "zeCommandListAppendLaunchKernel");
}

}  // namespace

uint32_t reduce_ops() {
  const char* off = std::getenv("RAVEL_L0_NO_LOGSUMEXP");
  return RVL_REDUCE_OPS_BASIC | (off && *off && *off != '0' ? 0u : 1u << RVL_REDUCE_LOGSUMEXP);
}

void execute_program(int32_t device, rvl_stream* stream, const rvl_program* p) {
  DeviceState& dev = device_state(device);
  rvl_stream& s = resolve_stream(stream, &dev, "execute_program");
  const rvl::validate::Program prog =
      rvl::validate::validate_program(p, lookup_on(dev), RVL_DTYPES_ALL, reduce_ops(), reduce_ops());
  ProgramLaunch L = plan_program(prog);
  // A row epilogue's list and its ACC (the widening LOGSUMEXP's f64), and a chain's stages,
  // count too.
  bool f64 = any_f64(L.sig.ins, L.sig.inputs, L.sig.out_dtype) || any_f64(L.sig.epilogue, {}, L.sig.acc_dtype);
  for (const lower::StageSig& st : L.sig.stages) f64 |= any_f64(st.ins, {}, st.acc_dtype);
  require_dtype(dev.dev, f64);
  if (L.n_out == 0) return;  // nothing is stored
  const bool group_reduce = L.sig.reduce_op != RVL_REDUCE_NONE && !L.sig.serial_reduce;
  const uint32_t group = group_reduce ? kReduceGroup : kElementwiseGroup;
  CompiledKernel& k =
      dev.modules.get(L.sig.key(), group, [&] { return emit_program(L.sig); });
  std::vector<void*> ptrs{L.out};
  for (std::byte* in : L.inputs) ptrs.push_back(in);
  const int64_t groups = group_reduce ? L.n_out : (L.n_out + group - 1) / group;
  launch(s, k, ptrs, L.meta, groups);
}

void execute_contraction(int32_t device, rvl_stream* stream, const rvl_contraction* c) {
  DeviceState& dev = device_state(device);
  rvl_stream& s = resolve_stream(stream, &dev, "execute_contraction");
  const rvl::validate::Contraction con = rvl::validate::validate_contraction(c, lookup_on(dev), RVL_DTYPES_ALL);
  ContractionLaunch L = plan_contraction(con);
  require_dtype(dev.dev, any_f64(L.sig.ins, L.sig.epilogue, L.sig.dtype));
  if (L.n_tiles == 0) return;
  CompiledKernel& k =
      dev.modules.get(L.sig.key(), kGemmGroup, [&] { return emit_contraction(L.sig); });
  std::vector<void*> ptrs{L.a, L.b, L.c};
  for (std::byte* in : L.inputs) ptrs.push_back(in);
  launch(s, k, ptrs, L.meta, L.n_tiles);
}

}  // namespace rvl::l0
