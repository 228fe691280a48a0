// The cache-blocked float GEMM of contraction.cpp (F32/F64), Note [Blocked GEMM] in
// gemm_blocked.cpp.
#pragma once

#include "evaluator.hpp"

namespace tbbcpu {

// C = epilogue(A @ B) for a validated F32 or F64 contraction.
template <int DT>
void gemm_blocked(const Contraction& c, const Evaluator& ep);
// The same for an f16/bf16 contraction (c.dtype): A and B are read as halves and widened while
// packing (Note [Half panels] in gemm_pack.hpp), accumulation in f32; `ep` computes in f32 from
// f32 ACC values (the f32 rewrite of Note [Halves in f32]) and rounds what it stores.
void gemm_blocked_half(const Contraction& c, const Evaluator& ep);

// Whether gemm_blocked runs a contraction of `work` multiply-adds (batches x M x N x K) on oneTBB
// (otherwise serially on the calling thread, where gemm_small may take it instead).
bool gemm_blocked_parallel(int64_t work);

// Element offsets of batch entry `batch` (row-major over c.batch_shape) in A, B and the output,
// shared by the blocked and the small paths. Unsigned arithmetic: validated views keep every
// address in range, and negative strides wrap back into it.
inline void gemm_batch_offsets(const Contraction& c, int64_t batch, int64_t& oa, int64_t& ob,
                               int64_t& oc) {
  auto term = [](int64_t i, int64_t stride) {
    return static_cast<uint64_t>(i) * static_cast<uint64_t>(stride);
  };
  uint64_t a = static_cast<uint64_t>(c.a.offset), b = static_cast<uint64_t>(c.b.offset),
           o = static_cast<uint64_t>(c.epilogue.out.offset);
  for (int64_t d = c.batch_rank - 1, rest = batch; d >= 0; --d) {
    const int64_t i = rest % c.batch_shape[d];
    rest /= c.batch_shape[d];
    a += term(i, c.a.stride[d]);
    b += term(i, c.b.stride[d]);
    o += term(i, c.epilogue.out.stride[d]);
  }
  oa = static_cast<int64_t>(a), ob = static_cast<int64_t>(b), oc = static_cast<int64_t>(o);
}

}  // namespace tbbcpu
