// scatter, scatter_add, scatter_reduce: composites over comparisons, selections and reductions.
#include "tensor/scatter.hpp"

#include <cstdint>
#include <limits>

#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

// Note [Scatter as a one-hot reduction]
// No kernel addresses memory with a user's value (Note [Checked indices]), so a scatter is
// written the way gather is, from the output's side: with c an output position along axis d and
// j an entry of the index along d,
//     out[.., c, ..] = reduce_j { src[.., j, ..] : index[.., j, ..] == c }
// over a frame T = index.shape with c (size n = self.size(d)) inserted before j. Every operand of
// the comparison and the selection is a broadcast view of a small buffer (the index, src, self,
// ranges), so the fusion planner inlines them into the reduction's kernel: the n x m one-hot
// frame is computed, not stored, in the forward pass (tinygrad's scatter_reduce is the same
// construction). The gradient comes from the primitives' rules: src's is the cotangent gathered
// at index (the adjoint of the broadcast sums over c), and gather's gradient, built the same
// way, is a scatter-add. What it costs: index.numel() x n compare-selects per call, forward and
// backward (scatter_add of 4,000 entries into 1,000 positions allocates 48 KB forward and 64 KB
// for src's gradient: the 4 MB frame is not stored); kScatterMaxComparisons bounds it, with an
// error that names the sizes rather than a minutes-long kernel. When the index names whole rows
// (broadcast over the other axes: index_put, the segment-sum idiom) a float Replace/Sum/Mean is a
// GEMM instead (scatter_rows; Note [One-hot selections as a GEMM]). A dedicated scatter primitive (atomics, or a sort by destination) is the fast path
// this leaves for later.
//  - Replace (scatter): a position named by several j takes the last one: jmax = max_j {j :
//    hot}, then the one j == jmax is selected. Deterministic on every backend, and the gradient
//    reaches exactly the entry that was written.
//  - include_self: self's value joins the reduction as one more element (j = m), so amax/amin
//    split their gradient evenly over every tied element, self included, as PyTorch does.
//  - positions no index names keep self's value bit for bit (a final where on "touched").
namespace detail::scatter_impl {  // internal: not exported (core/exports.map)

constexpr int64_t kScatterMaxComparisons = int64_t{1} << 31;

// [0, n) as i64 along `axis` of `frame`, broadcast to the frame.
Tensor range_along(int64_t n, int64_t axis, const Shape& frame, const Device& dev) {
  Shape s(frame.size(), 1);
  s[static_cast<size_t>(axis)] = n;
  return Tensor::arange(0, static_cast<double>(n), 1, DType::I64, dev).reshape(s).expand(frame);
}

template <class T>
Tensor extreme_of(bool lowest, const Device& dev) {
  return Tensor::from_vector<T>({lowest ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max()}, {}, dev);
}

// The identity of a max (lowest = true) or min reduction in dtype dt, as a 0-d tensor.
Tensor extreme_value(DType dt, bool lowest, const Device& dev) {
  switch (dt) {
    case DType::F32: case DType::F64:
      return make_scalar(lowest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(),
                         dt, dev);
    case DType::I64: {
      const int64_t v = lowest ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
      return Tensor::from_vector<int64_t>({v}, {}, dev);
    }
    case DType::I32:
      return make_scalar(lowest ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max(), dt, dev);
    case DType::U8: return make_scalar(lowest ? 0 : 255, dt, dev);
    case DType::Bool: return make_scalar(lowest ? 0 : 1, dt, dev);
    case DType::F16: case DType::BF16:
      return make_scalar(lowest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(),
                         dt, dev);
    case DType::I8: return extreme_of<int8_t>(lowest, dev);
    case DType::I16: return extreme_of<int16_t>(lowest, dev);
    case DType::U16: return extreme_of<uint16_t>(lowest, dev);
    case DType::U32: return extreme_of<uint32_t>(lowest, dev);
    case DType::U64: return extreme_of<uint64_t>(lowest, dev);
  }
  return {};
}

// floor(a / b) for integers with b >= 1 (PyTorch's integer scatter mean rounds down).
Tensor floor_divide_positive(const Tensor& a, const Tensor& b) {
  Tensor q = a.idiv(b);
  Tensor inexact_negative = a.mod(b).ne(make_scalar(0, a.dtype(), a.device())).logical_and(a.lt(make_scalar(0, a.dtype(), a.device())));
  return q.sub(inexact_negative.cast(q.dtype()));
}

std::vector<std::pair<int64_t, int64_t>> leading_ranges(const Shape& s) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (int64_t v : s) r.emplace_back(0, v);
  return r;
}

