// Recognises sum_k(x * y) as a batched GEMM (Note [Matmul as mul + sum]), with M, K and N each
// one axis or, on a device that takes them (ABI 1.8 im2col block), several (Note [Implicit
// im2col]).
#pragma once

#include <optional>

#include "graph/node.hpp"
#include "ravel/backend.h"

namespace ravel::detail {

struct ContractionPlan {
  NodePtr x, y;  // the product's two operands (their bases are what the kernel reads)
  // Axes of the product's shape, each in increasing order; size-1 axes belong to none.
  std::vector<int64_t> r_axes;  // summed (K)
  std::vector<int64_t> m_axes;  // varying in x only (M; empty: extent 1)
  std::vector<int64_t> n_axes;  // varying in y only (N; empty: extent 1)
  std::vector<int64_t> batch;   // varying in both or neither, or leading (Note [Leading axes as a broadcast batch])
};

// A plan if `reduce` is a sum of an unrealized two-operand Mul whose operands are unpadded views
// in which every non-summed axis varies in x only (m), y only (n), or both (batch). With
// `max_axes` <= 1 (the ABI 1.0 form): one summed axis, at most one m and one n axis. With more:
// the M, K and N groups, after merging axes that are adjacent in every operand, have at most
// `max_axes` axes each, and C ([batch..., M, N], the reduce's contiguous layout) needs M and N as
// single strides.
std::optional<ContractionPlan> match_contraction(const Node& reduce, int max_axes = 1);

// The iteration space of the plan's epilogue: [batch extents..., M, N] (M and N the products of
// their groups).
Shape epilogue_shape(const ContractionPlan& plan, const Node& reduce);

// The contraction for `reduce` writing `out` (contiguous, laid out as reduce's shape), with every
// operand's buffer handle NULL (bound per run, Note [Kernel cache]) and no epilogue. Groups of
// several axes go into the ABI 1.8 members (the views' own stride on that axis is then 0).
rvl_contraction lower_contraction(const ContractionPlan& plan, const Node& reduce, const Node& out);

}  // namespace ravel::detail
