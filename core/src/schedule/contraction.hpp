// Recognises sum_k(x * y) over one axis as a batched GEMM (Note [Matmul as mul + sum]).
#pragma once

#include <optional>

#include "graph/node.hpp"
#include "ravel/backend.h"

namespace ravel::detail {

struct ContractionPlan {
  NodePtr x, y;  // the product's two operands (their bases are what the kernel reads)
  int64_t r = -1;      // the summed axis of the product's shape
  int64_t m_axis = -1, n_axis = -1;  // -1: that side has extent 1
  std::vector<int64_t> batch;        // the remaining axes, in order
};

// A plan if `reduce` is a single-axis sum of an unrealized two-operand Mul whose operands are
// unpadded views in which every non-summed axis varies in x only (m), y only (n), or both
// (batch); at most one m and one n axis.
std::optional<ContractionPlan> match_contraction(const Node& reduce);

// The iteration space of the plan's epilogue: [batch extents..., m, n].
Shape epilogue_shape(const ContractionPlan& plan, const Node& reduce);

// The contraction for `reduce` writing `out` (contiguous, laid out as reduce's shape), with every
// operand's buffer handle NULL (bound per run, Note [Kernel cache]) and no epilogue.
rvl_contraction lower_contraction(const ContractionPlan& plan, const Node& reduce, const Node& out);

}  // namespace ravel::detail
