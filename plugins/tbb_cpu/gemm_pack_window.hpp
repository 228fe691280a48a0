// Multi-axis contractions (ABI 1.8 im2col block, Note [Implicit im2col] in the core's
// schedule/contraction.cpp): M, K and N may each be several strided axes, as a convolution's
// window view is. Run by contraction.cpp when the validated contraction has a group.
#pragma once

#include "evaluator.hpp"

namespace tbbcpu {

// C = epilogue(A @ B) for a validated contraction with c.multi_axis().
void run_window_contraction(const Contraction& c, const Evaluator& ep);

}  // namespace tbbcpu
