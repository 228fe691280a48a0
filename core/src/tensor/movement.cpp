// Movement ops: each composes a new View (Note [Views]); none copies, except reshape where the
// composed view does not exist, which inserts a Copy node first.
#include <algorithm>
#include <numeric>

#include "graph/engine.hpp"
#include "graph/grad_mode.hpp"
#include "tensor/internal.hpp"
#include "tensor/sharded.hpp"

namespace ravel {

using namespace detail;

namespace {
std::vector<int64_t> flatten_pairs(const std::vector<std::pair<int64_t, int64_t>>& ps) {
  std::vector<int64_t> out;
  for (auto [a, b] : ps) out.push_back(a), out.push_back(b);
  return out;
}

Tensor copy_of(const Tensor& t) {
  Node proto;
  proto.kind = NodeKind::Copy;
  proto.dtype = t.dtype();
  proto.shape = t.shape();
  proto.device = t.device();
  proto.srcs = {t.node()};
  return Tensor(intern(std::move(proto)));
}
}  // namespace

Tensor Tensor::reshape(Shape shape) const {
  check_defined(*this, "reshape");
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      RAVEL_CHECK(infer < 0, ShapeError, "reshape ", shape_str(this->shape()), " to ", shape_str(shape),
                  ": expected at most one -1");
      infer = static_cast<int64_t>(d);
    } else {
      RAVEL_CHECK(shape[d] >= 0, ShapeError, "reshape to ", shape_str(shape), ": expected sizes >= 0 or one -1");
    }
  }
  // The product of the known sizes, checked (Note [Checked sizes]): a wrapped product could
  // otherwise equal numel() ({4, 2^62 + 2} wraps to 8).
  Shape given;
  given.reserve(shape.size());
  for (int64_t s : shape)
    if (s != -1) given.push_back(s);
  known = checked_numel(given, "reshape");
  if (infer >= 0) {
    RAVEL_CHECK(known != 0 && numel() % known == 0, ShapeError, "cannot reshape ", shape_str(this->shape()), " (",
                numel(), " elements) to ", shape_str(shape));
    shape[infer] = numel() / known;
    known *= shape[infer];
  }
  RAVEL_CHECK(known == numel(), ShapeError, "cannot reshape ", shape_str(this->shape()), " (", numel(),
              " elements) to ", shape_str(shape), " (", known, " elements)");
  check_rank(shape.size(), "reshape");
  if (shape == this->shape()) return *this;
  if (auto v = view_of(*this).reshape(shape)) return make_view(*this, MoveOp::Reshape, shape, std::move(*v));
  // Note [Views]: the chain cannot be one view (e.g. a permuted tensor merged): copy, then view.
  return make_view(copy_of(*this), MoveOp::Reshape, shape, StridedView::contiguous(this->shape()).reshape(shape).value());
}

Tensor Tensor::permute(std::vector<int64_t> order) const {
  check_defined(*this, "permute");
  RAVEL_CHECK(static_cast<int64_t>(order.size()) == ndim(), AxisError, "permute of a tensor of shape ",
              shape_str(shape()), ": expected ", ndim(), " axes in the order, got ", order.size());
  axes_mask(Axes(order), ndim(), "permute");  // range and repetition checks
  for (auto& a : order) a = normalize_axis(a, ndim(), "permute");
  return make_view(*this, MoveOp::Permute, order, view_of(*this).permute(order));
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  check_defined(*this, "transpose");
  std::vector<int64_t> order(ndim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[normalize_axis(a, ndim(), "transpose")], order[normalize_axis(b, ndim(), "transpose")]);
  return permute(order);
}

Tensor Tensor::expand(Shape shape) const {
  check_defined(*this, "expand");
  RAVEL_CHECK(shape.size() >= this->shape().size(), ShapeError, "cannot expand ", shape_str(this->shape()),
              " to ", shape_str(shape), ": expected at least as many axes");
  check_rank(shape.size(), "expand");
  Shape padded(shape.size() - this->shape().size(), 1);
  padded.insert(padded.end(), this->shape().begin(), this->shape().end());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) shape[d] = padded[d];
    RAVEL_CHECK(padded[d] == shape[d] || padded[d] == 1, ShapeError, "cannot expand ",
                shape_str(this->shape()), " to ", shape_str(shape), ": axis ", d, " has size ", padded[d],
                ", expected 1 or ", shape[d]);
  }
  if (shape == this->shape()) return *this;
  Tensor t = padded == this->shape() ? *this : reshape(padded);
  return make_view(t, MoveOp::Expand, shape, view_of(t).expand(shape));
}

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> widths) const {
  check_defined(*this, "pad");
  RAVEL_CHECK(static_cast<int64_t>(widths.size()) == ndim(), ShapeError, "pad of shape ", shape_str(shape()),
              ": expected ", ndim(), " (before, after) pairs, got ", widths.size());
  bool any = false;
  for (size_t d = 0; d < widths.size(); ++d) {
    auto [b, a] = widths[d];
    RAVEL_CHECK(b >= 0 && a >= 0, ValueError, "pad: expected widths >= 0, got (", b, ", ", a,
                ") (use shrink to cut)");
    int64_t size = 0;
    RAVEL_CHECK(!__builtin_add_overflow(shape()[d], b, &size) && !__builtin_add_overflow(size, a, &size), ShapeError,
                "pad of shape ", shape_str(shape()), ": axis ", d, " padded by (", b, ", ", a,
                ") has more elements than fit in int64");
    any = any || b || a;
  }
  return any ? make_view(*this, MoveOp::Pad, flatten_pairs(widths), view_of(*this).pad(widths)) : *this;
}

