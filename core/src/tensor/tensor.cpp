// The Tensor handle: accessors, node construction, and the elementwise primitives.
#include <cmath>
#include <sstream>

#include "graph/engine.hpp"
#include "graph/grad_mode.hpp"
#include "tensor/internal.hpp"
#include "tensor/sharded.hpp"

namespace ravel {

using namespace detail;

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

namespace detail {

void check_defined(const Tensor& t, const char* op) {
  RAVEL_CHECK(t.defined(), ValueError, op, ": expected a defined tensor, got an undefined (default-constructed) Tensor");
}

void check_rank(size_t rank, const char* op) {
  RAVEL_CHECK(rank <= RVL_MAX_RANK, ShapeError, op, ": expected at most ", RVL_MAX_RANK, " axes, got ", rank);
}

int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op) {
  RAVEL_CHECK(axis >= -ndim && axis < ndim, AxisError, op, ": axis ", axis, " is out of range for a tensor with ",
              ndim, " axes (expected ", -ndim, " <= axis < ", ndim, ")");
  return axis < 0 ? axis + ndim : axis;
}

uint32_t axes_mask(const Axes& axes, int64_t ndim, const char* op) {
  if (axes.all()) return ndim >= 32 ? ~0u : ((1u << ndim) - 1u);
  uint32_t mask = 0;
  for (int64_t a : axes.list()) {
    int64_t d = normalize_axis(a, ndim, op);
    RAVEL_CHECK(!(mask & (1u << d)), AxisError, op, ": axis ", a, " is repeated");
    mask |= 1u << d;
  }
  return mask;
}

const NodePtr& base_of(const Tensor& t) {
  const NodePtr& n = t.node();
  return n->kind == NodeKind::View ? n->srcs[0] : n;
}

StridedView view_of(const Tensor& t) {
  const NodePtr& n = t.node();
  return n->kind == NodeKind::View ? n->view : StridedView::contiguous(n->shape);
}

Tensor make_const(Scalar value, DType dtype, const Device& device) {
  Node proto;
  proto.kind = NodeKind::Const;
  proto.dtype = dtype;
  proto.device = device;
  proto.value = value;
  return Tensor(intern(std::move(proto)));
}

Tensor make_scalar(double value, DType dtype, const Device& device) {
  Scalar s;
  if (is_float(dtype)) s.f = value;
  else if (dtype == DType::Bool) s.i = value != 0;
  else if (dtype == DType::U64 && value >= 9223372036854775808.0 && value < 18446744073709551616.0)
    s.i = static_cast<int64_t>(static_cast<uint64_t>(value));  // u64 above 2^63: its bits
  else s.i = static_cast<int64_t>(value);
  return make_const(s, dtype, device);
}

namespace {
const char* move_name(MoveOp op) {
  switch (op) {
    case MoveOp::Reshape: return "reshape";
    case MoveOp::Permute: return "permute";
    case MoveOp::Expand: return "expand";
    case MoveOp::Pad: return "pad";
    case MoveOp::Shrink: return "shrink";
    case MoveOp::Flip: return "flip";
    case MoveOp::Subsample: return "slice";
    case MoveOp::Identity: return "alias";
    case MoveOp::StopGradient: return "stop_gradient";
    case MoveOp::Custom: return "custom_vjp";
  }
  return "view";
}
}  // namespace

Tensor make_view(const Tensor& t, MoveOp op, std::vector<int64_t> args, StridedView view) {
  if (is_multi(t)) return multi_view(t, op, args);  // Note [Sharded tensors]
  // Note [Checked sizes]: every movement op's result shape is checked here, whatever the op
  // checked itself (an expand of a scalar to {1<<40, 1<<40} is refused, not numel() == 0).
  checked_bytes(view.shape, static_cast<int64_t>(dtype_size(t.dtype())), move_name(op));
  // An identity composition needs no node (its gradient is the identity too) unless the chain
  // carries an autodiff marker (an argument alias, a stop-gradient, a no-grad node) that
  // returning the base would drop.
  const Node& tn = *t.node();
  const bool marked = !grad_mode_enabled() || tn.detached || (tn.kind == NodeKind::View && tn.marked_chain);
  if (!marked && view.is_contiguous() && view.shape == base_of(t)->shape) return Tensor(base_of(t));
  Node proto;
  proto.kind = NodeKind::View;
  proto.detached = !grad_mode_enabled();  // Note [No-grad nodes]
  proto.dtype = t.dtype();
  proto.shape = view.shape;
  proto.device = t.device();
  proto.srcs = {base_of(t)};
  proto.view = std::move(view);
  proto.parent = t.node();
  proto.move = op;
  proto.move_args = std::move(args);
  proto.marked_chain = marked;
  return Tensor(intern(std::move(proto)));
}

Node alias_proto(const Tensor& t, MoveOp op) {
  Node proto;
  proto.kind = NodeKind::View;
  proto.dtype = t.dtype();
  proto.shape = t.shape();
  proto.device = t.device();
  proto.srcs = {base_of(t)};
  proto.view = view_of(t);
  proto.parent = t.node();
  proto.move = op;
  proto.marked_chain = true;  // views of it keep the chain, so autodiff still reaches the alias
  return proto;
}

Tensor make_alias(const Tensor& t, MoveOp op) {
  if (is_multi(t)) return multi_alias(t, op);  // Note [Sharded tensors]
  return Tensor(make_unique_node(alias_proto(t, op)));
}

Tensor make_alu(AluOp op, std::vector<Tensor> srcs, DType out) {
  if (any_multi(srcs)) return multi_alu(op, srcs, out);  // Note [Sharded tensors]
  Node proto;
  proto.kind = NodeKind::Alu;
  // Note [No-grad nodes]: under a NoGradGuard a node is marked detached (part of its hash-cons
  // identity) instead of being wrapped in a stop-gradient alias, so fusion sees the same graph.
  proto.detached = !grad_mode_enabled();
  proto.alu = op;
  proto.dtype = out;
  proto.shape = srcs[0].shape();
  proto.device = srcs[0].device();
  // A cast to a wider dtype can make a shape's byte size overflow (Note [Checked sizes]).
  if (dtype_size(out) > dtype_size(srcs[0].dtype())) checked_bytes(proto.shape, static_cast<int64_t>(dtype_size(out)), alu_name(op));
  for (auto& s : srcs) {
    if (!(s.device() == proto.device)) {
      // config "placement.on_mixed_devices": "copy" moves the operand to the first operand's
      // device (a Transfer node the scheduler sees); "error" (the default) refuses.
      RAVEL_CHECK(engine().copy_on_mixed_devices(), DeviceError, alu_name(op),
                  ": operands are on different devices, ", proto.device.str(), " and ", s.device().str(),
                  " (move one with to(), or set placement.on_mixed_devices to \"copy\")");
      s = s.to(proto.device);
    }
    proto.srcs.push_back(s.node());
  }
  return Tensor(intern(std::move(proto)));
}

namespace {
// A Reduce node over `axes` (kept as size 1) of t, with result dtype `out`.
Tensor reduce_node(ReduceOp op, const Tensor& t, uint32_t axes, DType out) {
  if (is_multi(t)) return multi_reduce(op, t, axes, out);  // Note [Sharded tensors]
  Node proto;
  proto.kind = NodeKind::Reduce;
  proto.detached = !grad_mode_enabled();  // Note [No-grad nodes]
  proto.reduce = op;
  proto.dtype = out;
  proto.shape = t.shape();
  for (size_t d = 0; d < proto.shape.size(); ++d)
    if (axes & (1u << d)) proto.shape[d] = 1;
  proto.device = t.device();
  proto.axes = axes;
  proto.srcs = {t.node()};
  return Tensor(intern(std::move(proto)));
}
}  // namespace

Tensor make_reduce_widening(ReduceOp op, const Tensor& t, uint32_t axes, DType out) {
  RAVEL_CHECK(op == ReduceOp::LogSumExp && t.dtype() == DType::F32 && out == DType::F64, InternalError,
              "make_reduce_widening: only logsumexp from f32 to f64 widens, got ", reduce_name(op), " from ",
              dtype_name(t.dtype()), " to ", dtype_name(out));
  if (axes == 0) return t.cast(out);
  return reduce_node(op, t, axes, out);
}

Tensor make_reduce(ReduceOp op, const Tensor& t, uint32_t axes) {
  if (axes == 0) return t;
  return reduce_node(op, t, axes, t.dtype());
}

Tensor binary(AluOp op, const Tensor& a, const Tensor& b) {
  check_defined(a, alu_name(op));
  check_defined(b, alu_name(op));
  Shape out = broadcast_shapes(a.shape(), b.shape());
  DType t = promote(a.dtype(), b.dtype());
  check_alu_dtype(op, t);
  // Expand before casting, so the cast fuses into the consumer (Note [Fusion]).
  Tensor x = a.expand(out).cast(t), y = b.expand(out).cast(t);
  return make_alu(op, {x, y}, alu_result_dtype(op, t));
}

Tensor scalar_like(const Tensor& t, double value) {
  check_defined(t, "scalar operand");
  DType d = t.dtype();
  bool integral = std::isfinite(value) && value == std::trunc(value);
  if (!is_float(d)) {
    // An integral value the integer dtype cannot hold (i32 + 3e9, i64 + 2^63) would wrap: it is a
    // float scalar to PyTorch's promotion, which gives the default float dtype. A signed N-bit
    // type holds -2^(N-1) .. 2^(N-1) - 1; an unsigned one also takes -2^(N-1) .. -1 (u8:
    // -128..255), as PyTorch lets x - 1 on a u8 tensor wrap (c10's overflows<uint8_t>).
    const DType target = d == DType::Bool ? DType::I64 : d;
    const int bits = 8 * dtype_size(target);
    const double lo = -std::ldexp(1.0, bits - 1);
    const double hi = std::ldexp(1.0, is_signed(target) ? bits - 1 : bits);  // exclusive, exact
    const bool fits = integral && value >= lo && value < hi;
    d = fits ? target : DType::F32;
  }
  return make_scalar(value, d, t.device());
}

}  // namespace detail

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    RAVEL_CHECK(x == y || x == 1 || y == 1, ShapeError, "shapes ", shape_str(a), " and ", shape_str(b),
                " cannot be broadcast together (axis ", static_cast<int64_t>(i) - static_cast<int64_t>(n),
                ": sizes ", x, " and ", y, "; expected equal sizes or 1)");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// ---- descriptor ----------------------------------------------------------------------------

