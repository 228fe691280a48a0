// The launch order of a graph that spans several devices (Note [Device interleaving]).
#pragma once

#include <vector>

#include "graph/node.hpp"

namespace ravel::detail {

// `order` (a topological order, sources first) itself when its nodes are on one device; else a
// topological order of the same nodes in which the devices take turns.
std::vector<NodePtr> interleave_devices(std::vector<NodePtr> order);

}  // namespace ravel::detail
