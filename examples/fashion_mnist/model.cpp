#include "model.hpp"

namespace fashion_mnist {

namespace {
ravel::nn::ConvOptions same_3x3() {
  ravel::nn::ConvOptions o;
  o.padding = {1};
  return o;
}
}  // namespace

Model::Model(int64_t c1, int64_t c2, int64_t rows, int64_t cols, uint64_t seed)
    : conv1(1, c1, {3}, seed, same_3x3(), /*bias=*/false),
      conv2(c1, c2, {3}, seed + 1, same_3x3(), /*bias=*/false),
      bn1(c1),
      bn2(c2),
      head(c2 * (rows / 4) * (cols / 4), kClasses, seed + 2) {}

ravel::Tensor Model::operator()(const ravel::Tensor& images) {
  ravel::Tensor h = pool(bn1(conv1(images)).relu());
  h = pool(bn2(conv2(h)).relu());
  return head(flatten(h));
}

std::vector<ravel::nn::NamedParameter> Model::named_parameters() {
  std::vector<ravel::nn::NamedParameter> out;
  auto add = [&](const std::string& prefix, ravel::nn::Module& m) {
    for (auto& [name, p] : m.named_parameters()) out.emplace_back(prefix + "." + name, p);
  };
  add("conv1", conv1), add("bn1", bn1), add("conv2", conv2), add("bn2", bn2), add("head", head);
  return out;
}

std::vector<ravel::nn::NamedParameter> Model::named_buffers() {
  std::vector<ravel::nn::NamedParameter> out;
  for (auto& [name, b] : bn1.named_buffers()) out.emplace_back("bn1." + name, b);
  for (auto& [name, b] : bn2.named_buffers()) out.emplace_back("bn2." + name, b);
  return out;
}

std::string Model::describe() const {
  const int64_t c1 = conv1.weight.size(0), c2 = conv2.weight.size(0);
  return "conv3x3(1->" + std::to_string(c1) + ")+bn+relu+maxpool2 -> conv3x3(" + std::to_string(c1) + "->" +
         std::to_string(c2) + ")+bn+relu+maxpool2 -> linear(" + std::to_string(head.weight.size(0)) + "->10)";
}

}  // namespace fashion_mnist
