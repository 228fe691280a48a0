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
// Note [Group derivatives]
// The n results of one collective (all_gather's replicas) are n aliases with the same inputs.
// Each has its own rule, correct alone: autodiff sums what every result's rule gives an input.
// For all_gather that sum is the reduce-scatter of the cotangents, which the plugin runs as one
// collective (ABI 1.12) where n rules and autodiff's additions move and add every slice apart.
// So the results may also share a GroupRule: reverse-mode autodiff (ravel::gradients) collects
// every member's cotangent and calls the group's rule once, after the last member it reaches (the
// members depend only on the shared inputs, so every member is reached before them); members no
// cotangent reached get an undefined one. The per-member rules stay, for traversals that see one
// node at a time (the tape's backward), with the same value up to the order of additions.
struct GroupRule {
  std::string name;
  size_t size = 0;  // members
  // (inputs, one cotangent per member, undefined where none) -> one gradient per input.
  std::function<std::vector<Tensor>(const std::vector<Tensor>&, const std::vector<Tensor>&)> vjp;
};

struct CustomRule {
  using Vjp = std::function<std::vector<Tensor>(const std::vector<Tensor>&, const Tensor&, const Tensor&)>;
  CustomRule() = default;
  CustomRule(std::string rule_name, Vjp rule_vjp, bool is_elementwise = false)
      : name(std::move(rule_name)), vjp(std::move(rule_vjp)), elementwise(is_elementwise) {}
  std::string name;  // for error messages: "tanh", or what custom_vjp's caller called it
  // (inputs, output, cotangent) -> one gradient per input; the same type as ravel::VjpRule
  // (ravel/autodiff.hpp, a later layer than this one).
  Vjp vjp;
  // The rule is elementwise (element i of the output depends only on element i of inputs of the
  // output's shape), so it also holds part by part on sharded tensors (Note [Sharded custom
  // derivatives] in custom_vjp.cpp).
  bool elementwise = false;
  // Optional: the group this result belongs to, and its index there (Note [Group derivatives]).
  std::shared_ptr<const GroupRule> group;
  size_t member = 0;
};

// y with `rule` as its derivative with respect to `inputs` (float tensors y was computed from).
// Under a NoGradGuard y is returned as it is: nothing will differentiate it.
Tensor with_custom_vjp(const Tensor& y, const std::vector<Tensor>& inputs, std::shared_ptr<const CustomRule> rule);

// Note [A derivative on the result's own node]
// with_custom_vjp's alias is a second node per result: for an eager collective on a small tensor
// (a 4 KiB all-reduce takes ~1 us of core time in all) making, registering and freeing it and
// realizing through it was a fifth of the core's time per call (docs/distributed.md, "The
// core's per-call cost"). A result that is a fresh Buffer node nobody else has seen yet (a
// collective run in place, collective_op.cpp) can carry the rule itself: its custom_inputs and
// custom_rule are set before the node is shared, so nodes stay immutable once others can see
// them. Autodiff reads a Buffer node's rule as it reads a Custom alias's (diff_inputs,
// vjp_rule); such a node is not a leaf for requires_grad_ or a Jit's inputs (each takes a new
// leaf on the same buffer, as it did for the alias). The derivative is kept whatever the input
// is: gradients() may be asked for any tensor, a plain uploaded one included, so dropping the
// rule for "untraced" inputs would turn those gradients into silent zeros.
// y with `rule` as its derivative with respect to `input`, set on y's node where y is such a
// fresh Buffer node held only by `y`; otherwise (or under a NoGradGuard) as with_custom_vjp.
Tensor with_custom_vjp_on_result(Tensor y, const Tensor& input, std::shared_ptr<const CustomRule> rule);

// The rule's result for alias `n` and cotangent `g`, checked: one entry per input, each
// undefined or shaped like its input (ravel::ShapeError / ValueError naming the rule otherwise).
std::vector<Tensor> apply_custom_vjp(const NodePtr& n, const Tensor& g);

// The group rule of member `n` for every member's cotangent, checked as apply_custom_vjp.
std::vector<Tensor> apply_group_vjp(const NodePtr& n, const std::vector<Tensor>& cotangents);

}  // namespace ravel::detail
