// RAVEL_DEBUG output on stderr (docs/config.md): 1 prints every kernel as it runs, 2 also the
// graph cut of every realization.
#pragma once

#include <vector>

#include "graph/node.hpp"
#include "schedule/schedule.hpp"

namespace ravel::detail {

// One line per kernel run (kind, shape, dtype, output node, time) plus its lowered detail.
void print_kernel(const CachedKernel& kernel, const Node& out, double seconds);
// What a node computes, in a word ("add", "sum", "copy", "view" for leaves and views).
const char* node_label(const Node& n);
// The graph cut: how many nodes became how many kernels, then each node and whether it was
// inlined.
void print_graph_cut(const std::vector<NodePtr>& order, const Schedule& schedule);

}  // namespace ravel::detail
