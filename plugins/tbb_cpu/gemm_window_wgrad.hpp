// Window contractions with a small C and a long K (a convolution's weight gradient), computed as
// C^T with A packed along m and B broadcast in place: Note [Weight gradients with B broadcast in
// place] in gemm_window_wgrad.cpp.
#pragma once

#include "evaluator.hpp"

namespace tbbcpu {

// C = epilogue(A @ B) for a validated multi-axis contraction whose shape suits that form (f32,
// AVX-512, long K); false, with nothing written, otherwise.
bool run_window_wgrad(const Contraction& c, const Evaluator& ep);

}  // namespace tbbcpu
