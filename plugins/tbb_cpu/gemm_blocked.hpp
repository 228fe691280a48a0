// The cache-blocked float GEMM of contraction.cpp (F32/F64), Note [Blocked GEMM] in
// gemm_blocked.cpp.
#pragma once

#include "evaluator.hpp"

namespace tbbcpu {

// C = epilogue(A @ B) for a validated F32 or F64 contraction.
template <int DT>
void gemm_blocked(const Contraction& c, const Evaluator& ep);

}  // namespace tbbcpu
