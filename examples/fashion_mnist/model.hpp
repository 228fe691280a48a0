// The network: two blocks of 3x3 convolution (padding 1, no bias: batch norm's shift replaces
// it), batch norm, ReLU and 2x2 max pooling, then a linear head over the flattened features.
//   [N, 1, H, W] -> [N, c1, H/2, W/2] -> [N, c2, H/4, W/4] -> [N, 10]
#pragma once

#include <string>

#include "ravel/ravel.hpp"

namespace fashion_mnist {

constexpr int kClasses = 10;
inline const char* const kClassNames[kClasses] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

class Model : public ravel::nn::Module {
 public:
  Model(int64_t c1, int64_t c2, int64_t rows, int64_t cols, uint64_t seed);
  ravel::Tensor operator()(const ravel::Tensor& images);  // [N, 1, rows, cols] -> logits [N, 10]
  std::vector<ravel::nn::NamedParameter> named_parameters() override;
  std::vector<ravel::nn::NamedParameter> named_buffers() override;
  std::vector<ravel::nn::Module*> children() override { return {&conv1, &bn1, &conv2, &bn2, &head}; }
  std::string describe() const;

  ravel::nn::Conv2d conv1, conv2;
  ravel::nn::BatchNorm2d bn1, bn2;
  ravel::nn::MaxPool2d pool{2};
  ravel::nn::Flatten flatten;
  ravel::nn::Linear head;
};

}  // namespace fashion_mnist
