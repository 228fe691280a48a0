// Programs: element-wise kernels (one work-item per element, grid-stride loop) and reductions
// (one work-group per output, work-items stride over the reduced space, then a tree in
// work-group local memory with barriers; or one work-item per output). A reduction with a row
// epilogue (ABI 1.10) does not store its value: the items that made it walk the output's row
// again and store the epilogue there (Note [Row epilogues on GPUs] in
// sdk/lowering/src/c_row_epilogue.cpp; the same plan as HIP's and OpenCL's, in SPIR-V).
#include <ravel/backend.hpp>

#include "emitters.hpp"
#include "kernel_emitter.hpp"

#include <ravel/lowering/halves.hpp>

namespace rvl::l0 {

namespace {

// Address and validity of every input at an index split into kept and reduced parts. Partial
// sums over the kept axes are computed once per output (`kept`), the rest per element.
struct ViewIndexer {
  KernelEmitter& e;
  const ProgramSig& sig;
  const ProgramMeta& meta;

  struct Partial {
    Id addr = 0;   // offset + sum over the axes seen so far
    Id valid = 0;  // OpTypeBool over those axes, 0 if not masked
  };

  Partial extend(size_t input, Partial p, const std::vector<Id>& idx, int first_axis) {
    const size_t rec = meta.input[input];
    const InputSig& in = sig.inputs[input];
    Id addr = p.addr ? p.addr : e.meta(ProgramMeta::offset(rec));
    Id valid = p.valid;
    for (size_t k = 0; k < idx.size(); ++k) {
      const int axis = first_axis + int(k);
      addr = e.add(addr, e.mul(idx[k], e.meta(ProgramMeta::stride(rec, axis))));
      if (!in.masked) continue;
      const Id ok = e.land(e.le(e.meta(meta.lo(rec, axis)), idx[k]),
                           e.lt(idx[k], e.meta(meta.hi(rec, axis))));
      valid = valid ? e.land(valid, ok) : ok;
    }
    return {addr, valid};
  }
};

}  // namespace

Words emit_program(const ProgramSig& sig) {
  KernelEmitter e;
  const ProgramMeta meta(sig);
  std::vector<int32_t> ptr_dtypes{sig.out_dtype};
  for (const InputSig& in : sig.inputs)
    if (!in.empty) ptr_dtypes.push_back(in.dtype);
  const bool reduce = sig.reduce_op != RVL_REDUCE_NONE;
  const bool group_reduce = reduce && !sig.serial_reduce;
  const std::vector<Id> params =
      e.begin_kernel(ptr_dtypes, meta.size, group_reduce ? kReduceGroup : kElementwiseGroup);
  const Id out_ptr = params[0];
  std::vector<Id> in_ptr(sig.inputs.size(), 0);
  for (size_t j = 0, p = 1; j < sig.inputs.size(); ++j)
    if (!sig.inputs[j].empty) in_ptr[j] = params[p++];

  std::vector<Id> kept_ext, red_ext;
  for (int d = 0; d < sig.kept; ++d) kept_ext.push_back(e.meta(meta.extent(d)));
  for (int d = 0; d < sig.reduced; ++d) red_ext.push_back(e.meta(meta.extent(sig.kept + d)));
  ViewIndexer vi{e, sig, meta};

  // The reduced value's dtype: the output's, or acc_dtype with a row epilogue.
  const int32_t red_dt = sig.reduced_dtype();
  // The value the program yields: elementwise, the output's dtype; a reduction, what it
  // accumulates (f32 for halves; LOGSUMEXP: the values' own dtype, lower::accumulator, and f32
  // for half values, which had made a half-storage accumulator SPIR-V refuses).
  const int32_t value_dt = !reduce ? sig.out_dtype
                           : sig.reduce_op == RVL_REDUCE_LOGSUMEXP ? lower::compute_dtype(sig.ins.back().dtype)
                                                                   : lower::compute_dtype(red_dt);
  // An instruction list at one point of the space, given the inputs' partial addresses over the
  // kept axes and the reduced axes' indices: the program's (ACC unused) or its row epilogue's.
  auto eval_list = [&](const std::vector<rvl_instruction>& code, const std::vector<ViewIndexer::Partial>& kept,
                       const std::vector<Id>& red_idx, Id acc, int32_t as) {
    std::vector<ViewIndexer::Partial> full(sig.inputs.size());
    for (size_t j = 0; j < sig.inputs.size(); ++j)
      if (!sig.inputs[j].empty) full[j] = vi.extend(j, kept[j], red_idx, sig.kept);
    return e.evaluate(code, [&](int32_t j, int32_t dt) -> Id {
      const InputSig& in = sig.inputs[size_t(j)];
      if (in.empty) return e.ops().zero(dt);
      const ViewIndexer::Partial& p = full[size_t(j)];
      return in.masked ? e.load_masked(dt, in_ptr[size_t(j)], p.addr, p.valid)
                       : e.load(dt, in_ptr[size_t(j)], p.addr);
    }, acc, as);
  };
  auto eval_at = [&](const std::vector<ViewIndexer::Partial>& kept, const std::vector<Id>& red_idx) {
    return eval_list(sig.ins, kept, red_idx, 0, value_dt);
  };
  auto kept_partials = [&](const std::vector<Id>& kidx) {
    std::vector<ViewIndexer::Partial> kept(sig.inputs.size());
    for (size_t j = 0; j < sig.inputs.size(); ++j)
      if (!sig.inputs[j].empty) kept[j] = vi.extend(j, {}, kidx, 0);
    return kept;
  };
  // The output's address at the kept indices, then (a row epilogue's output) the reduced ones.
  auto out_addr = [&](const std::vector<Id>& kidx, const std::vector<Id>& ridx = {}) {
    Id addr = e.meta(ProgramMeta::offset(meta.output));
    for (size_t k = 0; k < kidx.size(); ++k)
      addr = e.add(addr, e.mul(kidx[k], e.meta(ProgramMeta::stride(meta.output, int(k)))));
    for (size_t k = 0; k < ridx.size(); ++k)
      addr = e.add(addr, e.mul(ridx[k], e.meta(ProgramMeta::stride(meta.output, sig.kept + int(k)))));
    return addr;
  };

  if (!reduce) {
    e.loop(e.global_id(), e.meta(meta.n_out), e.global_size(), {}, [&](Id i, const auto&) {
      const std::vector<Id> kidx = e.unflatten(i, kept_ext);
      const Id v = eval_at(kept_partials(kidx), {});
      e.store(sig.out_dtype, out_ptr, out_addr(kidx), v);
      return std::vector<Id>{};
    });
    return e.end_kernel();
  }

  // The accumulator (lower::Accumulator): one value folded by combine(), or LOGSUMEXP's (m, s)
  // merged by lse_merge. The serial loop, the work-group tree and the store are the same code.
  // A half output accumulates in f32 (dt) and is rounded once when stored (out_dt); with a row
  // epilogue, the reduced value is rounded to acc_dtype instead and handed to the epilogue.
  const int32_t dt = lower::compute_dtype(red_dt), out_dt = red_dt;
  const lower::Accumulator A = lower::accumulator(sig.reduce_op, dt, value_dt);
  const bool lse = A.lse;
  const int32_t adt = A.dtype;
  const Id tacc = e.ops().type(adt);
  std::vector<std::pair<Id, Id>> init;
  for (int i = 0; i < A.count(); ++i) init.push_back({tacc, e.ops().constant(adt, A.init[i])});
  auto merge = [&](const std::vector<Id>& a, const std::vector<Id>& b) -> std::vector<Id> {
    if (!lse) return {e.ops().combine(sig.reduce_op, dt, a[0], b[0])};
    const auto [m, s] = e.ops().lse_merge(adt, a[0], a[1], b[0], b[1]);
    return {m, s};
  };
  auto element = [&](Id v) {
    return lse ? std::vector<Id>{v, e.b().c_float(adt == RVL_DTYPE_F64 ? 64 : 32, 1.0)} : std::vector<Id>{v};
  };
  auto result = [&](const std::vector<Id>& a) {
    return e.ops().cast(dt, out_dt, lse ? e.ops().lse_result(adt, dt, a[0], a[1]) : a[0]);
  };
  // Stores the output's value(s) once the accumulator `a` holds the reduced value: the value
  // itself, or, with a row epilogue, the epilogue over the row's elements first, first + step, ..
  // (the items that reduced it share the walk). ACC is the value rounded to acc_dtype (a half:
  // its bits, widened again), exactly what the two-kernel form would read back.
  auto finish = [&](const std::vector<Id>& kidx, const std::vector<ViewIndexer::Partial>& kept,
                    const std::vector<Id>& a, Id first, Id step) {
    if (!sig.has_epilogue()) {
      e.store(out_dt, out_ptr, out_addr(kidx), result(a));
      return;
    }
    const Id r = result(a);
    const Id acc = rvl::dtype_is_half(red_dt) ? e.ops().cast(red_dt, RVL_DTYPE_F32, r) : r;
    e.loop(first, e.meta(meta.n_red), step, {}, [&](Id i, const auto&) {
      const std::vector<Id> ridx = e.unflatten(i, red_ext);
      const Id v = eval_list(sig.epilogue, kept, ridx, acc, sig.out_dtype);
      e.store(sig.out_dtype, out_ptr, out_addr(kidx, ridx), v);
      return std::vector<Id>{};
    });
  };

  if (sig.serial_reduce) {  // a work-item per output, the reduced space walked in order
    e.loop(e.global_id(), e.meta(meta.n_out), e.global_size(), {}, [&](Id o, const auto&) {
      const std::vector<Id> kidx = e.unflatten(o, kept_ext);
      const std::vector<ViewIndexer::Partial> kept = kept_partials(kidx);
      const std::vector<Id> acc = e.loop(e.i64(0), e.meta(meta.n_red), e.i64(1), init,
                                         [&](Id r, const std::vector<Id>& a) {
                                           return merge(a, element(eval_at(kept, e.unflatten(r, red_ext))));
                                         });
      finish(kidx, kept, acc, e.i64(0), e.i64(1));
      return std::vector<Id>{};
    });
    return e.end_kernel();
  }
  std::vector<Id> scratch;
  for (size_t i = 0; i < init.size(); ++i) scratch.push_back(e.local_array(adt, kReduceGroup));
  auto load_at = [&](Id index) {
    std::vector<Id> v;
    for (Id a : scratch) v.push_back(e.b().op(spv::Op::OpLoad, tacc, {e.local_ptr(adt, a, index)}));
    return v;
  };
  auto store_at = [&](Id index, const std::vector<Id>& v) {
    for (size_t i = 0; i < scratch.size(); ++i)
      e.b().op_void(spv::Op::OpStore, {e.local_ptr(adt, scratch[i], index), v[i]});
  };
  const Id lid = e.local_id();
  e.loop(e.group_id(), e.meta(meta.n_out), e.num_groups(), {}, [&](Id o, const auto&) {
    const std::vector<Id> kidx = e.unflatten(o, kept_ext);
    const std::vector<ViewIndexer::Partial> kept = kept_partials(kidx);
    // Each work-item combines a strided slice of the reduced space...
    const std::vector<Id> acc = e.loop(lid, e.meta(meta.n_red), e.i64(kReduceGroup), init,
                                       [&](Id r, const std::vector<Id>& a) {
                                         return merge(a, element(eval_at(kept, e.unflatten(r, red_ext))));
                                       });
    // ...then the work-group folds the partial results in a tree. The barrier before the first
    // store keeps the previous output's readers of scratch[0] ahead of its next writers.
    e.barrier();
    store_at(lid, acc);
    e.barrier();
    for (uint32_t s = kReduceGroup / 2; s > 0; s /= 2) {
      e.if_then(e.lt(lid, e.i64(s)), [&] { store_at(lid, merge(load_at(lid), load_at(e.add(lid, e.i64(s))))); });
      e.barrier();
    }
    // Without an epilogue item 0 stores the value; with one, every item reads it (the barrier
    // at the next output's start keeps these reads ahead of the next writes) and walks a
    // strided slice of the row, as in the reduction.
    if (sig.has_epilogue())
      finish(kidx, kept, load_at(e.i64(0)), lid, e.i64(kReduceGroup));
    else
      e.if_then(e.lt(lid, e.i64(1)), [&] { finish(kidx, kept, load_at(e.i64(0)), 0, 0); });
    return std::vector<Id>{};
  });
  return e.end_kernel();
}

}  // namespace rvl::l0
