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

Space simplify(int32_t rank, const int64_t* shape, uint32_t reduce_axes,
               const std::vector<const validate::View*>& views, Order order) {
  Space s;
  s.views.resize(views.size());
  for (size_t k = 0; k < views.size(); ++k) {
    s.views[k].empty = views[k]->empty;
    s.views[k].dtype = views[k]->dtype;
    s.views[k].offset = views[k]->offset;
  }
  const size_t out = views.size() - 1;
  bool zero_reduced = false;
  for (int pass = 0; pass < 2; ++pass)
    for (int32_t d = 0; d < rank; ++d) {
      const bool red = (reduce_axes >> d) & 1u;
      if (order == Order::KeptFirst && red != (pass == 1)) continue;
      if (order == Order::Original && pass == 1) break;
      (red ? s.n_red : s.n_out) *= shape[d];
      if (shape[d] == 1) continue;  // index always 0; non-empty views are valid there
      if (shape[d] == 0 && red) {   // one reduced axis of extent 0 stands for all (below)
        zero_reduced = true;
        continue;
      }
      s.extent.push_back(shape[d]);
      s.reduced.push_back(red);
      for (size_t k = 0; k < views.size(); ++k) {
        s.views[k].stride.push_back(k == out && red ? 0 : views[k]->stride[d]);
        s.views[k].lo.push_back(k == out ? 0 : views[k]->lo[d]);
        s.views[k].hi.push_back(k == out ? shape[d] : views[k]->hi[d]);
      }
    }
  if (zero_reduced) {  // nothing to combine: the reduced axes carry no information
    for (size_t d = s.extent.size(); d-- > 0;) {
      if (!s.reduced[d]) continue;
      s.extent.erase(s.extent.begin() + d);
      s.reduced.erase(s.reduced.begin() + d);
      for (SpaceView& v : s.views)
        v.stride.erase(v.stride.begin() + d), v.lo.erase(v.lo.begin() + d), v.hi.erase(v.hi.begin() + d);
    }
    s.extent.push_back(0);
    s.reduced.push_back(true);
    for (SpaceView& v : s.views) v.stride.push_back(0), v.lo.push_back(0), v.hi.push_back(0);
  }
  // Merge axis d into d-1 where every view walks the pair densely (Note [Space simplification]).
  for (size_t d = s.extent.size(); d-- > 1;) {
    if (s.reduced[d] != s.reduced[d - 1] || s.extent[d] == 0 || s.extent[d - 1] == 0) continue;
    bool ok = true;
    for (const SpaceView& v : s.views)
      if (!v.empty && (v.stride[d - 1] != v.stride[d] * s.extent[d] || !v.full(d, s.extent[d]) ||
                       !v.full(d - 1, s.extent[d - 1])))
        ok = false;
    if (!ok) continue;
    const int64_t merged = s.extent[d - 1] * s.extent[d];
    s.extent[d - 1] = merged;
    s.extent.erase(s.extent.begin() + d);
    s.reduced.erase(s.reduced.begin() + d);
    for (SpaceView& v : s.views) {
      v.stride[d - 1] = v.stride[d];
      v.stride.erase(v.stride.begin() + d);
      v.lo[d - 1] = 0;
      v.hi[d - 1] = merged;
      v.lo.erase(v.lo.begin() + d);
      v.hi.erase(v.hi.begin() + d);
    }
  }
  s.wide = !fits_32(s);
  return s;
}

Space simplify(const validate::Program& p, Order order) {
  std::vector<const validate::View*> views;
  for (const validate::View& v : p.inputs) views.push_back(&v);
  views.push_back(&p.out);
  return simplify(p.rank, p.shape, p.reduce_axes, views, order);
}

}  // namespace rvl::lower