const Node& Tensor::n() const {
  check_defined(*this, "Tensor");
  return *node_;
}
DType Tensor::dtype() const { return n().dtype; }
const Shape& Tensor::shape() const { return n().shape; }
int64_t Tensor::ndim() const { return static_cast<int64_t>(n().shape.size()); }
int64_t Tensor::numel() const { return n().numel(); }
int64_t Tensor::size(int64_t axis) const { return shape()[normalize_axis(axis, ndim(), "size")]; }
Device Tensor::device() const { return n().device; }
std::vector<int64_t> Tensor::strides() const { return view_of(*this).strides; }
int64_t Tensor::offset() const { return view_of(*this).offset; }
bool Tensor::is_contiguous() const { return view_of(*this).is_contiguous(); }

// ---- elementwise primitives ------------------------------------------------------------------

namespace {
// Float math on ints promotes to f32 first (as NumPy and PyTorch do).
Tensor float_unary(const Tensor& t, AluOp op) {
  check_defined(t, alu_name(op));
  Tensor x = is_float(t.dtype()) ? t : t.cast(DType::F32);
  return make_alu(op, {x}, x.dtype());
}
}  // namespace

Tensor Tensor::apply(int32_t op) const {
  RAVEL_CHECK(rvl::op_is_arithmetic(op) && op != RVL_OP_CAST && rvl::op_info(op).arity == 1,
              ValueError, "apply: op code ", op, " is not a unary elementwise op of the op table",
              " (expected a unary RVL_OP_* other than CAST; use cast() for casts)");
  const AluOp a = static_cast<AluOp>(op);
  if (rvl::op_info(op).accepts == rvl::OpAccepts::Float) return float_unary(*this, a);
  check_defined(*this, alu_name(a));
  check_alu_dtype(a, dtype());
  return make_alu(a, {*this}, alu_result_dtype(a, dtype()));
}

