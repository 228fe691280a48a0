#include <ravel/lowering/space.hpp>

#include <cstdlib>

namespace rvl::lower {

SpaceView SpaceView::of(const validate::View& v, size_t rank) {
  SpaceView s;
  s.empty = v.empty;
  s.dtype = v.dtype;
  s.offset = v.offset;
  s.stride.assign(v.stride, v.stride + rank);
  s.lo.assign(v.lo, v.lo + rank);
  s.hi.assign(v.hi, v.hi + rank);
  return s;
}

bool SpaceView::masked(const std::vector<int64_t>& extent) const {
  if (empty) return false;
  for (size_t d = 0; d < extent.size(); ++d)
    if (!full(d, extent[d])) return true;
  return false;
}

std::vector<size_t> Space::axes(bool reduced_axes) const {
  std::vector<size_t> out;
  for (size_t d = 0; d < extent.size(); ++d)
    if (reduced[d] == reduced_axes) out.push_back(d);
  return out;
}

std::vector<int64_t> Space::extents(const std::vector<size_t>& which) const {
  std::vector<int64_t> out;
  for (size_t d : which) out.push_back(extent[d]);
  return out;
}

long double reach(int64_t offset, const int64_t* stride, const std::vector<int64_t>& extent) {
  long double r = std::llabs(offset);
  for (size_t d = 0; d < extent.size(); ++d)
    r += (long double)std::llabs(stride[d]) * (long double)(extent[d] > 0 ? extent[d] - 1 : 0);
  return r;
}

bool fits_32(const Space& s) {
  int64_t n = 1;
  for (int64_t e : s.extent) {
    if (e > 0 && n > kNarrowLimit / e) return false;
    n *= e;
  }
  if (n >= kNarrowLimit) return false;
  for (const SpaceView& v : s.views)
    if (!v.empty && reach(v.offset, v.stride.data(), s.extent) >= (long double)kNarrowLimit)
      return false;
  return true;
}

namespace {

// Moves axis `from` of a view to position `to` (stride and validity range).
void move_axis(validate::View& v, int32_t to, int32_t from) {
  v.stride[to] = v.stride[from];
  v.lo[to] = v.lo[from];
  v.hi[to] = v.hi[from];
}

// Every non-empty view walks axes d-1, d densely and fully (Note [Space simplification]).
bool dense_pair(const FlatSpace& s, validate::View* const* views, size_t n_views, int32_t d) {
  for (size_t k = 0; k < n_views; ++k) {
    const validate::View& v = *views[k];
    if (v.empty) continue;
    int64_t step = 0;
    if (v.lo[d] != 0 || v.hi[d] != s.extent[d] || v.lo[d - 1] != 0 || v.hi[d - 1] != s.extent[d - 1] ||
        __builtin_mul_overflow(v.stride[d], s.extent[d], &step) || step != v.stride[d - 1])
      return false;
  }
  return true;
}

}  // namespace

FlatSpace simplify_in_place(int32_t rank, const int64_t* shape, uint32_t reduce_axes,
                            validate::View* const* views, size_t n_views, Order order, bool full_output) {
  FlatSpace s;
  // 1. The kept order of the original axes, extent-1 axes dropped (their index is always 0 and
  //    non-empty views are valid there); reduced axes of extent 0 collapse into one (below).
  int32_t from[RVL_MAX_RANK];
  bool zero_reduced = false;
  for (int pass = 0; pass < 2; ++pass)
    for (int32_t d = 0; d < rank; ++d) {
      const bool red = (reduce_axes >> d) & 1u;
      if (order == Order::KeptFirst && red != (pass == 1)) continue;
      if (order == Order::Original && pass == 1) break;
      (red ? s.n_red : s.n_out) *= shape[d];
      if (shape[d] == 1) continue;
      if (shape[d] == 0 && red) {
        zero_reduced = true;
        continue;
      }
      from[s.rank] = d;
      s.extent[s.rank] = shape[d];
      s.reduced[s.rank++] = red;
    }
  if (zero_reduced) {  // nothing to combine: the reduced axes carry no information
    int32_t n = 0;
    for (int32_t a = 0; a < s.rank; ++a)
      if (!s.reduced[a]) from[n] = from[a], s.extent[n] = s.extent[a], s.reduced[n++] = false;
    from[n] = -1, s.extent[n] = 0, s.reduced[n++] = true;
    s.rank = n;
  }
  // 2. Every view onto those axes, through a copy (the permutation may move an axis forward).
  const size_t out = n_views - 1;
  for (size_t k = 0; k < n_views; ++k) {
    validate::View& v = *views[k];
    const validate::View old = v;
    for (int32_t a = 0; a < s.rank; ++a) {
      const int32_t d = from[a];
      const bool whole = k == out || d < 0;  // the output is fully valid; zero axis: no range
      v.stride[a] = d < 0 || (k == out && s.reduced[a] && !full_output) ? 0 : old.stride[d];
      v.lo[a] = whole ? 0 : old.lo[d];
      v.hi[a] = whole ? s.extent[a] : old.hi[d];
    }
  }
  // 3. Merge axis d into d-1 where every view walks the pair densely, never across kinds.
  for (int32_t d = s.rank - 1; d >= 1; --d) {
    if (s.reduced[d] != s.reduced[d - 1] || s.extent[d] == 0 || s.extent[d - 1] == 0) continue;
    if (!dense_pair(s, views, n_views, d)) continue;
    s.extent[d - 1] *= s.extent[d];  // cannot overflow: validation bounded the element count
    for (size_t k = 0; k < n_views; ++k) {
      validate::View& v = *views[k];
      v.stride[d - 1] = v.stride[d];
      v.lo[d - 1] = 0;
      v.hi[d - 1] = s.extent[d - 1];
      for (int32_t e = d; e + 1 < s.rank; ++e) move_axis(v, e, e + 1);
    }
    for (int32_t e = d; e + 1 < s.rank; ++e) s.extent[e] = s.extent[e + 1], s.reduced[e] = s.reduced[e + 1];
    --s.rank;
  }
  return s;
}

Space simplify(int32_t rank, const int64_t* shape, uint32_t reduce_axes,
               const std::vector<const validate::View*>& views, Order order, bool full_output) {
  std::vector<validate::View> copies;
  std::vector<validate::View*> ptrs;
  copies.reserve(views.size());
  for (const validate::View* v : views) copies.push_back(*v);
  for (validate::View& v : copies) ptrs.push_back(&v);
  const FlatSpace f = simplify_in_place(rank, shape, reduce_axes, ptrs.data(), ptrs.size(), order, full_output);
  Space s;
  s.extent.assign(f.extent, f.extent + f.rank);
  s.reduced.assign(f.reduced, f.reduced + f.rank);
  s.n_out = f.n_out;
  s.n_red = f.n_red;
  for (const validate::View& v : copies) s.views.push_back(SpaceView::of(v, static_cast<size_t>(f.rank)));
  s.wide = !fits_32(s);
  return s;
}

Space simplify(const validate::Program& p, Order order) {
  std::vector<const validate::View*> views;
  for (const validate::View& v : p.inputs) views.push_back(&v);
  views.push_back(&p.out);
  return simplify(p.rank, p.shape, p.reduce_axes, views, order, p.n_epilogue > 0);
}

}  // namespace rvl::lower
