// Note [Casts folded into their readers]
// A bf16 program runs in f32 (Note [Halves in f32]): each bf16 LOAD is followed by a CAST to
// f32 and the output is a final CAST to bf16, each a pass of its own over the block. `exp(a) *
// b + c` in bf16 made 8 passes where its f32 twin makes 4, and ran at 1.5x the f32 speed with
// half the bytes (docs/performance.md §11). So the evaluator folds them (half_fused.cpp,
// plan_half_folds): a widening CAST whose readers are all f32 ops with one or two operands
// hands them the bf16 values, which they widen as they read them, and an f32 op read only by
// the final narrowing CAST writes the rounded bf16 values itself. The loops below are those
// ops with each operand read as bf16 or f32 and the result written as f32 or bf16, in each
// instruction-set tier (Note [Array loops per ISA]). Widening is exact and the rounding is
// half_convert.cpp's, so each element gets the same bits as the unfused passes (tests:
// tbb_array_tiers). f16 keeps its passes here (its conversions are F16C instructions, not integer
// arithmetic that vectorises inside any loop); a whole half program that fits runs as one fused
// loop instead (Note [Half programs as one fused loop], half_chunk.hpp), and these loops serve
// the blocks that one leaves to the passes and the programs it does not take.
#pragma once

#include <cstdint>

namespace tbbcpu {

// dst[i] = op(a[i], b[i]) with a (widen_a), b (widen_b) read as bf16 and dst (narrow) written as
// bf16, the rest f32; b is ignored by one-operand ops. NULL where no such loop exists (an op
// that is not an f32 op with one or two operands, widen_b on a one-operand op, or nothing to
// fold).
using HalfFusedFn = void (*)(void* dst, const void* a, const void* b, int64_t n);
HalfFusedFn bf16_fused_kernel(int32_t op, bool widen_a, bool widen_b, bool narrow);
HalfFusedFn bf16_fused_kernel_at(int tier, int32_t op, bool widen_a, bool widen_b, bool narrow);

}  // namespace tbbcpu