Tensor Tensor::apply(int32_t op, const Tensor& other) const {
  RAVEL_CHECK(rvl::op_is_arithmetic(op) && rvl::op_info(op).arity == 2, ValueError, "apply: op code ",
              op, " is not a binary elementwise op of the op table (expected a binary RVL_OP_*)");
  return binary(static_cast<AluOp>(op), *this, other);
}

Tensor Tensor::neg() const {
  check_alu_dtype(AluOp::NEG, dtype());
  return make_alu(AluOp::NEG, {*this}, dtype());
}
Tensor Tensor::recip() const { return float_unary(*this, AluOp::RECIP); }
Tensor Tensor::sqrt() const { return float_unary(*this, AluOp::SQRT); }
Tensor Tensor::exp2() const { return float_unary(*this, AluOp::EXP2); }
Tensor Tensor::log2() const { return float_unary(*this, AluOp::LOG2); }
Tensor Tensor::sin() const { return float_unary(*this, AluOp::SIN); }
Tensor Tensor::trunc() const { return is_float(dtype()) ? make_alu(AluOp::TRUNC, {*this}, dtype()) : *this; }
Tensor Tensor::cast(DType to) const { return dtype() == to ? *this : make_alu(AluOp::CAST, {*this}, to); }

Tensor Tensor::add(const Tensor& o) const { return binary(AluOp::ADD, *this, o); }
Tensor Tensor::mul(const Tensor& o) const { return binary(AluOp::MUL, *this, o); }
Tensor Tensor::maximum(const Tensor& o) const { return binary(AluOp::MAX, *this, o); }
Tensor Tensor::mod(const Tensor& o) const { return binary(AluOp::MOD, *this, o); }
Tensor Tensor::idiv(const Tensor& o) const { return binary(AluOp::IDIV, *this, o); }
Tensor Tensor::lt(const Tensor& o) const { return binary(AluOp::CMPLT, *this, o); }
Tensor Tensor::ne(const Tensor& o) const { return binary(AluOp::CMPNE, *this, o); }
Tensor Tensor::logical_and(const Tensor& o) const { return binary(AluOp::AND, *this, o); }
Tensor Tensor::logical_or(const Tensor& o) const { return binary(AluOp::OR, *this, o); }
Tensor Tensor::logical_xor(const Tensor& o) const { return binary(AluOp::XOR, *this, o); }