// Checks of torch.scatter's arguments shared by scatter, scatter_add and scatter_reduce.
int64_t check_scatter_args(const Tensor& self, int64_t axis, const Tensor& index, const Tensor& src, const char* op) {
  check_defined(self, op);
  check_defined(index, op);
  check_defined(src, op);
  const int64_t d = normalize_axis(axis, self.ndim(), op);
  RAVEL_CHECK(!is_float(index.dtype()) && index.dtype() != DType::Bool, DTypeError, op,
              " expects an integer index tensor, got ", dtype_name(index.dtype()));
  RAVEL_CHECK(index.ndim() == self.ndim() && src.ndim() == self.ndim(), ShapeError, op, ": index ",
              shape_str(index.shape()), " and src ", shape_str(src.shape()), " must have as many axes as the input ",
              shape_str(self.shape()));
  for (int64_t k = 0; k < self.ndim(); ++k) {
    RAVEL_CHECK(index.shape()[k] <= src.shape()[k], ShapeError, op, ": index shape ", shape_str(index.shape()),
                " exceeds src shape ", shape_str(src.shape()), " on axis ", k);
    RAVEL_CHECK(k == d || index.shape()[k] <= self.shape()[k], ShapeError, op, ": index shape ",
                shape_str(index.shape()), " exceeds input shape ", shape_str(self.shape()), " on axis ", k,
                " (only axis ", d, ", the scatter axis, may be larger)");
  }
  const int64_t n = self.shape()[d];
  check_index_bounds(index, n, op, concat("axis ", d, " of the input ", shape_str(self.shape()), " (size ", n, ")"));
  return d;
}

// Whether the index names whole rows: the same entry along d for every position of the other
// axes (a broadcast index, stride 0 or size 1 there, as x.scatter_add(0, i.unsqueeze(1).expand(
// -1, k), src) and index_put make), covering the input on those axes.
bool names_whole_rows(const Tensor& index, int64_t d, const Shape& self_shape) {
  const std::vector<int64_t> strides = index.strides();
  for (size_t k = 0; k < self_shape.size(); ++k) {
    if (static_cast<int64_t>(k) == d) continue;
    if (index.shape()[k] != self_shape[k] || (index.shape()[k] != 1 && strides[k] != 0)) return false;
  }
  return true;
}

// The scatter of whole rows as one GEMM of the one-hot rows (Note [One-hot selections as a GEMM]):
// with the axis moved first, x [n, r] receives sel^T @ src [m, r], sel the one-hot of the entries
// (or of the last entry naming each row, for Replace).
Tensor scatter_rows(const Tensor& self, int64_t d, const Tensor& index, const Tensor& src, ScatterMode mode,
                    bool include_self) {
  const Shape& S = self.shape();
  const Shape& I = index.shape();
  const int64_t n = S[d], m = I[d], cols = self.numel() / n;
  const DType dt = self.dtype();
  const Device dev = self.device();
  std::vector<int64_t> order = {d}, inverse(S.size());
  for (int64_t k = 0; k < static_cast<int64_t>(S.size()); ++k)
    if (k != d) order.push_back(k);
  for (size_t k = 0; k < order.size(); ++k) inverse[static_cast<size_t>(order[k])] = static_cast<int64_t>(k);
  std::vector<std::pair<int64_t, int64_t>> first_row;
  for (size_t k = 0; k < I.size(); ++k) first_row.emplace_back(0, static_cast<int64_t>(k) == d ? m : 1);
  Tensor idx = index.shrink(first_row).reshape({1, m}).cast(DType::I64).expand({n, m});
  Tensor moved = self.permute(order);
  Tensor x = moved.reshape({n, cols});
  Tensor v = src.shrink(leading_ranges(I)).cast(dt).permute(order).reshape({m, cols});
  Tensor rows = Tensor::arange(0, static_cast<double>(n), 1, DType::I64, dev).reshape({n, 1}).expand({n, m});
  Tensor entries = Tensor::arange(0, static_cast<double>(m), 1, DType::I64, dev).reshape({1, m}).expand({n, m});
  Tensor hot = idx.eq(rows);  // [n, m]: entry j names row c
  Tensor last = Tensor::where(hot, entries, make_scalar(-1, DType::I64, dev)).max(Axes(1), true);  // [n, 1]
  Tensor touched = last.ge(make_scalar(0, DType::I64, dev));
  Tensor out;
  if (mode == ScatterMode::Replace) {
    out = onehot_matmul(entries.eq(last.expand({n, m})), v);
  } else {
    Tensor sum = onehot_matmul(hot, v);
    out = include_self ? x.add(sum) : sum;
    if (mode == ScatterMode::Mean) {
      Tensor count = hot.cast(DType::I64).sum(Axes(1), true);
      if (include_self) count = count.add(make_scalar(1, DType::I64, dev));
      out = out.div(count.maximum(make_scalar(1, DType::I64, dev)).cast(dt));
    }
  }
  return Tensor::where(touched, out, x).reshape(moved.shape()).permute(inverse);
}

}  // namespace detail::scatter_impl

