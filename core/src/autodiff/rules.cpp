// One vector-Jacobian rule per primitive (the table in graph/ops.hpp, the reductions, and the
// movement ops), each a line or two of tensor ops. Composites (tanh, softmax, matmul, ...) have
// no rules: they are differentiated through the primitives they are made of.
#include "autodiff/rules.hpp"

#include <cmath>
#include <numeric>

#include "tensor/custom_vjp.hpp"
#include "tensor/internal.hpp"
#include "tensor/sharded.hpp"

namespace ravel::detail {

namespace {
constexpr double kLn2 = 0.6931471805599453;

Tensor T(const NodePtr& n) { return Tensor(n); }
Tensor c(const Tensor& like, double v) { return scalar_like(like, v); }

// Axis order that undoes `order`.
std::vector<int64_t> inverse(const std::vector<int64_t>& order) {
  std::vector<int64_t> inv(order.size());
  for (size_t i = 0; i < order.size(); ++i) inv[order[i]] = static_cast<int64_t>(i);
  return inv;
}

// Note [Cotangents of exactly one]
// The cotangent of a sum is ones_like(output) expanded (the Const 1 seen through a view), so the
// rule of y * r inside sum(y * r) made 1 * r: an elementwise kernel that wrote r's copy before
// the consumer (a convolution's weight-gradient contraction, which reads its operands in place)
// could read it (~0.55 ms of 4.4 at 128x32x14x14 -> 64: docs/performance.md §8, convfwd).
// g * x is x itself where g is that constant, unmasked, with x's dtype and shape: no node, no
// kernel. Exact: x * 1 == x bit for bit for every float, -0.0, infinities, subnormals (no Ravel
// device flushes f32 subnormals) and quiet NaNs with their payload and sign included; only a
// signalling NaN differs, which the multiply would have quieted and which is now kept as it
// was (as PyTorch's and JAX's gradients of a sum pass the other factor through).
bool is_exactly_one(const Tensor& g) {
  const Source s = resolve(g.node());
  if (s.base->kind != NodeKind::Const || s.view.has_mask()) return false;
  return is_float(g.dtype()) ? s.base->value.f == 1.0 : s.base->value.i == 1;
}
Tensor times(const Tensor& g, const Tensor& x) {
  if (g.dtype() == x.dtype() && g.shape() == x.shape() && is_exactly_one(g)) return x;
  return g * x;
}

std::vector<Tensor> alu_rule(const NodePtr& n, const Tensor& g) {
  const Tensor y = T(n);
  auto x = [&](int i) { return T(n->srcs[i]); };
  switch (n->alu) {
    case AluOp::NEG: return {g.neg()};
    case AluOp::RECIP: return {g.neg() * y * y};                      // d(1/x) = -1/x^2
    case AluOp::SQRT: return {g * (y * 2.0).recip()};                   // 1 / (2 sqrt x)
    case AluOp::EXP2: return {g * y * kLn2};                            // 2^x ln 2
    case AluOp::LOG2: return {g * (x(0) * kLn2).recip()};               // 1 / (x ln 2)
    case AluOp::SIN: return {g * x(0).cos()};
    case AluOp::TRUNC: return {Tensor::zeros_like(x(0))};               // flat almost everywhere
    case AluOp::CAST: return {is_float(x(0).dtype()) ? g.cast(x(0).dtype()) : Tensor()};
    case AluOp::ADD: return {g, g};
    case AluOp::MUL: return {times(g, x(1)), times(g, x(0))};  // Note [Cotangents of exactly one]
    case AluOp::MAX: {
      // Note [Gradient of max]: the larger input takes the gradient; on a tie each gets half
      // (so the sum of the two gradients is always g, as for max(x, x) = x).
      Tensor wx = Tensor::where(x(0).gt(x(1)), Tensor::ones_like(g), Tensor::where(x(0).eq(x(1)), Tensor::full_like(g, 0.5), Tensor::zeros_like(g)));
      return {g * wx, g * (c(wx, 1.0) - wx)};
    }
    case AluOp::MOD: return {g, g.neg() * x(0).idiv(x(1))};  // a - b trunc(a/b)
    case AluOp::WHERE: return {Tensor(), Tensor::where(x(0), g, Tensor::zeros_like(g)), Tensor::where(x(0), Tensor::zeros_like(g), g)};
    case AluOp::IDIV: case AluOp::CMPLT: case AluOp::CMPNE: case AluOp::AND: case AluOp::OR: case AluOp::XOR:
      return std::vector<Tensor>(n->srcs.size());  // piecewise constant or not float
    case AluOp::LOAD: case AluOp::CONST: case AluOp::ACC:
      throw InternalError("autodiff: graph node with kernel-only op " + std::string(alu_name(n->alu)));
  }
  return std::vector<Tensor>(n->srcs.size());
}

// Note [Gradient of prod]: d prod / dx_i = prod_{j != i} x_j, formed as such (the slice
// broadcast to [.., n(i), n(j)] with the diagonal set to 1, then a product over j) rather than as
// prod / x_i, so it is exact with one zero or several (as torch.prod and jax.numpy.prod), and its
// own derivative is again this rule, so second and higher orders are exact too. It costs n^2 per
// slice; above 2^24 such elements the gradient falls back to counting zeros: exact in first
// order with any number of zeros, but its second derivative misses the terms through a zero.
Tensor prod_grad(const Tensor& x, uint32_t mask, const Tensor& g) {
  const Shape& s = x.shape();
  std::vector<int64_t> order, kept_shape, red_shape;
  for (int64_t d = 0; d < x.ndim(); ++d)
    if (!(mask & (1u << d))) { order.push_back(d); kept_shape.push_back(s[d]); }
  for (int64_t d = 0; d < x.ndim(); ++d)
    if (mask & (1u << d)) { order.push_back(d); red_shape.push_back(s[d]); }
  int64_t n = 1, rest = 1;
  for (int64_t v : red_shape) n *= v;
  for (int64_t v : kept_shape) rest *= v;
  if (static_cast<double>(rest) * static_cast<double>(n) * static_cast<double>(n) <= double(1 << 24)) {
    Shape flat = kept_shape;
    flat.push_back(n);
    Tensor xp = x.permute(order).reshape(flat);  // [.., n]
    Shape sq = flat;
    sq.insert(sq.end() - 1, n);                   // [.., n(i), n(j)]
    Tensor r0 = Tensor::arange(0, static_cast<double>(n), 1, DType::I64, x.device());
    Tensor diag = r0.reshape({n, 1}).eq(r0.reshape({1, n}));
    Tensor others = Tensor::where(diag, Tensor::ones({}, x.dtype(), x.device()), xp.unsqueeze(-2).expand(sq))
                        .prod(-1);                // [.., n]: prod_{j != i} x_j
    Shape gs = kept_shape;
    gs.push_back(1);
    Tensor gi = g.reshape(gs) * others;          // [.., n]
    Shape back = kept_shape;
    back.insert(back.end(), red_shape.begin(), red_shape.end());
    return gi.reshape(back).permute(inverse(order));
  }
  Tensor zero = Tensor::zeros({}, x.dtype(), x.device()), one = Tensor::ones({}, x.dtype(), x.device());
  Tensor z = x.eq(zero);
  Tensor xs = Tensor::where(z, one, x);
  Tensor p = make_reduce(ReduceOp::Prod, xs, mask).expand(s);
  Tensor nz = make_reduce(ReduceOp::Sum, z.cast(x.dtype()), mask).expand(s);
  Tensor gx = Tensor::where(nz.eq(zero), p / xs, Tensor::where(z.logical_and(nz.eq(one)), p, zero.expand(s)));
  return g.expand(s) * gx;
}

std::vector<Tensor> reduce_rule(const NodePtr& n, const Tensor& g) {
  const Tensor x = T(n->srcs[0]), y = T(n);
  const Shape& s = x.shape();
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < x.ndim(); ++d)
    if (n->axes & (1u << d)) axes.push_back(d);
  switch (n->reduce) {
    case ReduceOp::Sum: return {g.expand(s)};
    case ReduceOp::Prod: return {prod_grad(x, n->axes, g)};
    case ReduceOp::Max: {
      // Note [Gradient of max]: ties share the gradient equally among the maxima.
      Tensor hit = x.eq(y.expand(s)).cast(g.dtype());
      Tensor count = make_reduce(ReduceOp::Sum, hit, n->axes);
      return {hit * (g / count).expand(s)};
    }
    case ReduceOp::LogSumExp: {
      // Note [Gradient of logsumexp]: d lse = e^(x - lse) g, the softmax over the reduced axes.
      // Taken as p / sum(p) with p = e^(x - lse) and lse under stop_gradient: mathematically the
      // same (sum(p) = 1, and the quotient does not depend on the shift, so its derivative
      // through lse is 0, as in Note [Shift without gradient]), but exact where lse is rounded
      // far from the true value (|x| near FLT_MAX, lse in the input's dtype: the rounding is a
      // common factor of p that the quotient cancels). p <= 1 (rounding is monotone, so lse >=
      // max x), so nothing overflows, at any order: higher derivatives differentiate this rule.
      // A widening reduction (f32 x, f64 lse): x - lse in f64, the rest in x's dtype.
      Tensor p = (x.cast(y.dtype()) - y.detach().expand(s)).cast(x.dtype()).exp();
      return {p / make_reduce(ReduceOp::Sum, p, n->axes).expand(s) * g.cast(x.dtype()).expand(s)};
    }
  }
  return {Tensor()};
}

std::vector<Tensor> movement_rule(const NodePtr& n, const Tensor& g) {
  const Shape& ps = n->parent->shape;
  const auto& a = n->move_args;
  switch (n->move) {
    case MoveOp::Reshape: return {g.reshape(ps)};
    case MoveOp::Permute: return {g.permute(inverse(a))};
    case MoveOp::Expand: {
      std::vector<int64_t> grown;
      for (size_t d = 0; d < ps.size(); ++d)
        if (ps[d] != n->shape[d]) grown.push_back(static_cast<int64_t>(d));
      return {grown.empty() ? g : g.sum(Axes(grown), true)};
    }
    case MoveOp::Pad: {  // the adjoint of zero padding cuts the padding away
      std::vector<std::pair<int64_t, int64_t>> r;
      for (size_t d = 0; d < ps.size(); ++d) r.emplace_back(a[2 * d], a[2 * d] + ps[d]);
      return {g.shrink(r)};
    }
    case MoveOp::Shrink: {  // and the adjoint of a cut is zero padding
      std::vector<std::pair<int64_t, int64_t>> w;
      for (size_t d = 0; d < ps.size(); ++d) w.emplace_back(a[2 * d], ps[d] - a[2 * d + 1]);
      return {g.pad(w)};
    }
    case MoveOp::Flip: {
      std::vector<int64_t> axes;
      for (size_t d = 0; d < ps.size(); ++d)
        if (a[0] & (int64_t{1} << d)) axes.push_back(static_cast<int64_t>(d));
      return {g.flip(Axes(axes))};
    }
    case MoveOp::Subsample: {  // scatter every step-th element back, zeros between
      const int64_t axis = a[0], step = a[1], m = n->shape[axis];
      std::vector<std::pair<int64_t, int64_t>> w(ps.size() + 1, {0, 0});
      w[axis + 1] = {0, step - 1};
      Shape spread = ps;
      spread[axis] = m * step;
      std::vector<std::pair<int64_t, int64_t>> cut;
      for (size_t d = 0; d < ps.size(); ++d) cut.emplace_back(0, ps[d]);
      return {g.unsqueeze(axis + 1).pad(w).reshape(spread).shrink(cut)};
    }
    case MoveOp::Identity: return {g};
    case MoveOp::StopGradient: return {};
    case MoveOp::Custom: return apply_custom_vjp(n, g);  // Note [Custom derivatives]
  }
  return {};
}
}  // namespace

