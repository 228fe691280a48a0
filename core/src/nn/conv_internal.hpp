// Internal to conv.cpp and conv_gradients.cpp: a checked convolution's geometry, the transposed
// convolution, and the implicit form's own gradients (Note [Convolution's input gradient as a
// convolution]).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/window.hpp"
#include "ravel/conv.hpp"

namespace ravel::detail::conv_internal {

// Internal (ravel::detail stays unexported: core/exports.map).
using nn::ConvOptions;

using Widths = std::vector<std::pair<int64_t, int64_t>>;

// The per-axis options of one convolution, checked, and the input with a batch axis.
struct ConvSetup {
  std::string op;
  size_t k = 0;       // spatial rank
  bool batched = true;
  Tensor x;           // [N, C, in...]
  std::vector<int64_t> stride, dilation, kernel;
  Widths pad;         // (before, after) per spatial axis, both >= 0
};

Tensor conv_transpose_any(const std::string& op, size_t k, const Tensor& x, const Tensor& w,
                          const std::optional<Tensor>& bias, const ConvOptions& o);

// The grouped window view of the padded input xp [N, C, in...] laid out for the contraction:
// [G, 1, Cg, k..., N, out...] (Note [Grouped implicit im2col]).
Tensor grouped_columns(const Tensor& xp, const window::Geometry& geo, int64_t g);

// The same laid out for the NCHW contraction: [N, G, 1, Cg, k..., out...] (conv.cpp's forward).
Tensor nchw_columns(const Tensor& xp, const window::Geometry& geo, int64_t g);

// Whether the strided input gradient by phases applies: dilation 1 on every axis with stride > 1.
bool phases_apply(const ConvSetup& s);

// y (the implicit form's result) with its custom gradient: dx, dw and db (inputs x, w, xp[, bias]).
Tensor with_direct_gradients(const ConvSetup& s, const window::Geometry& geo, const Tensor& w,
                             const std::optional<Tensor>& bias, const Tensor& xp, const Tensor& y, int64_t groups);

}  // namespace ravel::detail::conv_internal
