// Realization: the runtime's side of Tensor::realize and of reading a tensor back.
#pragma once

#include <functional>
#include <vector>

#include "graph/node.hpp"
#include "ravel/runtime.hpp"

namespace ravel::detail {

// Ensures every node in `targets` (or, for a View, the node it views) has a buffer: walks the
// unrealized graph, asks the scheduler for a recipe under the fusion options in force, runs it
// (buffers of intermediates are released after their last reader) and records KernelStats.
// `ready`, if set, is called once per target, with its index, as soon as the target has its
// buffer: before any kernel runs for targets realized already (in index order), right after the
// kernel that made it for the others, so that work on a target can start while the rest of the
// realization runs; the kernels are then ordered so that target 0's come first, then those
// target 1 still needs, and so on, as far as the graph allows (Note [Host operations begun as their inputs are made] in host_op.cpp). If
// `ready` throws, the realization stops there (kernels run so far keep their results).
// `after_kernel`, if set, is called after every kernel (before `ready`'s reports for it).
using TargetReady = std::function<void(size_t target)>;
void realize_nodes(const Runtime& runtime, const std::vector<NodePtr>& targets, const TargetReady& ready = {},
                   const std::function<void()>& after_kernel = {});

}  // namespace ravel::detail
