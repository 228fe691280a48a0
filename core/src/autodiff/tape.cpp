// The familiar (PyTorch-style) autograd API on top of gradients(): leaves that require grad,
// backward() accumulating into them, no-grad scopes, and assign() for optimizer updates.
#include <unordered_set>

#include "autodiff/rules.hpp"
#include "ravel/autodiff.hpp"
#include "runtime/plugin.hpp"
#include "schedule/kernel_builder.hpp"
#include "schedule/schedule.hpp"
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

namespace {
thread_local int t_no_grad_depth = 0;

// A fresh Buffer leaf holding t's (realized) values; shares the buffer, copies nothing more.
NodePtr realized_leaf(const Tensor& t) {
  Tensor c = view_of(t).is_contiguous() ? t : t.contiguous();
  c.realize();
  const NodePtr& base = resolve(c.node()).base;
  if (base->kind == NodeKind::Const) realize_const(*base);
  // A contiguous view onto a bigger base (a shrink of leading rows) starts at element 0 and
  // has the same layout, so the shared buffer is right; its extra tail is never read.
  return make_buffer_node(t.dtype(), t.shape(), t.device(), base->buffer);
}

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
}  // namespace

NoGradGuard::NoGradGuard() { ++t_no_grad_depth; }
NoGradGuard::~NoGradGuard() { --t_no_grad_depth; }
bool grad_enabled() { return t_no_grad_depth == 0; }

Tensor& Tensor::requires_grad_(bool on) {
  check_defined(*this, "requires_grad_");
  RAVEL_CHECK(!on || is_float(dtype()), DTypeError, "requires_grad_ needs a float tensor, got ", dtype_name(dtype()));
  if (node_->kind != NodeKind::Buffer) node_ = realized_leaf(*this);
  node_->requires_grad = on;
  return *this;
}

bool Tensor::requires_grad() const {
  check_defined(*this, "requires_grad");
  return !grad_leaves(node_).empty();
}

void Tensor::backward(const Tensor& cotangent) const {
  check_defined(*this, "backward");
  std::vector<NodePtr> leaves = grad_leaves(node_);
  RAVEL_CHECK(!leaves.empty(), ValueError,
              "backward: this tensor does not depend on any tensor that requires grad (call requires_grad_() on a leaf)");
  std::vector<Tensor> inputs;
  for (auto& l : leaves) inputs.push_back(Tensor(l));
  std::vector<Tensor> gs = gradients(*this, inputs, cotangent);
  std::vector<Tensor> sums;
  for (size_t i = 0; i < leaves.size(); ++i) sums.push_back(leaves[i]->grad ? Tensor(leaves[i]->grad) + gs[i] : gs[i]);
  ravel::realize(sums);  // one scheduling pass for every gradient
  // Keep only the values: a stored gradient must not hold this step's graph alive.
  for (size_t i = 0; i < leaves.size(); ++i) leaves[i]->grad = realized_leaf(sums[i]);
}

Tensor Tensor::grad() const {
  check_defined(*this, "grad");
  return node_->grad ? Tensor(node_->grad) : Tensor();
}

void Tensor::zero_grad() {
  check_defined(*this, "zero_grad");
  node_->grad.reset();
}

Tensor Tensor::detach() const { return stop_gradient(*this); }

Tensor& Tensor::assign(const Tensor& value) {
  check_defined(value, "assign");
  if (!defined()) {  // an undefined tensor (e.g. a fresh optimizer state) takes value as is
    node_ = realized_leaf(value);
    return *this;
  }
  RAVEL_CHECK(value.shape() == shape(), ShapeError, "assign: value of shape ", shape_str(value.shape()),
              " does not match the tensor's shape ", shape_str(shape()));
  bool req = node_->requires_grad;
  NodePtr keep_grad = node_->grad;
  node_ = realized_leaf(value.cast(dtype()));
  node_->requires_grad = req;
  node_->grad = keep_grad;
  return *this;
}

}  // namespace ravel
