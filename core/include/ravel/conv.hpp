// Convolution and pooling, functional (like torch.nn.functional): ravel::nn::conv2d, max_pool2d,
// avg_pool2d, adaptive_avg_pool2d, ... with PyTorch's semantics (docs/nn.md, "Convolution and
// pooling").
//
// Every one is a composite of Ravel's own ops (Note [Convolution as a window view] in
// core/src/nn/window.cpp): the input is padded, a zero-copy window view [.., out..., k...] is
// taken of it, and the windows are reduced (pooling) or contracted with the weight (one GEMM).
// So they differentiate to any order and run on every backend with no plugin change.
//
// Layouts are PyTorch's: input [N, C, spatial...], weight [O, C / groups, k...] (transposed:
// [C, O / groups, k...]), bias [O]. Batch-less inputs ([C, spatial...]) are accepted as PyTorch
// accepts them. Bad shapes or options throw ShapeError / ValueError naming the values.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ravel/tensor.hpp"

namespace ravel::nn {

// Options of conv*d and conv_transpose*d. stride, padding, dilation and output_padding hold one
// value (used for every spatial axis) or one per spatial axis. `padding_pairs`, when not empty,
// overrides `padding` with (before, after) per spatial axis (asymmetric padding, as ONNX's pads).
// `same` pads so the output has the input's size (PyTorch's padding="same": stride 1 only; when
// dilation * (k - 1) is odd the extra element goes after). output_padding is for the transposed
// convolutions only (each < stride or < dilation, as PyTorch).
struct ConvOptions {
  std::vector<int64_t> stride{1}, padding{0}, dilation{1};
  int64_t groups = 1;
  bool same = false;
  std::vector<int64_t> output_padding{0};
  std::vector<std::pair<int64_t, int64_t>> padding_pairs;
};

// Options of max_pool*d and avg_pool*d. `kernel` is required (one value or one per spatial
// axis); an empty `stride` means stride = kernel. padding (<= kernel / 2, as PyTorch) is -inf for
// max pooling and zero for average pooling. dilation is for max pooling only. ceil_mode: the
// output size rounds up (a last window may start in the input or the left padding but run past
// the end). count_include_pad: the average divides by the window's size including padding (but
// not the part past the padded end); divisor_override replaces the divisor.
struct PoolOptions {
  std::vector<int64_t> kernel, stride, padding{0}, dilation{1};
  bool ceil_mode = false, count_include_pad = true;
  std::optional<int64_t> divisor_override{};
};

Tensor conv1d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias = std::nullopt, ConvOptions o = {});
Tensor conv2d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias = std::nullopt, ConvOptions o = {});
Tensor conv3d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias = std::nullopt, ConvOptions o = {});

// The adjoint of conv*d with respect to its input (torch.nn.functional.conv_transpose*d):
// output size (in - 1) * stride - pad_before - pad_after + dilation * (k - 1) + output_padding + 1.
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias = std::nullopt,
                        ConvOptions o = {});
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias = std::nullopt,
                        ConvOptions o = {});
Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias = std::nullopt,
                        ConvOptions o = {});

// Max pooling; the gradient goes to the first maximal element of each window in scan order
// (row-major over the window), as PyTorch's CPU kernels.
Tensor max_pool1d(const Tensor& x, PoolOptions o);
Tensor max_pool2d(const Tensor& x, PoolOptions o);
Tensor max_pool3d(const Tensor& x, PoolOptions o);
Tensor avg_pool1d(const Tensor& x, PoolOptions o);
Tensor avg_pool2d(const Tensor& x, PoolOptions o);
Tensor avg_pool3d(const Tensor& x, PoolOptions o);

// Adaptive pooling (torch.nn.functional.adaptive_*_pool*d): output cell i of an axis of size
// `in` pools [floor(i * in / out), ceil((i + 1) * in / out)). output_size holds one value or one
// per spatial axis; global pooling is output_size {1}.
Tensor adaptive_avg_pool1d(const Tensor& x, std::vector<int64_t> output_size);
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);
Tensor adaptive_max_pool1d(const Tensor& x, std::vector<int64_t> output_size);
Tensor adaptive_max_pool2d(const Tensor& x, std::vector<int64_t> output_size);
Tensor adaptive_avg_pool3d(const Tensor& x, std::vector<int64_t> output_size);
Tensor adaptive_max_pool3d(const Tensor& x, std::vector<int64_t> output_size);

}  // namespace ravel::nn
