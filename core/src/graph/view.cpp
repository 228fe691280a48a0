#include "graph/view.hpp"

#include <algorithm>
#include <sstream>

#include "graph/invariant.hpp"
#include "ravel/error.hpp"

namespace ravel::detail {

namespace {
std::string list_str(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}
}  // namespace

int64_t checked_numel(const Shape& shape, const char* op) {
  for (int64_t s : shape)
    RAVEL_CHECK(s >= 0, ShapeError, op, ": shape ", list_str(shape), " has a negative size ", s,
                " (expected sizes >= 0)");
  for (int64_t s : shape)
    if (s == 0) return 0;  // {0, 1<<40, 1<<40} is a legal empty tensor
  int64_t n = 1;
  for (int64_t s : shape)
    RAVEL_CHECK(!__builtin_mul_overflow(n, s, &n), ShapeError, op, ": shape ", list_str(shape),
                " has more elements than fit in int64 (at most 2^63 - 1)");
  return n;
}

bool fits_bytes(const Shape& shape, int64_t elem_size) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 0) return false;
    if (s == 0) return true;
  }
  for (int64_t s : shape)
    if (__builtin_mul_overflow(n, s, &n)) return false;
  return !__builtin_mul_overflow(n, elem_size, &n);
}

int64_t checked_bytes(const Shape& shape, int64_t elem_size, const char* op) {
  int64_t n = checked_numel(shape, op), bytes = 0;
  RAVEL_CHECK(!__builtin_mul_overflow(n, elem_size, &bytes), ShapeError, op, ": shape ", list_str(shape), " of ",
              elem_size, "-byte elements needs more bytes than fit in int64 (", n, " elements; at most 2^63 - 1 bytes)");
  return bytes;
}

std::vector<int64_t> StridedView::contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    // Cannot overflow for a checked shape (Note [Checked sizes]); wrap rather than UB otherwise.
    s = static_cast<int64_t>(static_cast<uint64_t>(s) * static_cast<uint64_t>(std::max<int64_t>(shape[d], 1)));
  }
  return strides;
}

StridedView StridedView::contiguous(const Shape& shape) { return StridedView{shape, contiguous_strides(shape), 0, {}}; }

int64_t StridedView::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

bool StridedView::is_contiguous() const {
  if (mask || offset != 0) return false;
  // contiguous_strides(shape), computed in place: every view made asks this (no allocation).
  uint64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != static_cast<int64_t>(expected)) return false;
    expected *= static_cast<uint64_t>(std::max<int64_t>(shape[d], 1));
  }
  return true;
}

StridedView& StridedView::normalize() {
  if (!mask) return *this;
  bool full = true, empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    auto& [lo, hi] = (*mask)[d];
    lo = std::clamp<int64_t>(lo, 0, shape[d]);
    hi = std::clamp<int64_t>(hi, 0, shape[d]);
    if (lo >= hi) empty = true;
    if (lo != 0 || hi != shape[d]) full = false;
  }
  if (empty)  // canonical form of "nothing valid": every empty range is (0, 0)
    for (auto& r : *mask)
      if (r.first >= r.second) r = {0, 0};
  if (full) mask.reset();
  return *this;
}

// Reshape without a copy, following NumPy's _attempt_nocopy_reshape: group old and new axes
// into runs with equal products; a run of several old axes must be mutually contiguous.
std::optional<StridedView> StridedView::reshape(const Shape& new_shape) const {
  int64_t n = 1;
  for (int64_t s : new_shape) n *= s;
  RAVEL_INVARIANT(n == numel(), "a reshape keeps the element count (callers check it)");
  if (n == 0) return StridedView::contiguous(new_shape);  // nothing is ever read
  if (mask) {
    // A masked view only reshapes by adding or removing size-1 axes (the mask stays per axis).
    std::vector<int64_t> old_axes, new_axes;
    for (int64_t d = 0; d < rank(); ++d) {
      if (shape[d] != 1) old_axes.push_back(d);
      else if (valid(d).first >= valid(d).second) return std::nullopt;  // rare: keep it simple
    }
    for (size_t d = 0; d < new_shape.size(); ++d)
      if (new_shape[d] != 1) new_axes.push_back(static_cast<int64_t>(d));
    if (old_axes.size() != new_axes.size()) return std::nullopt;
    StridedView v{new_shape, std::vector<int64_t>(new_shape.size(), 0), offset,
           std::vector<Range>(new_shape.size(), Range{0, 1})};
    for (size_t j = 0; j < old_axes.size(); ++j) {
      if (shape[old_axes[j]] != new_shape[new_axes[j]]) return std::nullopt;
      v.strides[new_axes[j]] = strides[old_axes[j]];
      (*v.mask)[new_axes[j]] = valid(old_axes[j]);
    }
    return v.normalize();
  }
  std::vector<int64_t> od, os;  // old dims and strides without size-1 axes
  od.reserve(shape.size());
  os.reserve(shape.size());
  for (int64_t d = 0; d < rank(); ++d)
    if (shape[d] != 1) od.push_back(shape[d]), os.push_back(strides[d]);
  StridedView v{new_shape, std::vector<int64_t>(new_shape.size(), 0), offset, {}};
  size_t oi = 0, ni = 0;
  const size_t on = od.size(), nn = new_shape.size();
  while (ni < nn && oi < on) {
    if (new_shape[ni] == 1) { ++ni; continue; }
    int64_t np = new_shape[ni], op = od[oi];
    size_t nj = ni + 1, oj = oi + 1;
    while (np != op) {
      if (np < op) np *= new_shape[nj++];
      else op *= od[oj++];
    }
    for (size_t ok = oi; ok + 1 < oj; ++ok)
      if (os[ok] != od[ok + 1] * os[ok + 1]) return std::nullopt;
    v.strides[nj - 1] = os[oj - 1];
    for (size_t nk = nj - 1; nk > ni; --nk) v.strides[nk - 1] = v.strides[nk] * new_shape[nk];
    ni = nj;
    oi = oj;
  }
  return v;
}

