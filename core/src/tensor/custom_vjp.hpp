// Custom derivatives: a composite whose gradient is its own rule rather than the chain rule
// through the primitives that compute it (jax.custom_vjp; tinygrad's Function with a backward).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/node.hpp"
#include "ravel/tensor.hpp"

namespace ravel::detail {

// Note [Custom derivatives]
// `with_custom_vjp(y, inputs, rule)` returns a unique alias of y (MoveOp::Custom: same data, an
// identity view, so kernels read y in place and the fusion planner may still inline y into its
// consumers: reads_base_in_place). Autodiff sees the alias as a node whose differentiable inputs
// are `inputs` and whose vector-Jacobian product is `rule.vjp(inputs, alias, g)`; the nodes
// between the inputs and y are never visited. The rule is written with tensor ops, so its result
// is a graph that is differentiated again for higher orders, and forward mode (jvp by double
// vjp) uses it too. Why: the chain rule through a composite builds the derivative of every
// intermediate (tanh's where, exp, division: three [m, n] kernels in makemore's backward pass,
// which also made the forward pass store the sign mask and e^-2|x| for them), where the
// closed form is one short expression.
struct CustomRule {
  std::string name;  // for error messages: "tanh", or what custom_vjp's caller called it
  // (inputs, output, cotangent) -> one gradient per input; the same type as ravel::VjpRule
  // (ravel/autodiff.hpp, a later layer than this one).
  std::function<std::vector<Tensor>(const std::vector<Tensor>&, const Tensor&, const Tensor&)> vjp;
  // The rule is elementwise (element i of the output depends only on element i of inputs of the
  // output's shape), so it also holds part by part on sharded tensors (Note [Sharded custom
  // derivatives] in custom_vjp.cpp).
  bool elementwise = false;
};

// y with `rule` as its derivative with respect to `inputs` (float tensors y was computed from).
// Under a NoGradGuard y is returned as it is: nothing will differentiate it.
Tensor with_custom_vjp(const Tensor& y, const std::vector<Tensor>& inputs, std::shared_ptr<const CustomRule> rule);

// The rule's result for alias `n` and cotangent `g`, checked: one entry per input, each
// undefined or shaped like its input (ravel::ShapeError / ValueError naming the rule otherwise).
std::vector<Tensor> apply_custom_vjp(const NodePtr& n, const Tensor& g);

}  // namespace ravel::detail
