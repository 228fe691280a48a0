// The window GEMM whose vectors span runs and images (Note [Vectors across runs and images],
// gemm_window_span.cpp).
#pragma once

#include "evaluator.hpp"

#include <cstdint>
#include <vector>

namespace tbbcpu {

// The offset tables of Note [Packing from offset tables] (gemm_pack_window.cpp).
struct WindowSpanTables {
  const std::vector<int64_t>& am;
  const std::vector<int64_t>& ak;
  const std::vector<int64_t>& bk;
  const std::vector<int64_t>& bn;
  const std::vector<int64_t>& bn_run;
};

// C = epilogue(A @ B) for an f32 window contraction with 8 | M whose A is the same for every
// batch entry, on AVX-512; false (nothing written) where it does not apply.
bool run_window_span(const Contraction& c, const Evaluator& ep, const WindowSpanTables& t);

}  // namespace tbbcpu
