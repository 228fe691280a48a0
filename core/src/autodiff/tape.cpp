// The familiar (PyTorch-style) autograd API on top of gradients(): leaves that require grad,
// backward() accumulating into them, and no-grad scopes. (Tensor::assign, which keeps a leaf's
// autodiff state across optimizer updates, is the tensor layer's: tensor/assign.cpp.)
#include <mutex>
#include <unordered_set>

#include "autodiff/rules.hpp"
#include "graph/grad_mode.hpp"
#include "ravel/autodiff.hpp"
#include "tensor/internal.hpp"
#include "tensor/sharded.hpp"

namespace ravel {

using namespace detail;

namespace {
// Leaves below `root` that require grad (through differentiable edges only).
std::vector<NodePtr> grad_leaves(const NodePtr& root) {
  std::vector<NodePtr> leaves;
  std::unordered_set<const Node*> seen;
  std::vector<NodePtr> stack{root};
  while (!stack.empty()) {
    NodePtr n = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(n.get()).second) continue;
    if (n->requires_grad) leaves.push_back(n);
    for (auto& s : diff_inputs(*n)) stack.push_back(s);
  }
  return leaves;
}

// Guards every leaf's `grad` (accumulated by backward, read by grad(), dropped by zero_grad).
std::mutex& grad_mutex() {
  static std::mutex* m = new std::mutex;  // never destroyed: tensors may die in static teardown
  return *m;
}
}  // namespace

NoGradGuard::NoGradGuard() { enter_no_grad(); }
NoGradGuard::~NoGradGuard() { exit_no_grad(); }
bool grad_enabled() { return grad_mode_enabled(); }

Tensor& Tensor::requires_grad_(bool on) {
  check_defined(*this, "requires_grad_");
  RAVEL_CHECK(!on || is_float(dtype()), DTypeError, "requires_grad_ needs a float tensor, got ", dtype_name(dtype()));
  if (is_multi(*this)) {  // every part becomes a leaf (Note [Sharded gradients])
    std::vector<Tensor> parts = parts_of(*this);
    for (auto& p : parts) p.requires_grad_(on);
    node_ = make_multi(std::move(parts), layout_of(*this)).node();
    return *this;
  }
  // A Buffer node with a rule is a collective's result, not a leaf (Note [A derivative on the
  // result's own node]): like any computed tensor it becomes a new leaf on its data.
  if (node_->kind != NodeKind::Buffer || node_->custom_rule) node_ = realized_leaf(*this);
  node_->requires_grad = on;
  return *this;
}

bool Tensor::requires_grad() const {
  check_defined(*this, "requires_grad");
  return !grad_leaves(node_).empty();
}

void Tensor::backward(const Tensor& cotangent, const std::vector<Tensor>& also) const {
  check_defined(*this, "backward");
  std::vector<NodePtr> leaves = grad_leaves(node_);
  RAVEL_CHECK(!leaves.empty(), ValueError,
              "backward: this tensor does not depend on any tensor that requires grad (call requires_grad_() on a leaf)");
  std::vector<Tensor> inputs;
  for (auto& l : leaves) inputs.push_back(Tensor(l));
  std::vector<Tensor> gs = gradients(*this, inputs, cotangent);
  // Accumulation is a read-modify-write of each leaf's gradient: backward() calls from several
  // threads into shared leaves add up, as in PyTorch (Note [Threads] in graph/node.hpp).
  std::lock_guard<std::mutex> lock(grad_mutex());
  std::vector<Tensor> sums;
  for (size_t i = 0; i < leaves.size(); ++i) sums.push_back(leaves[i]->grad ? Tensor(leaves[i]->grad) + gs[i] : gs[i]);
  // One scheduling pass for every gradient and for this tensor itself: the forward pass they
  // share then runs once (reading the loss after backward() launches no second forward pass).
  sums.push_back(*this);
  sums.insert(sums.end(), also.begin(), also.end());
  ravel::realize(sums);
  sums.resize(leaves.size());
  // Keep only the values: a stored gradient must not hold this step's graph alive.
  for (size_t i = 0; i < leaves.size(); ++i) leaves[i]->grad = realized_leaf(sums[i]);
}

void detail::add_to_grad_lazily(Node& leaf, const Tensor& g) {
  std::lock_guard<std::mutex> lock(grad_mutex());
  leaf.grad = leaf.grad ? (Tensor(leaf.grad) + g).node() : g.node();
}

Tensor Tensor::grad() const {
  check_defined(*this, "grad");
  if (is_multi(*this)) {  // assembled from the parts' gradients (Note [Sharded gradients])
    bool any = false;
    std::vector<Tensor> parts = parts_of(*this);
    for (const auto& p : parts) any = any || p.grad().defined();
    if (!any) return Tensor();
    return sharded_gradient(*this, [](const Tensor& p) { return p.grad(); });
  }
  std::lock_guard<std::mutex> lock(grad_mutex());
  return node_->grad ? Tensor(node_->grad) : Tensor();
}

void Tensor::zero_grad() {
  check_defined(*this, "zero_grad");
  if (is_multi(*this)) {
    for (auto p : parts_of(*this)) p.zero_grad();
    return;
  }
  NodePtr old;  // released after the lock: dropping a gradient may free a whole graph
  std::lock_guard<std::mutex> lock(grad_mutex());
  old = std::move(node_->grad);
}

Tensor Tensor::detach() const { return stop_gradient(*this); }

}  // namespace ravel
