// The cache-blocked float GEMM of contraction.cpp (F32/F64), Note [Blocked GEMM] in
// gemm_blocked.cpp.
#pragma once

#include "evaluator.hpp"

namespace tbbcpu {

// C = epilogue(A @ B) for a validated F32 or F64 contraction.
template <int DT>
void gemm_blocked(const Contraction& c, const Evaluator& ep);

// Whether gemm_blocked runs a contraction of `work` multiply-adds (batches x M x N x K) on oneTBB
// (otherwise serially on the calling thread, where gemm_small may take it instead).
bool gemm_blocked_parallel(int64_t work);

}  // namespace tbbcpu
