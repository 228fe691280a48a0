// The convolutional workloads of ravel-bench (docs/bench.md): `conv2d` (forward and both
// gradients of one convolution), `max_pool2d` (2x2 max pooling and its gradient) and `cnn_step`
// (a training step of examples/fashion_mnist).
#pragma once

#include <memory>
#include <string>

#include "ravel/device.hpp"
#include "workload.hpp"

namespace ravel::bench {

bool is_cnn_workload(const std::string& name);
Work cnn_work_of(const std::string& name, const Size& size);
std::unique_ptr<Instance> make_cnn_instance(const std::string& name, const Size& size, const Device& device);

}  // namespace ravel::bench
