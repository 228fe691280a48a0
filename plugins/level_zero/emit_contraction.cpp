// Contractions: a tiled GEMM. Each work-group owns one kGemmTile x kGemmTile tile of C (tiles
// of all batches are numbered and walked grid-stride); per step of kGemmTile along k it stages a
// tile of A and of B in work-group local memory (zero outside the matrices), synchronises, and
// every work-item accumulates its element of C from local memory. The epilogue (any program over
// [batch.., M, N] with ACC as the accumulator) runs on the accumulator before the only store, so
// a fused bias/activation costs no extra pass over C.
#include <ravel/backend.hpp>

#include "emitters.hpp"
#include "kernel_emitter.hpp"

#include <ravel/lowering/halves.hpp>

namespace rvl::l0 {

Words emit_contraction(const ContractionSig& sig) {
  KernelEmitter e;
  const ContractionMeta meta(sig);
  const int32_t dt = sig.dtype;
  std::vector<int32_t> ptr_dtypes{dt, dt, dt};
  for (const InputSig& in : sig.epilogue)
    if (!in.empty) ptr_dtypes.push_back(in.dtype);
  const std::vector<Id> params = e.begin_kernel(ptr_dtypes, meta.size, kGemmGroup);
  const Id pa = params[0], pb = params[1], pc = params[2];
  std::vector<Id> in_ptr(sig.epilogue.size(), 0);
  for (size_t j = 0, p = 3; j < sig.epilogue.size(); ++j)
    if (!sig.epilogue[j].empty) in_ptr[j] = params[p++];

  const int br = sig.batch_rank;
  // Half operands are widened as they are staged; tiles and the accumulator are f32 (w), and
  // C is rounded once by the epilogue's evaluation (Note [Half GEMM] in plugins/hip/codegen).
  const int32_t w = lower::compute_dtype(dt);
  const Id tval = e.ops().type(w);
  const Id as = e.local_array(w, kGemmGroup), bs = e.local_array(w, kGemmGroup);
  const Id tile = e.i64(kGemmTile);
  const Id lid = e.local_id();
  const Id tx = e.rem(lid, tile), ty = e.div(lid, tile);
  const Id M = e.meta(meta.m), N = e.meta(meta.n), K = e.meta(meta.k);
  std::vector<Id> batch_ext;
  for (int d = 0; d < br; ++d) batch_ext.push_back(e.meta(size_t(d)));

  // offset + sum over batch axes of index * stride, for the operand record at `rec`.
  auto batch_base = [&](size_t rec, const std::vector<Id>& bidx) {
    Id addr = e.meta(rec);
    for (int d = 0; d < br; ++d)
      addr = e.add(addr, e.mul(bidx[size_t(d)], e.meta(ContractionMeta::stride(rec, d))));
    return addr;
  };
  auto at = [&](size_t rec, Id base, Id row, Id col) {
    return e.add(base, e.add(e.mul(row, e.meta(ContractionMeta::stride(rec, br))),
                             e.mul(col, e.meta(ContractionMeta::stride(rec, br + 1)))));
  };

  e.loop(e.group_id(), e.meta(meta.n_tiles), e.num_groups(), {}, [&](Id t, const auto&) {
    const Id tn = e.rem(t, e.meta(meta.tiles_n));
    const Id rest = e.div(t, e.meta(meta.tiles_n));
    const Id tm = e.rem(rest, e.meta(meta.tiles_m));
    const std::vector<Id> bidx = e.unflatten(e.div(rest, e.meta(meta.tiles_m)), batch_ext);
    const Id m = e.add(e.mul(tm, tile), ty), n = e.add(e.mul(tn, tile), tx);
    const Id m_ok = e.lt(m, M), n_ok = e.lt(n, N);
    const Id a_base = batch_base(meta.a, bidx), b_base = batch_base(meta.b, bidx);
    const Id slot = e.local_ptr(w, as, lid), slot_b = e.local_ptr(w, bs, lid);

    const std::vector<Id> acc = e.loop(
        e.i64(0), K, tile, {{tval, e.ops().zero(w)}}, [&](Id k0, const std::vector<Id>& a) {
          const Id ka = e.add(k0, tx), kb = e.add(k0, ty);
          const Id va = e.ops().cast(dt, w, e.load_masked(dt, pa, at(meta.a, a_base, m, ka), e.land(m_ok, e.lt(ka, K))));
          const Id vb = e.ops().cast(dt, w, e.load_masked(dt, pb, at(meta.b, b_base, kb, n), e.land(e.lt(kb, K), n_ok)));
          e.b().op_void(spv::Op::OpStore, {slot, va});
          e.b().op_void(spv::Op::OpStore, {slot_b, vb});
          e.barrier();
          Id sum = a[0];
          for (int kk = 0; kk < kGemmTile; ++kk) {  // unrolled: constant local addresses
            const Id x = e.b().op(spv::Op::OpLoad, tval,
                                  {e.local_ptr(w, as, e.add(e.mul(ty, tile), e.i64(kk)))});
            const Id y = e.b().op(spv::Op::OpLoad, tval,
                                  {e.local_ptr(w, bs, e.add(e.i64(kk * kGemmTile), tx))});
            sum = e.ops().apply(RVL_OP_ADD, w, w, sum, e.ops().apply(RVL_OP_MUL, w, w, x, y, 0), 0);
          }
          e.barrier();
          return std::vector<Id>{sum};
        });

    e.if_then(e.land(m_ok, n_ok), [&] {
      const Id v = e.evaluate(sig.ins, [&](int32_t j, int32_t in_dt) -> Id {
        const InputSig& in = sig.epilogue[size_t(j)];
        if (in.empty) return e.ops().zero(in_dt);
        const size_t rec = meta.input[size_t(j)];
        const Id addr = at(rec, batch_base(rec, bidx), m, n);
        if (!in.masked) return e.load(in_dt, in_ptr[size_t(j)], addr);
        std::vector<Id> idx = bidx;
        idx.push_back(m);
        idx.push_back(n);
        Id valid = 0;
        for (int d = 0; d < br + 2; ++d) {
          const Id ok = e.land(e.le(e.meta(meta.lo(rec, d)), idx[size_t(d)]),
                               e.lt(idx[size_t(d)], e.meta(meta.hi(rec, d))));
          valid = valid ? e.land(valid, ok) : ok;
        }
        return e.load_masked(in_dt, in_ptr[size_t(j)], addr, valid);
      }, acc[0], dt);
      e.store(dt, pc, at(meta.c, batch_base(meta.c, bidx), m, n), v);
    });
    return std::vector<Id>{};
  });
  return e.end_kernel();
}

}  // namespace rvl::l0
