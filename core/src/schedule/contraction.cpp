#include "schedule/contraction.hpp"

#include "schedule/kernel_builder.hpp"

namespace ravel::detail {

Shape epilogue_shape(const ContractionPlan& p, const Node& reduce) {
  Shape s;
  for (int64_t b : p.batch) s.push_back(reduce.shape[b]);
  s.push_back(p.m_axis >= 0 ? reduce.shape[p.m_axis] : 1);
  s.push_back(p.n_axis >= 0 ? reduce.shape[p.n_axis] : 1);
  return s;
}

std::optional<ContractionPlan> match_contraction(const Node& reduce) {
  if (reduce.kind != NodeKind::Reduce || reduce.reduce != ReduceOp::Sum) return std::nullopt;
  if (__builtin_popcount(reduce.axes) != 1) return std::nullopt;
  const NodePtr& mul = reduce.srcs[0];
  if (mul->kind != NodeKind::Alu || mul->alu != AluOp::MUL || mul->buffer) return std::nullopt;
  ContractionPlan p;
  p.x = mul->srcs[0];
  p.y = mul->srcs[1];
  p.r = __builtin_ctz(reduce.axes);
  Source sx = resolve(p.x), sy = resolve(p.y);
  if (sx.view.has_mask() || sy.view.has_mask()) return std::nullopt;
  const Shape& s = mul->shape;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    if (d == p.r) continue;
    bool vx = sx.view.strides[d] != 0 && s[d] > 1, vy = sy.view.strides[d] != 0 && s[d] > 1;
    if (vx && !vy) {
      if (p.m_axis >= 0) return std::nullopt;
      p.m_axis = d;
    } else if (vy && !vx) {
      if (p.n_axis >= 0) return std::nullopt;
      p.n_axis = d;
    } else {
      p.batch.push_back(d);
    }
  }
  // Canonical order: m before n, so that C's [.., m, n] iteration follows the node's layout and
  // an epilogue can run over it (x * y is commutative; swapping the operands transposes C).
  if (p.m_axis >= 0 && p.n_axis >= 0 && p.m_axis > p.n_axis) {
    std::swap(p.x, p.y);
    std::swap(p.m_axis, p.n_axis);
  }
  return p;
}

rvl_contraction lower_contraction(const ContractionPlan& p, const Node& reduce, const Node& out) {
  Source sx = resolve(p.x), sy = resolve(p.y);
  const Shape& s = sx.view.shape;
  const auto out_strides = StridedView::contiguous_strides(reduce.shape);
  auto stride = [](const std::vector<int64_t>& st, int64_t axis) { return axis >= 0 ? st[axis] : 0; };
  auto extent = [&](int64_t axis) { return axis >= 0 ? s[axis] : 1; };

  rvl_contraction c{};
  c.struct_size = sizeof(rvl_contraction);
  c.dtype = static_cast<int32_t>(reduce.dtype);
  c.batch_rank = static_cast<int32_t>(p.batch.size());
  c.m = extent(p.m_axis);
  c.n = extent(p.n_axis);
  c.k = s[p.r];
  // Operand views are [batch..., row, col]; see rvl_contraction. Buffer handles are bound later.
  auto operand = [&](DType dtype, const std::vector<int64_t>& st, int64_t offset, int64_t row, int64_t col,
                     int64_t rows, int64_t cols) {
    const size_t nb = p.batch.size();
    StridedView v{Shape(nb + 2), std::vector<int64_t>(nb + 2), offset, {}};
    for (size_t b = 0; b < nb; ++b) v.shape[b] = s[p.batch[b]], v.strides[b] = st[p.batch[b]];
    v.shape[nb] = rows, v.strides[nb] = row;
    v.shape[nb + 1] = cols, v.strides[nb + 1] = col;
    return make_operand(dtype, v);
  };
  c.a = operand(sx.base->dtype, sx.view.strides, sx.view.offset, stride(sx.view.strides, p.m_axis),
                sx.view.strides[p.r], c.m, c.k);
  c.b = operand(sy.base->dtype, sy.view.strides, sy.view.offset, sy.view.strides[p.r],
                stride(sy.view.strides, p.n_axis), c.k, c.n);
  c.c = operand(out.dtype, out_strides, 0, stride(out_strides, p.m_axis), stride(out_strides, p.n_axis), c.m, c.n);
  for (size_t b = 0; b < p.batch.size(); ++b) c.batch_shape[b] = s[p.batch[b]];
  return c;
}

}  // namespace ravel::detail
