// Conv1d / Conv2d and the pooling modules: parameters and options around the functional ops of
// ravel/conv.hpp.
#include <cmath>

#include "ravel/amp.hpp"
#include "ravel/conv.hpp"
#include "ravel/nn.hpp"

namespace ravel::nn {

namespace {
// The kernel's size per spatial axis: one value for every axis, or one per axis.
Shape conv_kernel_shape(const std::vector<int64_t>& kernel, size_t spatial, const char* name) {
  RAVEL_CHECK(kernel.size() == 1 || kernel.size() == spatial, ValueError, name, " expects a kernel size of 1 or ",
              spatial, " values, got ", kernel.size());
  Shape k(spatial, kernel[0]);
  if (kernel.size() == spatial) k = kernel;
  for (int64_t s : k) RAVEL_CHECK(s > 0, ValueError, name, " expects positive kernel sizes, got ", shape_str(kernel));
  return k;
}
}  // namespace

// weight [out, in / groups, k...] and bias [out] ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
// fan_in = in / groups * prod(k): what torch's kaiming_uniform_(a=sqrt(5)) gives (gain
// sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) = 1/sqrt(fan_in)) and its bias rule.
ConvNd::ConvNd(int64_t in, int64_t out, const std::vector<int64_t>& kernel, uint64_t seed, ConvOptions opts,
               bool with_bias, DType dtype, size_t spatial, const char* name)
    : options(std::move(opts)) {
  RAVEL_CHECK(in > 0 && out > 0, ValueError, name, " expects positive channel counts, got in=", in, " out=", out);
  RAVEL_CHECK(options.groups > 0 && in % options.groups == 0 && out % options.groups == 0, ValueError, name,
              " expects groups (", options.groups, ") to divide in (", in, ") and out (", out, ")");
  Shape shape{out, in / options.groups};
  int64_t fan_in = in / options.groups;
  for (int64_t k : conv_kernel_shape(kernel, spatial, name)) shape.push_back(k), fan_in *= k;
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  weight = (Tensor::rand(shape, seed, dtype) * (2 * bound) - bound).requires_grad_();
  if (with_bias) bias = (Tensor::rand({out}, seed ^ 0x9e3779b97f4a7c15ULL, dtype) * (2 * bound) - bound).requires_grad_();
}

std::vector<NamedParameter> ConvNd::named_parameters() {
  std::vector<NamedParameter> out{{"weight", &weight}};
  if (bias.defined()) out.emplace_back("bias", &bias);
  return out;
}

// The bias, and below the input and weight, in the half dtype under nn::Autocast (Note
// [Autocast in nn only] in autocast.cpp).
std::optional<Tensor> ConvNd::optional_bias() const {
  return bias.defined() ? std::optional<Tensor>(autocast_operand(bias)) : std::nullopt;
}

Tensor Conv1d::operator()(const Tensor& x) const {
  return conv1d(autocast_operand(x), autocast_operand(weight), optional_bias(), options);
}
Tensor Conv2d::operator()(const Tensor& x) const {
  return conv2d(autocast_operand(x), autocast_operand(weight), optional_bias(), options);
}
Tensor MaxPool2d::operator()(const Tensor& x) const { return max_pool2d(x, options); }
Tensor AvgPool2d::operator()(const Tensor& x) const { return avg_pool2d(x, options); }

}  // namespace ravel::nn
