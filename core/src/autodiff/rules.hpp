// Derivative rules: one per primitive, written with tensor ops (so gradients are graph nodes
// and can be differentiated again).
#pragma once

#include <vector>

#include "graph/node.hpp"
#include "ravel/tensor.hpp"

namespace ravel::detail {

// The nodes a gradient flows to from `n` (its differentiable inputs): srcs for Alu, Reduce and
// Copy; the parent for movement views; nothing for leaves and stop-gradient aliases.
std::vector<NodePtr> diff_inputs(const Node& n);

// The vector-Jacobian product of node `n` (output value `y`) with cotangent `g`: one entry per
// diff_inputs(n), undefined where no gradient flows (integer inputs, comparison results).
std::vector<Tensor> vjp_rule(const NodePtr& n, const Tensor& g);

}  // namespace ravel::detail