StridedView StridedView::permute(const std::vector<int64_t>& order) const {
  StridedView v{Shape(order.size()), std::vector<int64_t>(order.size()), offset, {}};
  if (mask) v.mask = std::vector<Range>(order.size());
  for (size_t d = 0; d < order.size(); ++d) {
    v.shape[d] = shape[order[d]];
    v.strides[d] = strides[order[d]];
    if (mask) (*v.mask)[d] = (*mask)[order[d]];
  }
  return v;
}

StridedView StridedView::expand(const Shape& new_shape) const {
  StridedView v = *this;
  for (size_t d = 0; d < new_shape.size(); ++d) {
    if (shape[d] == new_shape[d]) continue;
    RAVEL_INVARIANT(shape[d] == 1, "only size-1 axes expand (callers check it)");
    v.shape[d] = new_shape[d];
    v.strides[d] = 0;
    if (v.mask) {
      auto& r = (*v.mask)[d];
      r = r.first < r.second ? Range{0, new_shape[d]} : Range{0, 0};
    }
  }
  return v.normalize();
}

StridedView StridedView::pad(const std::vector<Range>& widths) const {
  StridedView v = *this;
  std::vector<Range> m(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    auto [b, a] = widths[d];
    auto [lo, hi] = valid(static_cast<int64_t>(d));
    m[d] = {lo + b, hi + b};
    v.shape[d] += b + a;
    v.offset -= b * strides[d];
  }
  v.mask = std::move(m);
  return v.normalize();
}

StridedView StridedView::shrink(const std::vector<Range>& ranges) const {
  StridedView v = *this;
  std::optional<std::vector<Range>> m;
  if (mask) m = std::vector<Range>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    auto [lo, hi] = ranges[d];
    v.offset += lo * strides[d];
    v.shape[d] = hi - lo;
    if (m) (*m)[d] = {(*mask)[d].first - lo, (*mask)[d].second - lo};
  }
  v.mask = std::move(m);
  return v.normalize();
}

StridedView StridedView::flip(const std::vector<bool>& axes) const {
  StridedView v = *this;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!axes[d] || shape[d] == 0) continue;
    v.offset += (shape[d] - 1) * strides[d];
    v.strides[d] = -strides[d];
    if (v.mask) {
      auto [lo, hi] = (*mask)[d];
      (*v.mask)[d] = {shape[d] - hi, shape[d] - lo};
    }
  }
  return v.normalize();
}

StridedView StridedView::subsample(int64_t axis, int64_t step) const {
  // New index j reads old index j * step; it is valid iff lo <= j * step < hi, i.e.
  // ceil(lo / step) <= j < ceil(hi / step).
  StridedView v = *this;
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  v.shape[axis] = ceil_div(shape[axis], step);
  v.strides[axis] = strides[axis] * step;
  if (v.mask) {
    auto [lo, hi] = (*mask)[axis];
    (*v.mask)[axis] = {ceil_div(lo, step), ceil_div(hi, step)};
  }
  return v.normalize();
}

std::string StridedView::str() const {
  std::ostringstream o;
  auto list = [&](const std::vector<int64_t>& xs) {
    o << "(";
    for (size_t i = 0; i < xs.size(); ++i) o << (i ? "," : "") << xs[i];
    o << ")";
  };
  o << "View(shape=";
  list(shape);
  o << ", strides=";
  list(strides);
  o << ", offset=" << offset;
  if (mask) {
    o << ", mask=(";
    for (size_t d = 0; d < mask->size(); ++d)
      o << (d ? "," : "") << "[" << (*mask)[d].first << "," << (*mask)[d].second << ")";
    o << ")";
  }
  o << ")";
  return o.str();
}

}  // namespace ravel::detail
