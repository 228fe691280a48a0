// The row-uniform values of a row chain (row_chain.cpp) computed by a scalar loop instead of an
// Evaluator: Note [Row values without an evaluator] (row_values.cpp).
#pragma once

#include <ravel/backend.h>

#include <cstddef>
#include <cstdint>

namespace tbbcpu {

// Whether run_row_values computes `ins`: at most 64 instructions, every one f32 (dt F32) or every
// one f64, each a LOAD, CONST, ADD, MUL, MAX, NEG, RECIP or SQRT, sources earlier in the list,
// and every LOAD's input (in_dtype[arg], n_in of them) of that dtype.
bool row_values_fit(const rvl_instruction* ins, int32_t n, const int32_t* in_dtype, int32_t n_in);

// Rows [r0, r1) of `ins` (row_values_fit): LOAD k reads in[k][r], a dense array of the dtype; the
// last instruction's value is stored to out[r]. The same element functions as the array loops
// (array_scalar.hpp), so the same bits as the Evaluator.
void run_row_values(const rvl_instruction* ins, int32_t n, const std::byte* const* in, std::byte* out, int64_t r0,
                    int64_t r1);

}  // namespace tbbcpu
