// Multi-axis contractions (ABI 1.8 im2col block, Note [Implicit im2col] in the core's
// schedule/contraction.cpp): M, K and N may each be several strided axes, as a convolution's
// window view is. Run by contraction.cpp when the validated contraction has a group.
#pragma once

#include "evaluator.hpp"

#include <vector>

namespace tbbcpu {

// Offsets of every index of a group (row-major over its shape) in operand `set` (0: A, 1: B), or
// of a 1.0-form axis (rank 0): i * stride for i < extent. Note [Packing from offset tables].
std::vector<int64_t> window_offsets(const Contraction::Group& g, int set, int64_t extent, int64_t stride);

// C = epilogue(A @ B) for a validated contraction with c.multi_axis().
void run_window_contraction(const Contraction& c, const Evaluator& ep);

}  // namespace tbbcpu
