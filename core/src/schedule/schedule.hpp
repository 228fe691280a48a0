// The scheduler: cuts the lazy graph below some nodes into kernels and runs them.
//
// Today's policy is one kernel per primitive (movement ops fold into views; a sum over one axis
// of a product of two views becomes one contraction, Note [Matmul as mul + sum]). Kernels are
// lowered to the C ABI's kernel programs (kernel_builder.hpp), so smarter fusion later changes
// only how many instructions a program holds, not the ABI.
#pragma once

#include <vector>

#include "graph/node.hpp"

namespace ravel::detail {

// Ensures every node in `targets` (or, for a View, the node it views) has a buffer. Buffers of
// intermediate nodes are released as soon as their last consumer in this call has run.
void realize_nodes(const std::vector<NodePtr>& targets);

// The node a kernel reads when it reads `n`, and the view it reads it through.
struct Source {
  NodePtr base;
  View view;
};
Source resolve(const NodePtr& n);

}  // namespace ravel::detail