namespace detail {

Tensor scatter_along(const Tensor& self, int64_t d, const Tensor& index, const Tensor& src, ScatterMode mode,
                     bool include_self, const char* op) {
  using namespace scatter_impl;
  const Shape& S = self.shape();
  const Shape& I = index.shape();
  if (index.numel() == 0) return self;
  const int64_t n = S[d], m = I[d];
  int64_t one_hot_elements = 0;
  if (is_float(self.dtype()) && self.numel() > 0 && !__builtin_mul_overflow(n, m, &one_hot_elements) &&
      one_hot_elements <= kOneHotGemmMaxElements &&
      (mode == ScatterMode::Replace || mode == ScatterMode::Sum || mode == ScatterMode::Mean) &&
      names_whole_rows(index, d, S))
    return scatter_rows(self, d, index, src, mode, include_self);
  int64_t comparisons = 0;
  RAVEL_CHECK(!__builtin_mul_overflow(index.numel(), n, &comparisons) && comparisons <= kScatterMaxComparisons,
              ValueError, op, ": the one-hot selection compares each of the ", index.numel(),
              " index entries with each of the ", n, " positions of axis ", d,
              ", more than the composite's limit of 2^31 comparisons (docs/ops.md, \"Indexing, scatter and "
              "sorting\"); split the index into parts and apply them one after the other");
  const DType dt = self.dtype();
  const Device dev = self.device();
  const bool with_self = include_self && mode != ScatterMode::Replace;
  const int64_t jax = d + 1;  // the index's axis d, after c is inserted before it
  Shape T = I;
  T[d] = m + (with_self ? 1 : 0);
  T.insert(T.begin() + d, n);
  Shape R = I;  // the result's frame: the index's shape with axis d of the input's size
  R[d] = n;

  Tensor idx = index.cast(DType::I64);
  Tensor vals = src.shrink(leading_ranges(I)).cast(dt);
  if (with_self) {  // one more j, named by no index: self's slot
    std::vector<std::pair<int64_t, int64_t>> w(I.size(), {0, 0});
    w[d] = {0, 1};
    idx = idx.pad(w, -1.0);
    vals = vals.pad(w);
  }
  Tensor hot = idx.unsqueeze(d).expand(T).eq(range_along(n, d, T, dev));
  Tensor src_t = vals.unsqueeze(d).expand(T);
  Tensor self_r = self.shrink(leading_ranges(R));

  Tensor red, touched;
  if (mode == ScatterMode::Replace) {
    Tensor j = range_along(m, jax, T, dev);
    Tensor last = Tensor::where(hot, j, make_scalar(-1, DType::I64, dev)).max(Axes(jax), true);
    Tensor chosen = j.eq(last.expand(T));
    red = Tensor::where(chosen, src_t, make_scalar(0, dt, dev)).sum(Axes(jax)).cast(dt);
    touched = last.squeeze(jax).ge(make_scalar(0, DType::I64, dev));
  } else {
    Tensor identity;
    switch (mode) {
      case ScatterMode::Sum: case ScatterMode::Mean: identity = make_scalar(0, dt, dev); break;
      case ScatterMode::Prod: identity = make_scalar(1, dt, dev); break;
      case ScatterMode::Amax: identity = extreme_value(dt, true, dev); break;
      case ScatterMode::Amin: identity = extreme_value(dt, false, dev); break;
      case ScatterMode::Replace: break;
    }
    Tensor elems = Tensor::where(hot, src_t, identity);
    if (with_self) {
      Tensor slot = range_along(m + 1, jax, T, dev).eq(make_scalar(static_cast<double>(m), DType::I64, dev));
      elems = Tensor::where(slot, self_r.unsqueeze(jax).expand(T), elems);
    }
    switch (mode) {
      case ScatterMode::Sum: case ScatterMode::Mean: red = elems.sum(Axes(jax)); break;
      case ScatterMode::Prod: red = elems.prod(Axes(jax)); break;
      case ScatterMode::Amax: red = elems.max(Axes(jax)); break;
      case ScatterMode::Amin: red = elems.min(Axes(jax)); break;
      case ScatterMode::Replace: break;
    }
    Tensor count = hot.cast(DType::I64).sum(Axes(jax));  // entries received, self not counted
    touched = count.gt(make_scalar(0, DType::I64, dev));
    if (mode == ScatterMode::Mean) {
      if (with_self) count = count.add(make_scalar(1, DType::I64, dev));
      // At least 1 also where nothing arrived: those positions keep self, and a 0/0 there would
      // send NaN back through the unselected branch of the final where's gradient.
      count = count.maximum(make_scalar(1, DType::I64, dev));
      red = is_float(dt) ? red.div(count.cast(dt)) : floor_divide_positive(red, count.cast(red.dtype()));
    }
    red = red.cast(dt);
  }
  if (R != S) {
    std::vector<std::pair<int64_t, int64_t>> w;
    for (size_t k = 0; k < S.size(); ++k) w.emplace_back(0, S[k] - R[k]);
    red = red.pad(w);
    touched = touched.pad(w);  // false: positions no index can reach
  }
  return Tensor::where(touched, red, self);
}

}  // namespace detail