Tensor Tensor::shrink(std::vector<std::pair<int64_t, int64_t>> ranges) const {
  check_defined(*this, "shrink");
  RAVEL_CHECK(static_cast<int64_t>(ranges.size()) == ndim(), ShapeError, "shrink of shape ", shape_str(shape()),
              ": expected ", ndim(), " (lo, hi) ranges, got ", ranges.size());
  bool any = false;
  for (size_t d = 0; d < ranges.size(); ++d) {
    auto [lo, hi] = ranges[d];
    RAVEL_CHECK(0 <= lo && lo <= hi && hi <= shape()[d], ValueError, "shrink of shape ", shape_str(shape()),
                ": axis ", d, " range [", lo, ", ", hi, ") is outside [0, ", shape()[d], "]");
    any = any || lo != 0 || hi != shape()[d];
  }
  return any ? make_view(*this, MoveOp::Shrink, flatten_pairs(ranges), view_of(*this).shrink(ranges)) : *this;
}

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> widths, double value) const {
  check_defined(*this, "pad");
  Tensor p = pad(widths);
  if (value == 0.0 || p.shape() == shape()) return p;  // zero padding is the view itself
  // numpy.pad(mode="constant", constant_values=value): where the data is not, the value (a where,
  // not value * mask, so inf and NaN pad as themselves).
  Tensor inside = Tensor::ones(shape(), DType::Bool, device()).pad(widths);
  return where(inside, p, Tensor::full({}, value, dtype(), device()));
}

Tensor Tensor::flip(Axes axes) const {
  check_defined(*this, "flip");
  uint32_t mask = axes_mask(axes, ndim(), "flip");
  std::vector<bool> which(ndim());
  for (int64_t d = 0; d < ndim(); ++d) which[d] = mask & (1u << d);
  return mask ? make_view(*this, MoveOp::Flip, {static_cast<int64_t>(mask)}, view_of(*this).flip(which)) : *this;
}

Tensor Tensor::slice(int64_t axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) const {
  check_defined(*this, "slice");
  int64_t d = normalize_axis(axis, ndim(), "slice");
  RAVEL_CHECK(step != 0, ValueError, "slice: expected a nonzero step, got 0");
  const int64_t n = shape()[d];
  // Python's slice.indices(n).
  auto norm = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::clamp(x, lo, hi);
  };
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t i = 0; i < ndim(); ++i) ranges.emplace_back(0, shape()[i]);
  if (step > 0) {
    int64_t b = norm(start, 0, 0, n), e = norm(stop, n, 0, n);
    int64_t count = e > b ? (e - b + step - 1) / step : 0;
    ranges[d] = {b, count ? b + (count - 1) * step + 1 : b};
    Tensor t = shrink(ranges);
    return step == 1 ? t : make_view(t, MoveOp::Subsample, {d, step}, view_of(t).subsample(d, step));
  }
  int64_t b = norm(start, n - 1, -1, n - 1), e = norm(stop, -1, -1, n - 1);
  int64_t count = b > e ? (b - e + (-step) - 1) / (-step) : 0;
  ranges[d] = count ? std::pair<int64_t, int64_t>{b - (count - 1) * (-step), b + 1} : std::pair<int64_t, int64_t>{0, 0};
  Tensor t = shrink(ranges).flip(d);
  return step == -1 ? t : make_view(t, MoveOp::Subsample, {d, -step}, view_of(t).subsample(d, -step));
}

