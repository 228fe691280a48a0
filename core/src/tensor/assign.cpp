// Tensor::assign (optimizer updates and state) and the realized leaves it makes.
#include "graph/engine.hpp"
#include "tensor/internal.hpp"
#include "tensor/sharded.hpp"

namespace ravel {

using namespace detail;

namespace detail {

NodePtr realized_leaf(const Tensor& t) {
  Tensor c = view_of(t).is_contiguous() ? t : t.contiguous();
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());  // Note [Threads] in graph/node.hpp
  c.realize();  // a Const target gets its one-element buffer here too
  const NodePtr& base = resolve(c.node()).base;
  if (base->kind == NodeKind::Const) {
    // Note [Constants shared by interning] (runtime/jit.cpp): an interned Const's one-element
    // buffer is shared by every graph using the same constant, so a Jit never takes it for a
    // tensor the caller holds. A leaf (an assigned scalar, a parameter made from a constant) is
    // such a tensor, and may be assigned again: it gets a buffer of its own.
    unsigned char value[8] = {};
    const uint64_t bytes = dtype_size(t.dtype());
    engine().download(*base->buffer, value, bytes);
    return make_buffer_node(t.dtype(), t.shape(), t.device(), engine().upload(t.device(), value, bytes));
  }
  // A contiguous view onto a bigger base (a shrink of leading rows) starts at element 0 and
  // has the same layout, so the shared buffer is right; its extra tail is never read.
  return make_buffer_node(t.dtype(), t.shape(), t.device(), base->buffer);
}

}  // namespace detail

// A sharded tensor keeps its layout: the value is brought to it (a one-device value is scattered
// or replicated), and each part keeps its own autodiff state, so optimizer updates never move a
// parameter. A tensor on one device takes the value's layout (p.assign(p.replicate(mesh)) is how
// a parameter is placed on a mesh), each part a leaf that requires grad if the tensor did.
Tensor& Tensor::assign_sharded(const Tensor& given) {
  // A partial value is stored combined (Note [Partial results]): state holds values.
  const Tensor value = combined(given);
  if (!defined() || !is_multi(*this)) {
    RAVEL_CHECK(!defined() || value.shape() == shape(), ShapeError, "assign: value of shape ", shape_str(value.shape()),
                " does not match the tensor's shape ", shape_str(shape()));
    const bool req = defined() && node_->requires_grad;
    const DType dt = defined() ? dtype() : value.dtype();
    std::vector<Tensor> parts = parts_of(value.cast(dt));
    ravel::realize(parts);  // one scheduling pass for every part
    for (auto& p : parts) {
      p = Tensor(realized_leaf(p));
      p.node()->requires_grad = req;
    }
    node_ = make_multi(std::move(parts), layout_of(value)).node();
    return *this;
  }
  RAVEL_CHECK(value.shape() == shape(), ShapeError, "assign: value of shape ", shape_str(value.shape()),
              " does not match the tensor's shape ", shape_str(shape()));
  const Layout l = layout_of(*this);
  std::vector<Tensor> parts = parts_of(*this);
  std::vector<Tensor> values = parts_in(value.cast(dtype()), l, shape());
  ravel::realize(values);  // one scheduling pass for every part
  for (size_t i = 0; i < parts.size(); ++i) parts[i].assign(values[i]);
  node_ = make_multi(std::move(parts), l).node();
  return *this;
}

Tensor& Tensor::assign(const Tensor& value) {
  check_defined(value, "assign");
  if (is_multi(value) || (defined() && is_multi(*this))) return assign_sharded(value);
  if (!defined()) {  // an undefined tensor (e.g. a fresh optimizer state) takes value as is
    node_ = realized_leaf(value);
    return *this;
  }
  RAVEL_CHECK(value.shape() == shape(), ShapeError, "assign: value of shape ", shape_str(value.shape()),
              " does not match the tensor's shape ", shape_str(shape()));
  // The autodiff state of the leaf (requires_grad, its accumulated gradient) survives updates.
  bool req = node_->requires_grad;
  NodePtr keep_grad = node_->grad;
  node_ = realized_leaf(value.cast(dtype()));
  node_->requires_grad = req;
  node_->grad = keep_grad;
  return *this;
}

}  // namespace ravel
