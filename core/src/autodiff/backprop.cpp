// gradients(): reverse-mode accumulation over the graph, iteratively (deep graphs), building
// the gradient as new graph nodes.
#include <unordered_map>
#include <unordered_set>

#include "autodiff/rules.hpp"
#include "ravel/autodiff.hpp"
#include "tensor/custom_vjp.hpp"
#include "tensor/internal.hpp"
#include "tensor/sharded.hpp"

namespace ravel {

using namespace detail;

std::vector<Tensor> gradients(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& cotangent) {
  check_defined(output, "gradients");
  Tensor cot = cotangent;
  if (!cot.defined()) {
    RAVEL_CHECK(output.numel() == 1, ShapeError, "gradients of a tensor of shape ", shape_str(output.shape()),
                " need a cotangent of that shape (only one-element outputs default to 1)");
    cot = Tensor::ones_like(output);
  }
  RAVEL_CHECK(cot.shape() == output.shape(), ShapeError, "cotangent of shape ", shape_str(cot.shape()),
              " does not match the output shape ", shape_str(output.shape()));
  RAVEL_CHECK(is_float(output.dtype()), DTypeError, "gradients need a float output, got ", dtype_name(output.dtype()));
  cot = cot.cast(output.dtype());

  // Post-order of everything the output depends on through differentiable edges.
  std::vector<NodePtr> order;
  {
    std::unordered_set<const Node*> seen;
    std::vector<std::pair<NodePtr, bool>> stack{{output.node(), false}};
    while (!stack.empty()) {
      auto [n, expanded] = std::move(stack.back());
      stack.pop_back();
      if (expanded) {
        order.push_back(n);
        continue;
      }
      if (!seen.insert(n.get()).second) continue;
      stack.emplace_back(n, true);
      for (auto& s : diff_inputs(*n))
        if (!seen.count(s.get())) stack.emplace_back(s, false);
    }
  }
  // Only nodes on a path to some input need an adjoint.
  std::unordered_set<const Node*> targets, relevant;
  // The parts of a bundle asked for are leaves here: a replica is made from another (part k is a
  // Transfer of part 0's node: Tensor::replicate), and the adjoint of part k flowing on into
  // part 0 would count device k's gradient twice in the sum over replicas.
  std::unordered_set<const Node*> part_leaves;
  for (const auto& x : inputs) {
    check_defined(x, "gradients");
    targets.insert(x.node().get());
    for (const auto& p : parts_of(x)) targets.insert(p.node().get());  // Note [Sharded gradients]
    if (is_multi(x))
      for (const auto& p : parts_of(x)) part_leaves.insert(p.node().get());
  }
  for (const auto& n : order) {  // sources come first in post-order
    bool r = targets.count(n.get()) > 0;
    for (auto& s : diff_inputs(*n)) r = r || relevant.count(s.get());
    if (r) relevant.insert(n.get());
  }

  // Note [Group derivatives] (tensor/custom_vjp.hpp): each group's members' cotangents, and the
  // member after which its rule runs (the first in post-order: the last one reached).
  struct Group {
    std::vector<Tensor> cotangents;
    const Node* last = nullptr;
  };
  std::unordered_map<const GroupRule*, Group> groups;
  auto group_of = [](const Node& n) { return n.custom_rule ? n.custom_rule->group.get() : nullptr; };
  for (const auto& n : order)
    if (const GroupRule* g = group_of(*n); g && relevant.count(n.get()) && !groups.count(g))
      groups[g] = Group{std::vector<Tensor>(g->size), n.get()};

  std::unordered_map<const Node*, Tensor> adjoint;
  adjoint[output.node().get()] = cot;
  auto needed = [&](const std::vector<NodePtr>& ins) {
    bool r = false;
    for (auto& s : ins) r = r || (relevant.count(s.get()) && is_float(s->dtype));
    return r;
  };
  auto accumulate = [&](const std::vector<NodePtr>& ins, const std::vector<Tensor>& parts) {
    for (size_t i = 0; i < ins.size() && i < parts.size(); ++i) {
      const Node* s = ins[i].get();
      if (!parts[i].defined() || !relevant.count(s) || !is_float(s->dtype)) continue;
      Tensor p = parts[i].cast(s->dtype);
      auto [slot, fresh] = adjoint.try_emplace(s, p);
      if (!fresh) slot->second = slot->second + p;
    }
  };
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodePtr& n = *it;
    auto a = adjoint.find(n.get());
    if (auto g = groups.find(group_of(*n)); g != groups.end()) {
      Group& group = g->second;
      if (a != adjoint.end() && !part_leaves.count(n.get())) group.cotangents[n->custom_rule->member] = a->second;
      if (n.get() != group.last) continue;
      bool any = false;
      for (const auto& c : group.cotangents) any = any || c.defined();
      const auto ins = diff_inputs(*n);
      if (any && needed(ins)) accumulate(ins, apply_group_vjp(n, group.cotangents));
      continue;
    }
    if (a == adjoint.end() || !relevant.count(n.get()) || part_leaves.count(n.get())) continue;
    auto ins = diff_inputs(*n);
    if (!needed(ins)) continue;
    accumulate(ins, vjp_rule(n, a->second));
  }
  std::vector<Tensor> bundles;  // the gradients of the bundles among the inputs, bucketed
  for (const auto& x : inputs) bundles.push_back(x.node() != output.node() ? x : Tensor());
  std::vector<Tensor> out = sharded_gradients(bundles, [&](const Tensor& part) {
    auto a = adjoint.find(part.node().get());
    return a != adjoint.end() ? a->second : Tensor();
  });
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (out[i].defined()) continue;
    auto a = adjoint.find(x.node().get());
    out[i] = a != adjoint.end() && x.node() != output.node() ? a->second
             : x.node() == output.node() ? cot.cast(x.dtype()) : Tensor::zeros_like(x);
  }
  return out;
}

}  // namespace ravel