Tensor Tensor::scatter(int64_t axis, const Tensor& index, const Tensor& src) const {
  const int64_t d = scatter_impl::check_scatter_args(*this, axis, index, src, "scatter");
  return scatter_along(*this, d, index, src, ScatterMode::Replace, false, "scatter");
}

Tensor Tensor::scatter(int64_t axis, const Tensor& index, double value) const {
  check_defined(*this, "scatter");
  check_defined(index, "scatter");
  Tensor src = make_scalar(value, dtype(), device()).expand(index.shape());
  return scatter(axis, index, src);
}

Tensor Tensor::scatter_add(int64_t axis, const Tensor& index, const Tensor& src) const {
  const int64_t d = scatter_impl::check_scatter_args(*this, axis, index, src, "scatter_add");
  return scatter_along(*this, d, index, src, ScatterMode::Sum, true, "scatter_add");
}

Tensor Tensor::scatter_reduce(int64_t axis, const Tensor& index, const Tensor& src, const std::string& reduce,
                              bool include_self) const {
  ScatterMode mode;
  if (reduce == "sum") mode = ScatterMode::Sum;
  else if (reduce == "prod") mode = ScatterMode::Prod;
  else if (reduce == "mean") mode = ScatterMode::Mean;
  else if (reduce == "amax") mode = ScatterMode::Amax;
  else if (reduce == "amin") mode = ScatterMode::Amin;
  else throw ValueError(concat("scatter_reduce: reduce must be one of \"sum\", \"prod\", \"mean\", \"amax\", \"amin\", got \"",
                               reduce, "\""));
  const int64_t d = scatter_impl::check_scatter_args(*this, axis, index, src, "scatter_reduce");
  return scatter_along(*this, d, index, src, mode, include_self, "scatter_reduce");
}

}  // namespace ravel
