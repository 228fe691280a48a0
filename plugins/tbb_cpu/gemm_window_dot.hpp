// Window contractions with small M x N and long K whose operands both run contiguously along K
// (a convolution's weight gradient), summed along K in place: Note [Weight gradients as dot
// products over k runs] in gemm_window_dot.cpp.
#pragma once

#include "evaluator.hpp"

namespace tbbcpu {

// C = epilogue(A @ B) for a validated multi-axis contraction, when its shape suits the dot-product
// form (f32, AVX-512, ...); false, with nothing written, otherwise.
bool run_window_dot(const Contraction& c, const Evaluator& ep);

}  // namespace tbbcpu
