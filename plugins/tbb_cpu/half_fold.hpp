// Folding f16/bf16 values into f32 accumulators, widening them in registers (Note [Widening in
// the fold] in half_fold.cpp): the reductions of program.cpp read a half program's values as
// stored instead of an f32 copy made by a CAST pass.
#pragma once

#include <cstdint>

namespace tbbcpu {

// fold<RVL_DTYPE_F32, rop>(acc, w, n) (fold.hpp) where w is v[0, n) widened from `half_dtype`
// (RVL_DTYPE_F16 or RVL_DTYPE_BF16), bit for bit: the same lanes, tree and tail.
// rop: RVL_REDUCE_SUM, RVL_REDUCE_MAX or RVL_REDUCE_PROD.
float fold_half(int32_t rop, int32_t half_dtype, float acc, const uint16_t* v, int64_t n);

// Two independent folds at once, each bit for bit fold_half's: *acc0 over v0[0, n) and *acc1 over
// v1[0, n) (Note [Two rows per fold]): two dependency chains instead of one.
void fold_half2(int32_t rop, int32_t half_dtype, float* acc0, const uint16_t* v0, float* acc1, const uint16_t* v1,
                int64_t n);

// Whether reductions fold two rows at a time (false under RAVEL_TBB_NO_TWO_ROW_FOLD=1: the A/B
// measurement and the tests that compare both ways).
bool two_row_folds();

// acc[i] = reduce_combine<F32>(rop, acc[i], widen(v[i])) for i in [0, n) (program.cpp's
// fold_into on widened values, bit for bit).
void fold_half_into(int32_t rop, int32_t half_dtype, float* acc, const uint16_t* v, int64_t n);

}  // namespace tbbcpu
