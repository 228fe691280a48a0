// Sliding windows over the trailing axes of a tensor, as a zero-copy view, and its adjoint:
// the shared core of convolution and pooling (Note [Convolution as a window view], window.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ravel/tensor.hpp"

namespace ravel::detail::window {

// The geometry of windows over the last kernel.size() axes: window j of an axis starts at
// j * stride and takes kernel elements dilation apart; `out` windows per axis.
struct Geometry {
  std::vector<int64_t> kernel, stride, dilation, out;
  size_t rank() const { return kernel.size(); }
  int64_t taps() const;  // the number of elements in one window
};

// One value broadcast to `n` axes, or one per axis; ValueError naming `what` and `op` otherwise,
// or when a value is below `min`.
std::vector<int64_t> per_axis(const std::vector<int64_t>& v, size_t n, int64_t min, const char* what,
                              const std::string& op);

// x [lead..., in...] -> [lead..., out..., kernel...]: element [.., o.., t..] is x[.., o*stride +
// t*dilation, ..]. Requires (out - 1) * stride + (kernel - 1) * dilation < in on every axis.
// Differentiable (to any order): its adjoint is `scatter_windows`.
Tensor view(const Tensor& x, const Geometry& g);

// The adjoint of view(): windows g [lead..., out..., kernel...] summed back into a tensor of the
// input's trailing sizes `in` (col2im), built from pad/shrink/reshape and adds.
Tensor scatter_windows(const Tensor& g, const Geometry& geo, const std::vector<int64_t>& in);

// One tap's share of the adjoint: part [lead..., out...] (the cotangent of the window elements at
// tap t, a multi-index over the kernel) placed at o * stride + t * dilation of [lead..., in...].
Tensor scatter_tap(const Tensor& part, const Geometry& geo, const std::vector<int64_t>& t,
                   const std::vector<int64_t>& in);

// The input elements of tap t of every window: x [lead..., in...] -> [lead..., out...], the
// strided slice o * stride + t * dilation (a view).
Tensor tap_view(const Tensor& x, const Geometry& geo, const std::vector<int64_t>& t);

// Every tap of the kernel, row-major (the scan order of PyTorch's pooling loops).
std::vector<std::vector<int64_t>> taps_in_order(const Geometry& geo);

// Whether windows do not overlap (dilation 1, kernel <= stride on every axis).
bool disjoint(const Geometry& geo);

// Pads (positive) or cuts (negative) the last widths.size() axes by (before, after); `value` fills
// the padding. Its adjoint is pad_or_cut(g, -widths) with zeros.
Tensor pad_or_cut(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& widths, double value = 0.0);

// "[a, b]" for messages.
std::string list_str(const std::vector<int64_t>& v);

}  // namespace ravel::detail::window
