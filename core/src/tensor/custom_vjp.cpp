#include "tensor/custom_vjp.hpp"

#include "graph/grad_mode.hpp"
#include "tensor/internal.hpp"

namespace ravel::detail {

Tensor with_custom_vjp(const Tensor& y, const std::vector<Tensor>& inputs, std::shared_ptr<const CustomRule> rule) {
  check_defined(y, rule->name.c_str());
  if (!grad_mode_enabled()) return y;
  Node proto = alias_proto(y, MoveOp::Custom);
  for (const auto& x : inputs) {
    check_defined(x, rule->name.c_str());
    proto.custom_inputs.push_back(x.node());
  }
  proto.custom_rule = std::move(rule);
  return Tensor(make_unique_node(std::move(proto)));
}

std::vector<Tensor> apply_custom_vjp(const NodePtr& n, const Tensor& g) {
  const CustomRule& rule = *n->custom_rule;
  std::vector<Tensor> xs;
  for (const auto& x : n->custom_inputs) xs.emplace_back(x);
  std::vector<Tensor> parts = rule.vjp(xs, Tensor(n), g);
  RAVEL_CHECK(parts.size() == xs.size(), ValueError, "custom_vjp '", rule.name, "': the rule returned ", parts.size(),
              " gradients, expected one per input (", xs.size(), ")");
  for (size_t i = 0; i < parts.size(); ++i)
    RAVEL_CHECK(!parts[i].defined() || parts[i].shape() == xs[i].shape(), ShapeError, "custom_vjp '", rule.name,
                "': gradient ", i, " has shape ", shape_str(parts[i].shape()), ", expected input ", i, "'s shape ",
                shape_str(xs[i].shape()));
  return parts;
}

}  // namespace ravel::detail