Tensor Tensor::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined(cond, "where");
  check_defined(a, "where");
  check_defined(b, "where");
  Shape out = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape()), b.shape());
  DType t = promote(a.dtype(), b.dtype());
  Tensor c = cond.dtype() == DType::Bool ? cond : cond.ne(Tensor::zeros_like(cond));
  return make_alu(AluOp::WHERE, {c.expand(out), a.expand(out).cast(t), b.expand(out).cast(t)}, t);
}

// ---- operators -------------------------------------------------------------------------------

Tensor operator-(const Tensor& a) { return a.neg(); }

#define RAVEL_DEFINE_BINARY_OPERATOR(op, method)                                                  \
  Tensor operator op(const Tensor& a, const Tensor& b) { return a.method(b); }                    \
  Tensor operator op(const Tensor& a, double b) { return a.method(scalar_like(a, b)); }           \
  Tensor operator op(double a, const Tensor& b) { return scalar_like(b, a).method(b); }
RAVEL_DEFINE_BINARY_OPERATOR(+, add)
RAVEL_DEFINE_BINARY_OPERATOR(-, sub)
RAVEL_DEFINE_BINARY_OPERATOR(*, mul)
RAVEL_DEFINE_BINARY_OPERATOR(/, div)
RAVEL_DEFINE_BINARY_OPERATOR(<, lt)
RAVEL_DEFINE_BINARY_OPERATOR(>, gt)
RAVEL_DEFINE_BINARY_OPERATOR(<=, le)
RAVEL_DEFINE_BINARY_OPERATOR(>=, ge)
RAVEL_DEFINE_BINARY_OPERATOR(==, eq)
RAVEL_DEFINE_BINARY_OPERATOR(!=, ne)
#undef RAVEL_DEFINE_BINARY_OPERATOR

}  // namespace ravel
