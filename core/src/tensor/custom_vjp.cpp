#include "tensor/custom_vjp.hpp"

#include "graph/grad_mode.hpp"
#include "tensor/internal.hpp"
#include "tensor/sharded.hpp"

namespace ravel::detail {

Tensor sharded_custom_vjp(const Tensor& y, const std::vector<Tensor>& inputs, std::shared_ptr<const CustomRule> rule);

Tensor with_custom_vjp(const Tensor& y, const std::vector<Tensor>& inputs, std::shared_ptr<const CustomRule> rule) {
  check_defined(y, rule->name.c_str());
  if (!grad_mode_enabled()) return y;
  if (is_multi(y) || any_multi(inputs)) return sharded_custom_vjp(y, inputs, rule);
  Node proto = alias_proto(y, MoveOp::Custom);
  for (const auto& x : inputs) {
    check_defined(x, rule->name.c_str());
    proto.custom_inputs.push_back(x.node());
  }
  proto.custom_rule = std::move(rule);
  return Tensor(make_unique_node(std::move(proto)));
}

// Note [A derivative on the result's own node] (custom_vjp.hpp).
Tensor with_custom_vjp_on_result(Tensor y, const Tensor& input, std::shared_ptr<const CustomRule> rule) {
  check_defined(y, rule->name.c_str());
  if (!grad_mode_enabled()) return y;
  Node& n = *y.node();
  if (n.kind != NodeKind::Buffer || n.custom_rule || y.node().use_count() != 1 || is_multi(input))
    return with_custom_vjp(y, {input}, std::move(rule));
  check_defined(input, rule->name.c_str());
  n.custom_inputs.assign(1, input.node());
  n.custom_rule = std::move(rule);
  return y;
}

// Note [Sharded custom derivatives]
// An elementwise rule (tanh, sigmoid, relu: the output's element depends on the inputs' elements
// at the same index) holds part by part, so each part gets the rule on its own slices. Any other
// rule (a user's custom_vjp may reduce or mix elements, or replace a derivative the primitives
// do not have) is applied once, to whole tensors: the output and the inputs are gathered on the
// mesh's first device, the rule is attached there, and the result is split again like y. Its
// gradient then flows back through the gathers to every part.
Tensor sharded_custom_vjp(const Tensor& y_given, const std::vector<Tensor>& inputs,
                         std::shared_ptr<const CustomRule> rule) {
  const Tensor y = combined(y_given);  // the rule is the value's (Note [Partial results])
  bool same_shape = true;
  for (const auto& x : inputs) same_shape = same_shape && x.shape() == y.shape();
  if (!rule->elementwise || !same_shape || !is_multi(y)) {
    const Device home = y.device();
    std::vector<Tensor> whole;
    for (const auto& x : inputs) whole.push_back(x.to(home));  // to() gathers a sharded tensor
    Tensor attached = with_custom_vjp(y.to(home), whole, rule);
    if (!is_multi(y)) return attached;
    return make_multi(parts_in(attached, layout_of(y), y.shape()), layout_of(y));
  }
  const Layout l = layout_of(y);
  const std::vector<Tensor> ys = parts_of(y);
  std::vector<std::vector<Tensor>> xs;
  for (const auto& x : inputs) xs.push_back(parts_in(x, l, y.shape()));
  std::vector<Tensor> outs;
  for (size_t i = 0; i < ys.size(); ++i) {
    std::vector<Tensor> ins;
    for (const auto& x : xs) ins.push_back(x[i]);
    outs.push_back(with_custom_vjp(ys[i], ins, rule));
  }
  return make_multi(std::move(outs), l);
}

namespace {
// Note [Rules that capture split tensors]
// A rule's inputs are never bundles: Note [Sharded custom derivatives] gives it whole tensors
// on one device, or one part each. Its closure may still hold a bundle (a split or replicated
// tensor the user's function captured), and ops with a bundle operand give bundles, so its
// gradient for a one-device input may come back split, replicated or partial. Autodiff hands
// that gradient to the input's own node (a gather's derivative, which cuts it into the parts'
// slices), which expects a tensor on the input's device: a bundle there gave "make_multi"
// internal errors (decision 67 left the cause open; shown by the test
// a_custom_rule_that_captures_a_split_tensor, tests/sharding/test_sharded_autodiff.cpp). The
// value is right, only its placement is not: the gradient is brought to the input's device (a
// gather, or a fold of partial sums), the same value the rule gives on one device.
void check_gradients(const std::string& name, std::vector<Tensor>& parts, const std::vector<Tensor>& xs) {
  RAVEL_CHECK(parts.size() == xs.size(), ValueError, "custom_vjp '", name, "': the rule returned ", parts.size(),
              " gradients, expected one per input (", xs.size(), ")");
  for (size_t i = 0; i < parts.size(); ++i) {
    RAVEL_CHECK(!parts[i].defined() || parts[i].shape() == xs[i].shape(), ShapeError, "custom_vjp '", name,
                "': gradient ", i, " has shape ", shape_str(parts[i].shape()), ", expected input ", i, "'s shape ",
                shape_str(xs[i].shape()));
    if (is_multi(parts[i]) && !is_multi(xs[i])) parts[i] = parts[i].to(xs[i].device());
  }
}
}  // namespace

std::vector<Tensor> apply_group_vjp(const NodePtr& n, const std::vector<Tensor>& cotangents) {
  const GroupRule& group = *n->custom_rule->group;
  std::vector<Tensor> xs;
  for (const auto& x : n->custom_inputs) xs.emplace_back(x);
  std::vector<Tensor> parts = group.vjp(xs, cotangents);
  check_gradients(group.name, parts, xs);
  return parts;
}

std::vector<Tensor> apply_custom_vjp(const NodePtr& n, const Tensor& g) {
  const CustomRule& rule = *n->custom_rule;
  std::vector<Tensor> xs;
  for (const auto& x : n->custom_inputs) xs.emplace_back(x);
  std::vector<Tensor> parts = rule.vjp(xs, Tensor(n), g);
  check_gradients(rule.name, parts, xs);
  return parts;
}

}  // namespace ravel::detail
