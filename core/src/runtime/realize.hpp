// Realization: the runtime's side of Tensor::realize and of reading a tensor back.
#pragma once

#include <vector>

#include "graph/node.hpp"
#include "ravel/runtime.hpp"

namespace ravel::detail {

// Ensures every node in `targets` (or, for a View, the node it views) has a buffer: walks the
// unrealized graph, asks the scheduler for a recipe under the fusion options in force, runs it
// (buffers of intermediates are released after their last reader) and records KernelStats.
void realize_nodes(const Runtime& runtime, const std::vector<NodePtr>& targets);

}  // namespace ravel::detail
