// StridedView — how a tensor's elements sit in its base node's contiguous buffer (the view
// descriptor of a View node; named so as not to be confused with the SDK's rvl::validate::View).
//
// Note [Views]
// A StridedView maps an index i (over `shape`) to the element `offset + sum_d i[d] * strides[d]`
// of the base buffer, and says whether the element is real data or padding: it is valid iff
// mask[d].first <= i[d] < mask[d].second on every axis, and padding reads as 0. Every movement op
// (reshape, permute, expand, pad, shrink, flip, subsample) is a pure function on views, so a
// chain of movement ops costs nothing until a kernel reads through the final view. Only reshape
// can fail to compose (e.g. merging a permuted pair of axes); it then returns nullopt and the
// tensor layer inserts a copy (see Tensor::reshape). Invariants: shape, strides and mask have the
// same rank; `mask` is absent when every element is valid (normalize() restores that), and an
// empty valid range is stored as (0, 0).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ravel::detail {

using Shape = std::vector<int64_t>;
using Range = std::pair<int64_t, int64_t>;  // [first, second)

// Note [Checked sizes]
// Every shape a node can have passes through checked_numel/checked_bytes when the node is made
// (creation, make_view for every movement op, make_alu for casts, the Copy and Transfer nodes
// that keep a checked shape), so elsewhere numel() * dtype_size cannot overflow: products use
// __builtin_mul_overflow here, and a size that does not fit int64 is a ShapeError naming `op`
// and the shape. Negative sizes are refused by the op that takes them (ValueError in creation,
// ShapeError in reshape/expand), before they reach here; here they are a ShapeError too.
// The number of elements of `shape`.
int64_t checked_numel(const Shape& shape, const char* op);
// The bytes a contiguous buffer of `shape` with `elem_size`-byte elements needs (int64).
int64_t checked_bytes(const Shape& shape, int64_t elem_size, const char* op);
// Whether checked_bytes would succeed (for ops that word the error themselves).
bool fits_bytes(const Shape& shape, int64_t elem_size);

struct StridedView {
  Shape shape;
  std::vector<int64_t> strides;  // in elements; 0 (broadcast) and negative (flip) allowed
  int64_t offset = 0;            // in elements; may be outside the buffer if that part is padding
  std::optional<std::vector<Range>> mask;

  static StridedView contiguous(const Shape& shape);
  static std::vector<int64_t> contiguous_strides(const Shape& shape);

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  bool is_contiguous() const;  // row-major over the whole base, offset 0, no mask
  bool has_mask() const { return mask.has_value(); }
  Range valid(int64_t axis) const { return mask ? (*mask)[axis] : Range{0, shape[axis]}; }

  // Composition rules; each precondition is checked by the tensor layer before calling.
  std::optional<StridedView> reshape(const Shape& new_shape) const;
  StridedView permute(const std::vector<int64_t>& order) const;
  StridedView expand(const Shape& new_shape) const;        // only size-1 axes grow
  StridedView pad(const std::vector<Range>& widths) const;  // (before, after) per axis, >= 0
  StridedView shrink(const std::vector<Range>& ranges) const;  // 0 <= lo <= hi <= size per axis
  StridedView flip(const std::vector<bool>& axes) const;
  StridedView subsample(int64_t axis, int64_t step) const;  // keep every step-th element, step >= 1

  bool operator==(const StridedView&) const = default;
  std::string str() const;

 private:
  StridedView& normalize();
};

}  // namespace ravel::detail