std::vector<NodePtr> diff_inputs(const Node& n) {
  if (n.detached) return {};  // made under a NoGradGuard
  switch (n.kind) {
    case NodeKind::Alu: case NodeKind::Reduce: case NodeKind::Copy: case NodeKind::Transfer:
    case NodeKind::Multi: return n.srcs;
    case NodeKind::View:
      if (n.move == MoveOp::Custom) return n.custom_inputs;
      return n.move == MoveOp::StopGradient ? std::vector<NodePtr>{} : std::vector<NodePtr>{n.parent};
    case NodeKind::Buffer:  // a collective's result may carry its rule (Note [A derivative on the result's own node])
      return n.custom_rule ? n.custom_inputs : std::vector<NodePtr>{};
    case NodeKind::Const: return {};
  }
  return {};
}

std::vector<Tensor> vjp_rule(const NodePtr& n, const Tensor& g) {
  switch (n->kind) {
    case NodeKind::Alu: return alu_rule(n, g);
    case NodeKind::Reduce: return reduce_rule(n, g);
    case NodeKind::Copy: return {g};
    case NodeKind::Transfer: return {g.to(n->srcs[0]->device)};  // the gradient goes back
    case NodeKind::Multi: return split_cotangent(n, g);  // Note [Sharded gradients]
    case NodeKind::View: return movement_rule(n, g);
    case NodeKind::Buffer: return n->custom_rule ? apply_custom_vjp(n, g) : std::vector<Tensor>{};
    case NodeKind::Const: return {};
  }
  return {};
}

}  // namespace ravel::detail