Tensor Tensor::slice(std::vector<Slice> slices) const {
  check_defined(*this, "slice");
  RAVEL_CHECK(static_cast<int64_t>(slices.size()) <= ndim(), ShapeError, "slice of shape ", shape_str(shape()),
              ": expected at most ", ndim(), " slices, got ", slices.size());
  Tensor t = *this;
  for (size_t d = 0; d < slices.size(); ++d) t = t.slice(static_cast<int64_t>(d), slices[d].start, slices[d].stop, slices[d].step);
  return t;
}

Tensor Tensor::select(int64_t axis, int64_t index) const {
  check_defined(*this, "select");
  int64_t d = normalize_axis(axis, ndim(), "select");
  int64_t n = shape()[d];
  RAVEL_CHECK(index >= -n && index < n, IndexError, "select: index ", index, " is out of range for axis ", d,
              " of size ", n, " (expected ", -n, " <= index < ", n, ")");
  if (index < 0) index += n;
  Tensor t = slice(d, index, index + 1);
  Shape s = t.shape();
  s.erase(s.begin() + d);
  return t.reshape(s);
}

Tensor Tensor::at(int64_t index) const {
  RAVEL_CHECK(ndim() > 0, ShapeError, "at: expected a tensor with at least 1 axis, got shape []");
  return select(0, index);
}

Tensor Tensor::squeeze(Axes axes) const {
  check_defined(*this, "squeeze");
  uint32_t mask = axes_mask(axes, ndim(), "squeeze");
  Shape s;
  for (int64_t d = 0; d < ndim(); ++d) {
    bool drop = (mask & (1u << d)) && shape()[d] == 1;
    RAVEL_CHECK(axes.all() || !(mask & (1u << d)) || shape()[d] == 1, ShapeError, "squeeze: axis ", d,
                " of shape ", shape_str(shape()), " has size ", shape()[d], ", expected 1");
    if (!drop) s.push_back(shape()[d]);
  }
  return reshape(s);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  check_defined(*this, "unsqueeze");
  int64_t d = normalize_axis(axis, ndim() + 1, "unsqueeze");
  Shape s;
  s.reserve(shape().size() + 1);
  s.insert(s.end(), shape().begin(), shape().begin() + d);
  s.push_back(1);
  s.insert(s.end(), shape().begin() + d, shape().end());
  return reshape(std::move(s));
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  check_defined(*this, "flatten");
  if (ndim() == 0) return reshape({1});
  int64_t a = normalize_axis(start, ndim(), "flatten"), b = normalize_axis(end, ndim(), "flatten");
  RAVEL_CHECK(a <= b, AxisError, "flatten: start axis ", start, " comes after end axis ", end);
  Shape s(shape().begin(), shape().begin() + a);
  int64_t n = 1;
  for (int64_t d = a; d <= b; ++d) n *= shape()[d];
  s.push_back(n);
  s.insert(s.end(), shape().begin() + b + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::to(const Device& dev) const {
  check_defined(*this, "to");
  engine().check_device(dev);  // unknown devices fail here, naming the available ones
  if (is_multi(*this)) return multi_to(*this, dev);  // a gather (Note [Sharded tensors])
  if (device() == dev) return *this;
  // A broadcast constant (zeros, full, ...) is remade on the target device: nothing to copy.
  // Not where the chain carries an autodiff marker (an argument alias: its gradient must reach
  // it through the Transfer) — unless gradients are off, when no gradient flows through the
  // result either (an optimizer's learning rate times a data-parallel gradient: remade on each
  // device, not copied and transferred every step).
  const Node& base = *base_of(*this);
  const bool marked = node()->kind == NodeKind::View && node()->marked_chain && grad_mode_enabled();
  if (base.kind == NodeKind::Const && !view_of(*this).has_mask() && !marked)
    return make_const(base.value, dtype(), dev).reshape(Shape(ndim(), 1)).expand(shape());
  // Only contiguous data crosses devices: a tensor laid out exactly like its base buffer (a
  // reshape of it, or an autodiff alias) moves that buffer; any other view is gathered into a
  // copy on the source device first. The source node itself stays the Transfer's input, so
  // gradients flow back through it.
  const bool plain = view_of(*this).is_contiguous() && view_of(*this).numel() == base_of(*this)->numel();
  Tensor src = plain ? *this : contiguous();
  Node proto;
  proto.kind = NodeKind::Transfer;
  proto.detached = !grad_mode_enabled();
  proto.dtype = dtype();
  proto.shape = src.shape();
  proto.device = dev;
  proto.srcs = {src.node()};
  return Tensor(intern(std::move(proto)));
}

Tensor Tensor::contiguous() const {
  check_defined(*this, "contiguous");
  if (is_multi(*this)) return multi_contiguous(*this);
  return node()->kind == NodeKind::View ? copy_of(*this) : *this;
}

}  // namespace ravel
