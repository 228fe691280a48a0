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

}  // namespace tbbcpu
