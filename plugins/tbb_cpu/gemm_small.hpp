// The small float GEMM of contraction.cpp (F32/F64), Note [Small GEMM] in gemm_small.cpp.
#pragma once

#include "evaluator.hpp"

namespace tbbcpu {

// C = epilogue(A @ B) for a validated F32 or F64 contraction when it is small enough for the
// unpacked serial path; returns false (nothing done) otherwise, and the caller runs gemm_blocked.
template <int DT>
bool gemm_small(const Contraction& c, const Evaluator& ep);
// Whether gemm_small would compute `c` (a non-empty product small enough; any dtype).
bool gemm_small_fits(const Contraction& c);
// An f16/bf16 contraction (c.dtype) on the small path, its operands widened block by block (Note
// [Half operands of the small GEMM]); false, with nothing done, where that path does not take it
// (N == 1, or not small).
bool gemm_small_half(const Contraction& c, const Evaluator& ep);

}  // namespace tbbcpu
