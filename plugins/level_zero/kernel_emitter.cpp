#include "kernel_emitter.hpp"

#include <ravel/lowering/halves.hpp>

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

namespace rvl::l0 {

using spv::Op;
using spv::StorageClass;

namespace {
uint32_t align_of(int32_t dtype) { return uint32_t(rvl::dtype_size(dtype)); }
}  // namespace

KernelEmitter::KernelEmitter() : ops_(b_) {
  b_.capability(spv::Capability::Addresses);
  b_.capability(spv::Capability::Kernel);
  b_.capability(spv::Capability::Int64);
}

Id KernelEmitter::builtin_x(spv::BuiltIn which) {
  const Id var = b_.builtin_input(which);
  interface_.push_back(var);
  const Id v3 = b_.t_vec(b_.t_int(64), 3);
  const Id vec = b_.op(Op::OpLoad, v3, {var, uint32_t(spv::MemoryAccessMask::Aligned), 32});
  return b_.op(Op::OpCompositeExtract, b_.t_int(64), {vec, 0});
}

std::vector<Id> KernelEmitter::begin_kernel(const std::vector<int32_t>& pointer_dtypes,
                                            size_t meta_size, uint32_t local_x,
                                            uint32_t local_y) {
  const Id i64t = b_.t_int(64);
  const Id meta_t = b_.t_ptr(StorageClass::CrossWorkgroup, i64t);
  Words param_types;
  for (int32_t dt : pointer_dtypes)
    param_types.push_back(b_.t_ptr(StorageClass::CrossWorkgroup, ops_.type(dt)));
  param_types.push_back(meta_t);
  const Id fn_type = b_.t_fn(b_.t_void(), param_types);
  fn_ = b_.begin_function(b_.t_void(), fn_type);
  std::vector<Id> params;
  for (size_t i = 0; i < pointer_dtypes.size(); ++i) params.push_back(b_.param(param_types[i]));
  const Id meta_ptr = b_.param(meta_t);
  b_.name(meta_ptr, "meta");
  // The work-group size is fixed per kernel (local memory and tile loops depend on it); telling
  // the compiler lets IGC pick the SIMD width and skip the generic-size code paths.
  b_.execution_mode(fn_, spv::ExecutionMode::LocalSize, {local_x, local_y, 1});
  b_.label(b_.fresh());
  gid_ = builtin_x(spv::BuiltIn::GlobalInvocationId);
  gsize_ = builtin_x(spv::BuiltIn::GlobalSize);
  group_ = builtin_x(spv::BuiltIn::WorkgroupId);
  ngroups_ = builtin_x(spv::BuiltIn::NumWorkgroups);
  lid_ = builtin_x(spv::BuiltIn::LocalInvocationId);
  for (size_t k = 0; k < meta_size; ++k) {
    const Id p = b_.op(Op::OpInBoundsPtrAccessChain, meta_t, {meta_ptr, i64(int64_t(k))});
    meta_.push_back(b_.op(Op::OpLoad, i64t, {p, uint32_t(spv::MemoryAccessMask::Aligned), 8}));
  }
  return params;
}

Words KernelEmitter::end_kernel() {
  b_.op_void(Op::OpReturn, {});
  b_.end_function();
  b_.entry_point(fn_, kKernelName, interface_);
  b_.name(fn_, kKernelName);
  return b_.finish();
}

std::vector<Id> KernelEmitter::unflatten(Id flat, const std::vector<Id>& extents) {
  std::vector<Id> idx(extents.size());
  Id rest = flat;
  for (size_t d = extents.size(); d-- > 0;) {
    if (d == 0) {
      idx[d] = rest;  // the outermost index needs no division
      break;
    }
    idx[d] = rem(rest, extents[d]);
    rest = div(rest, extents[d]);
  }
  return idx;
}

Id KernelEmitter::load(int32_t dtype, Id base, Id addr) {
  const Id t = ops_.type(dtype);
  const Id p = b_.op(Op::OpInBoundsPtrAccessChain, b_.t_ptr(StorageClass::CrossWorkgroup, t),
                     {base, addr});
  const Id v = b_.op(Op::OpLoad, t, {p, uint32_t(spv::MemoryAccessMask::Aligned), align_of(dtype)});
  return dtype == RVL_DTYPE_BOOL ? ops_.normalize_bool(v) : v;
}

void KernelEmitter::store(int32_t dtype, Id base, Id addr, Id value) {
  const Id t = ops_.type(dtype);
  const Id p = b_.op(Op::OpInBoundsPtrAccessChain, b_.t_ptr(StorageClass::CrossWorkgroup, t),
                     {base, addr});
  b_.op_void(Op::OpStore, {p, value, uint32_t(spv::MemoryAccessMask::Aligned), align_of(dtype)});
}

Id KernelEmitter::load_masked(int32_t dtype, Id base, Id addr, Id valid) {
  const Id pred = b_.current_block(), then = b_.fresh(), merge = b_.fresh();
  b_.branch_cond(valid, then, merge);
  b_.label(then);
  const Id v = load(dtype, base, addr);
  const Id then_end = b_.current_block();
  b_.branch(merge);
  b_.label(merge);
  return b_.op(Op::OpPhi, ops_.type(dtype), {v, then_end, ops_.zero(dtype), pred});
}

std::vector<Id> KernelEmitter::loop(
    Id start, Id end, Id step, const std::vector<std::pair<Id, Id>>& carried,
    const std::function<std::vector<Id>(Id, const std::vector<Id>&)>& body) {
  const Id pre = b_.current_block(), header = b_.fresh(), body_l = b_.fresh(), exit = b_.fresh();
  const Id i64t = b_.t_int(64);
  b_.branch(header);
  b_.label(header);
  // Phi operands naming the latch are forward references, filled in once the body is emitted:
  // reserve the ids now.
  const Id i = b_.fresh();
  const Id next_i = b_.fresh();
  std::vector<Id> vals, nexts;
  for (size_t k = 0; k < carried.size(); ++k) {
    vals.push_back(b_.fresh());
    nexts.push_back(b_.fresh());
  }
  // OpPhi must come first in the block; the latch label is known only after the body, so the
  // phis are emitted with a placeholder label id reserved here and the latch branches to a
  // dedicated block with that id.
  const Id latch = b_.fresh();
  b_.op_void(Op::OpPhi, {i64t, i, start, pre, next_i, latch});
  for (size_t k = 0; k < carried.size(); ++k)
    b_.op_void(Op::OpPhi, {carried[k].first, vals[k], carried[k].second, pre, nexts[k], latch});
  b_.branch_cond(lt(i, end), body_l, exit);
  b_.label(body_l);
  const std::vector<Id> out = body(i, vals);
  b_.branch(latch);
  b_.label(latch);
  b_.op_void(Op::OpIAdd, {i64t, next_i, i, step});
  for (size_t k = 0; k < carried.size(); ++k)  // copy through a select-free identity
    b_.op_void(Op::OpCopyObject, {carried[k].first, nexts[k], out[k]});
  b_.branch(header);
  b_.label(exit);
  return vals;
}

void KernelEmitter::if_then(Id cond, const std::function<void()>& body) {
  const Id then = b_.fresh(), merge = b_.fresh();
  b_.branch_cond(cond, then, merge);
  b_.label(then);
  body();
  b_.branch(merge);
  b_.label(merge);
}

Id KernelEmitter::local_array(int32_t dtype, uint32_t n) {
  const Id arr = b_.t_array(ops_.type(dtype), n);
  return b_.global_var(b_.t_ptr(StorageClass::Workgroup, arr), StorageClass::Workgroup);
}

Id KernelEmitter::local_ptr(int32_t dtype, Id array, Id index) {
  return b_.op(Op::OpInBoundsAccessChain,
               b_.t_ptr(StorageClass::Workgroup, ops_.type(dtype)), {array, index});
}

void KernelEmitter::barrier() {
  // barrier(CLK_LOCAL_MEM_FENCE): execution and memory scope Workgroup, ordering of work-group
  // memory with sequentially consistent semantics (what OpenCL C compilers emit).
  const uint32_t sem = uint32_t(spv::MemorySemanticsMask::WorkgroupMemory) |
                       uint32_t(spv::MemorySemanticsMask::SequentiallyConsistent);
  const Id wg = b_.c_int(32, uint32_t(spv::Scope::Workgroup));
  b_.op_void(Op::OpControlBarrier, {wg, wg, b_.c_int(32, sem)});
}

Id KernelEmitter::evaluate(const std::vector<rvl_instruction>& given,
                           const std::function<Id(int32_t, int32_t)>& load_input, Id acc, int32_t as,
                           const std::vector<Id>& accs) {
  const std::vector<rvl_instruction> ins = lower::widen_halves(given.data(), int32_t(given.size()));
  std::vector<Id> v(ins.size());
  for (size_t j = 0; j < ins.size(); ++j) {
    const rvl_instruction& in = ins[j];
    const rvl::OpInfo& info = rvl::op_info(in.op);  // the validator checked op and arity
    if (in.op == RVL_OP_LOAD) {
      v[j] = load_input(in.arg, in.dtype);
    } else if (in.op == RVL_OP_CONST) {
      v[j] = ops_.constant(in);
    } else if (in.op == RVL_OP_ACC) {
      // The validator bounds a chain's ACC indices by what each list may read.
      v[j] = accs.empty() ? acc : accs.at(size_t(in.arg));
    } else {
      Id s[3] = {0, 0, 0};
      for (int k = 0; k < info.arity; ++k) s[k] = v[size_t(in.src[k])];
      // The sources' dtype decides signedness and float-ness (WHERE: its values').
      const int32_t src_dtype = ins[size_t(in.src[info.accepts == rvl::OpAccepts::Select ? 1 : 0])].dtype;
      v[j] = ops_.apply(in.op, in.dtype, src_dtype, s[0], s[1], s[2]);
    }
  }
  return ops_.cast(ins.back().dtype, as, v.back());
}

}  // namespace rvl::l0
