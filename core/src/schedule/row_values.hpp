// What the row planners share (row_chain.cpp, row_pattern.cpp): the rows of a reduction, which
// nodes may be their row values, and how a kernel reads them.
#pragma once

#include "schedule/fusion.hpp"

namespace ravel::detail {

// The rows of a reduction: its source's shape (the space), its reduced axes, its device.
struct Rows {
  Shape space;
  uint32_t axes = 0;  // reduced axes of extent > 1
  Device device;
  Shape reduced;
};

// `axes` without those of extent 1 in `space` (they change no row).
inline uint32_t real_axes(uint32_t axes, const Shape& space) {
  uint32_t m = 0;
  for (size_t d = 0; d < space.size(); ++d)
    if (((axes >> d) & 1u) && space[d] != 1) m |= 1u << d;
  return m;
}

inline Rows rows_of(const Node& r) {
  Rows rows{r.srcs[0]->shape, real_axes(r.axes, r.srcs[0]->shape), r.device, r.srcs[0]->shape};
  for (size_t d = 0; d < rows.reduced.size(); ++d)
    if ((r.axes >> d) & 1u) rows.reduced[d] = 1;
  return rows;
}

inline bool row_reduction(const Node& r, const Rows& rows) {
  return r.kind == NodeKind::Reduce && r.srcs[0]->shape == rows.space &&
         real_axes(r.axes, rows.space) == rows.axes && r.device == rows.device;
}

// A node whose value may be a row value of `rows` (the rest is checked by the caller).
inline bool row_shaped(const Node& b, const Rows& rows) {
  return row_reduction(b, rows) || (b.kind == NodeKind::Alu && b.shape == rows.reduced && b.device == rows.device);
}

// Whether `v` reads a node of the reduced shape broadcast over the rows.
inline bool broadcast_over_rows(const StridedView& v, const Rows& rows) {
  if (v.shape != rows.space || v.offset != 0 || v.has_mask()) return false;
  const std::vector<int64_t> cs = StridedView::contiguous_strides(rows.reduced);
  for (size_t d = 0; d < rows.space.size(); ++d)
    if (rows.space[d] != 1 && v.strides[d] != (((rows.axes >> d) & 1u) ? 0 : cs[d])) return false;
  return true;
}

// A read by a kernel's tree: the base, the view it is read through, whether in place.
struct Read {
  const Node* base;
  StridedView view;
  bool in_place;
};

}  // namespace ravel::detail
