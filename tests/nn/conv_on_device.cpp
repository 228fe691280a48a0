// conv2d + ReLU + max_pool2d and conv2d + avg_pool2d, forward and gradients, on another device
// against tbb_cpu:0 (worst relative difference below 1e-4, exit status 1 otherwise). Not a CTest
// test: on the HIP emulator the host compiler builds every generated kernel. Run as
//   RAVEL_PLUGIN_PATH=build/lib/ravel/plugins:build/lib/hip-emu build/bin/conv_on_device hip:0
// (or on a machine with a GPU, with the default plugin path).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ravel/ravel.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;

int main(int argc, char** argv) {
  const ravel::Device cpu = ravel::Device::parse("tbb_cpu:0");
  const ravel::Device dev = ravel::Device::parse(argc > 1 ? argv[1] : "hip:0");
  auto run = [&](const ravel::Device& d) {
    Tensor x = Tensor::randn({2, 3, 9, 9}, 1).to(d), w = (Tensor::randn({4, 3, 3, 3}, 2) * 0.3f).to(d);
    Tensor b = Tensor::randn({4}, 3).to(d);
    nn::ConvOptions o;
    o.padding = {1};
    o.stride = {2};
    nn::PoolOptions p;
    p.kernel = {2};
    nn::PoolOptions q;
    q.kernel = {3};
    q.stride = {1};
    q.padding = {1};
    Tensor y = nn::max_pool2d(nn::conv2d(x, w, b, o).relu(), p);
    nn::ConvOptions same;  // stride 1: Note [Wide rows]
    same.same = true;
    Tensor z = nn::avg_pool2d(nn::conv2d(x, w, b, same), q);
    Tensor loss = y.square().sum() + z.sum();
    auto g = ravel::gradients(loss, {x, w, b});
    std::vector<std::vector<float>> out{y.to(cpu).to_vector<float>(), z.to(cpu).to_vector<float>()};
    for (auto& t : g) out.push_back(t.to(cpu).to_vector<float>());
    return out;
  };
  auto a = run(cpu), b = run(dev);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j)
      worst = std::max(worst, std::fabs(double(a[i][j]) - b[i][j]) / (1 + std::fabs(double(a[i][j]))));
  std::printf("%s vs tbb_cpu:0: worst relative difference %.3g over %zu tensors\n", dev.str().c_str(), worst, a.size());
  return worst < 1e-4 ? 0 : 1;
}
