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

  // An instruction list at one point of the space, given the inputs' partial addresses over the
  // kept axes and the reduced axes' indices: the program's, a chain stage's or the row
  // epilogue's (ACC: `acc`, or in a chain accs[arg]).
  auto eval_list = [&](const std::vector<rvl_instruction>& code, const std::vector<ViewIndexer::Partial>& kept,
                       const std::vector<Id>& red_idx, Id acc, int32_t as, const std::vector<Id>& accs = {}) {
    std::vector<ViewIndexer::Partial> full(sig.inputs.size());
    for (size_t j = 0; j < sig.inputs.size(); ++j)
      if (!sig.inputs[j].empty) full[j] = vi.extend(j, kept[j], red_idx, sig.kept);
    return e.evaluate(code, [&](int32_t j, int32_t dt) -> Id {
      const InputSig& in = sig.inputs[size_t(j)];
      if (in.empty) return e.ops().zero(dt);
      const ViewIndexer::Partial& p = full[size_t(j)];
      return in.masked ? e.load_masked(dt, in_ptr[size_t(j)], p.addr, p.valid)
                       : e.load(dt, in_ptr[size_t(j)], p.addr);
    }, acc, as, accs);
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
      const Id v = eval_list(sig.ins, kept_partials(kidx), {}, 0, sig.out_dtype);
      e.store(sig.out_dtype, out_ptr, out_addr(kidx), v);
      return std::vector<Id>{};
    });
    return e.end_kernel();
  }

  // The chain's reductions in order (ABI 1.11, Note [Row chains on GPUs]): its stages, then the
  // program's own; one reduction without stages. Each has its accumulator (lower::Accumulator):
  // one value folded by combine(), or LOGSUMEXP's (m, s) merged by lse_merge; the serial loop,
  // the work-group tree and the store are the same code for all. A half value accumulates in
  // f32 (dt) and is rounded once to its dtype (red_dt): the output's, or acc_dtype with a row
  // epilogue or in a stage, whose value is then handed on instead of stored.
  struct Reduction {
    const std::vector<rvl_instruction>* ins;
    int32_t rop, red_dt, dt;
    lower::Accumulator A;
    Id tacc = 0;
    std::vector<std::pair<Id, Id>> init;
    std::vector<Id> scratch;  // a work-group's tree, one local array per accumulator variable
  };
  std::vector<Reduction> chain;
  auto add_reduction = [&](const std::vector<rvl_instruction>& ins, int32_t rop, int32_t red_dt) {
    Reduction R{&ins, rop, red_dt, lower::compute_dtype(red_dt), {}, 0, {}, {}};
    // What the list yields: f32 for halves; LOGSUMEXP: the values' own dtype (f32 for half
    // values, whose half-storage accumulator SPIR-V would refuse).
    const int32_t value_dt = rop == RVL_REDUCE_LOGSUMEXP ? lower::compute_dtype(ins.back().dtype) : R.dt;
    R.A = lower::accumulator(rop, R.dt, value_dt);
    R.tacc = e.ops().type(R.A.dtype);
    for (int i = 0; i < R.A.count(); ++i) R.init.push_back({R.tacc, e.ops().constant(R.A.dtype, R.A.init[i])});
    if (!sig.serial_reduce)
      for (int i = 0; i < R.A.count(); ++i) R.scratch.push_back(e.local_array(R.A.dtype, kReduceGroup));
    chain.push_back(std::move(R));
  };
  for (const lower::StageSig& st : sig.stages) add_reduction(st.ins, st.reduce_op, st.acc_dtype);
  add_reduction(sig.ins, sig.reduce_op, sig.reduced_dtype());
  const bool chained = chain.size() > 1;

  auto merge = [&](const Reduction& R, const std::vector<Id>& a, const std::vector<Id>& b) -> std::vector<Id> {
    if (!R.A.lse) return {e.ops().combine(R.rop, R.dt, a[0], b[0])};
    const auto [m, s] = e.ops().lse_merge(R.A.dtype, a[0], a[1], b[0], b[1]);
    return {m, s};
  };
  auto element = [&](const Reduction& R, Id v) {
    return R.A.lse ? std::vector<Id>{v, e.b().c_float(R.A.dtype == RVL_DTYPE_F64 ? 64 : 32, 1.0)} : std::vector<Id>{v};
  };
  auto result = [&](const Reduction& R, const std::vector<Id>& a) {
    return e.ops().cast(R.dt, R.red_dt, R.A.lse ? e.ops().lse_result(R.A.dtype, R.dt, a[0], a[1]) : a[0]);
  };
  // The reduced value as ACC reads it: rounded to its dtype (a half: its bits, widened again),
  // exactly what a two-kernel form would read back.
  auto as_acc = [&](const Reduction& R, const std::vector<Id>& a) {
    const Id r = result(R, a);
    return rvl::dtype_is_half(R.red_dt) ? e.ops().cast(R.red_dt, RVL_DTYPE_F32, r) : r;
  };
  // One item's fold of reduction R over the reduced indices first, first + step, ...: ACC in
  // its list reads accs (the earlier stages' values).
  auto fold = [&](const Reduction& R, const std::vector<ViewIndexer::Partial>& kept, Id first, Id step,
                  const std::vector<Id>& accs) {
    const int32_t value_dt = R.A.lse ? R.A.dtype : R.dt;
    return e.loop(first, e.meta(meta.n_red), step, R.init, [&](Id r, const std::vector<Id>& a) {
      return merge(R, a, element(R, eval_list(*R.ins, kept, e.unflatten(r, red_ext), 0, value_dt, accs)));
    });
  };
  // Stores the output's value(s) once the accumulator `a` holds the program's reduced value: the
  // value itself, or, with a row epilogue, the epilogue over the row's elements first,
  // first + step, .. (the items that reduced it share the walk; Note [Row epilogues on GPUs]).
  auto finish = [&](const std::vector<Id>& kidx, const std::vector<ViewIndexer::Partial>& kept,
                    const std::vector<Id>& a, Id first, Id step, std::vector<Id> accs) {
    const Reduction& R = chain.back();
    if (!sig.has_epilogue()) {
      e.store(R.red_dt, out_ptr, out_addr(kidx), result(R, a));
      return;
    }
    const Id acc = as_acc(R, a);
    if (chained) accs[0] = acc;
    e.loop(first, e.meta(meta.n_red), step, {}, [&](Id i, const auto&) {
      const std::vector<Id> ridx = e.unflatten(i, red_ext);
      const Id v = eval_list(sig.epilogue, kept, ridx, acc, sig.out_dtype, chained ? accs : std::vector<Id>{});
      e.store(sig.out_dtype, out_ptr, out_addr(kidx, ridx), v);
      return std::vector<Id>{};
    });
  };

  if (sig.serial_reduce) {  // a work-item per output, the reduced space walked in order
    e.loop(e.global_id(), e.meta(meta.n_out), e.global_size(), {}, [&](Id o, const auto&) {
      const std::vector<Id> kidx = e.unflatten(o, kept_ext);
      const std::vector<ViewIndexer::Partial> kept = kept_partials(kidx);
      std::vector<Id> accs(chain.size(), 0);  // ACC k's value once known (k >= 1: stage k - 1)
      for (size_t k = 0; k + 1 < chain.size(); ++k)
        accs[k + 1] = as_acc(chain[k], fold(chain[k], kept, e.i64(0), e.i64(1), accs));
      const std::vector<Id> acc = fold(chain.back(), kept, e.i64(0), e.i64(1), chained ? accs : std::vector<Id>{});
      finish(kidx, kept, acc, e.i64(0), e.i64(1), accs);
      return std::vector<Id>{};
    });
    return e.end_kernel();
  }
  auto load_at = [&](const Reduction& R, Id index) {
    std::vector<Id> v;
    for (Id a : R.scratch) v.push_back(e.b().op(spv::Op::OpLoad, R.tacc, {e.local_ptr(R.A.dtype, a, index)}));
    return v;
  };
  auto store_at = [&](const Reduction& R, Id index, const std::vector<Id>& v) {
    for (size_t i = 0; i < R.scratch.size(); ++i)
      e.b().op_void(spv::Op::OpStore, {e.local_ptr(R.A.dtype, R.scratch[i], index), v[i]});
  };
  const Id lid = e.local_id();
  e.loop(e.group_id(), e.meta(meta.n_out), e.num_groups(), {}, [&](Id o, const auto&) {
    const std::vector<Id> kidx = e.unflatten(o, kept_ext);
    const std::vector<ViewIndexer::Partial> kept = kept_partials(kidx);
    std::vector<Id> accs(chain.size(), 0);
    for (size_t k = 0; k < chain.size(); ++k) {
      const Reduction& R = chain[k];
      // Each work-item combines a strided slice of the reduced space...
      const std::vector<Id> acc = fold(R, kept, lid, e.i64(kReduceGroup), chained ? accs : std::vector<Id>{});
      // ...then the work-group folds the partial results in a tree. The barrier before the first
      // store keeps the previous output's readers of scratch[0] ahead of its next writers.
      e.barrier();
      store_at(R, lid, acc);
      e.barrier();
      for (uint32_t s = kReduceGroup / 2; s > 0; s /= 2) {
        e.if_then(e.lt(lid, e.i64(s)), [&] { store_at(R, lid, merge(R, load_at(R, lid), load_at(R, e.add(lid, e.i64(s))))); });
        e.barrier();
      }
      // A stage's value, and the program's with an epilogue, is read by every item (the
      // barrier at the next use of these arrays keeps the reads ahead of its writes); without
      // one, item 0 stores the value. The epilogue's walk strides like the reduction.
      if (k + 1 < chain.size())
        accs[k + 1] = as_acc(R, load_at(R, e.i64(0)));
      else if (sig.has_epilogue())
        finish(kidx, kept, load_at(R, e.i64(0)), lid, e.i64(kReduceGroup), accs);
      else
        e.if_then(e.lt(lid, e.i64(1)), [&] { finish(kidx, kept, load_at(R, e.i64(0)), 0, 0, accs); });
    }
    return std::vector<Id>{};
  });
  return e.end_kernel();
}

}  // namespace rvl::l0
