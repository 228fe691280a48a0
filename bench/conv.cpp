// Convolution and pooling at the Fashion-MNIST CNN's shapes and at a ResNet-style 3x3 shape:
// forward, and forward + backward (ravel::gradients), f32, medians of `reps` after one warm-up.
// The same rows in PyTorch: bench/peers/torch_conv.py (docs/performance.md, "Convolution").
//   bench_conv [reps] [--no-resnet] [--activation]   (--activation: the relu(conv2d) rows and a dw-only row; --dw: dw rows alone;
//   --row14: the 128x32x14x14 -> 64 rows alone, conv2d and relu(conv2d) fwd and fwd + bwd and dw only, for profiles)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;
using Clock = std::chrono::steady_clock;

namespace {

double median_ms(int reps, const std::function<void()>& f) {
  f();  // warm-up: compiles and caches the kernels
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const std::string& name, double ms, double gflop) {
  std::printf("%-44s %10.3f ms", name.c_str(), ms);
  if (gflop > 0) std::printf("  %7.1f GFLOP/s", gflop / (ms * 1e-3));
  std::printf("\n");
}

// conv2d x [n, c, h, w] * w [o, c, 3, 3], padding 1: forward, then forward + backward.
void conv_rows(int reps, int64_t n, int64_t c, int64_t o, int64_t hw, bool input_grad) {
  Tensor x = Tensor::randn({n, c, hw, hw}, 1), w = Tensor::randn({o, c, 3, 3}, 2) * 0.1f, b = Tensor::zeros({o});
  ravel::realize({x, w, b});
  nn::ConvOptions opt;
  opt.padding = {1};
  const double flop = 2.0 * n * o * hw * hw * c * 9 * 1e-9;
  char name[96];
  std::snprintf(name, sizeof name, "conv2d %lldx%lldx%lldx%lld -> %lld, 3x3 fwd", (long long)n, (long long)c,
                (long long)hw, (long long)hw, (long long)o);
  row(name, median_ms(reps, [&] { nn::conv2d(x, w, b, opt).realize(); }), flop);
  Tensor cot = Tensor::randn({n, o, hw, hw}, 3);
  cot.realize();
  std::snprintf(name, sizeof name, "conv2d %lldx%lldx%lldx%lld -> %lld, 3x3 fwd+bwd", (long long)n, (long long)c,
                (long long)hw, (long long)hw, (long long)o);
  row(name, median_ms(reps, [&] {
        std::vector<Tensor> wrt = input_grad ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{w, b};
        ravel::realize(ravel::gradients((nn::conv2d(x, w, b, opt) * cot).sum(), wrt));
      }),
      flop * (input_grad ? 3 : 2));
}

// relu(conv2d(x, w, b)), 3x3, padding 1, groups g (g = c: depthwise): forward, then forward +
// all three gradients (bias and activation in the convolution's kernel; the
// depthwise forward, Note [Depthwise convolution as taps]).
void activation_rows(int reps, int64_t n, int64_t c, int64_t o, int64_t hw, int64_t g) {
  Tensor x = Tensor::randn({n, c, hw, hw}, 11), w = Tensor::randn({o, c / g, 3, 3}, 12) * 0.1f;
  Tensor b = Tensor::randn({o}, 13) * 0.1f, cot = Tensor::randn({n, o, hw, hw}, 14);
  ravel::realize({x, w, b, cot});
  nn::ConvOptions opt;
  opt.padding = {1};
  opt.groups = g;
  const double flop = 2.0 * n * o * hw * hw * (c / g) * 9 * 1e-9;
  char name[96];
  std::snprintf(name, sizeof name, "relu(conv2d) %lldx%lldx%lldx%lld -> %lld g%lld fwd", (long long)n, (long long)c,
                (long long)hw, (long long)hw, (long long)o, (long long)g);
  {
    ravel::NoGradGuard no_grad;
    row(name, median_ms(reps, [&] { nn::conv2d(x, w, b, opt).relu().realize(); }), flop);
  }
  std::snprintf(name, sizeof name, "relu(conv2d) %lldx%lldx%lldx%lld -> %lld g%lld fwd+bwd", (long long)n,
                (long long)c, (long long)hw, (long long)hw, (long long)o, (long long)g);
  row(name, median_ms(reps, [&] {
        ravel::realize(ravel::gradients((nn::conv2d(x, w, b, opt).relu() * cot).sum(), {x, w, b}));
      }),
      flop * 3);
}

// The weight gradient alone: gradients(sum(conv2d(x, w) * cot), {w}) (the forward is not needed:
// the padded input's copy and the window contraction with K = n x OH x OW), 3x3, padding 1.
void weight_gradient_row(int reps, int64_t n, int64_t c, int64_t o, int64_t hw) {
  Tensor x = Tensor::randn({n, c, hw, hw}, 21), w = Tensor::randn({o, c, 3, 3}, 22) * 0.1f;
  Tensor cot = Tensor::randn({n, o, hw, hw}, 23);
  ravel::realize({x, w, cot});
  nn::ConvOptions opt;
  opt.padding = {1};
  char name[96];
  std::snprintf(name, sizeof name, "conv2d %lldx%lldx%lldx%lld -> %lld, 3x3 dw only", (long long)n, (long long)c,
                (long long)hw, (long long)hw, (long long)o);
  row(name, median_ms(reps, [&] { ravel::gradients((nn::conv2d(x, w, std::nullopt, opt) * cot).sum(), {w})[0].realize(); }),
      2.0 * n * o * hw * hw * c * 9 * 1e-9);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 10;
  bool resnet = true, activation_only = false, dw_only = false, row14 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-resnet") == 0) resnet = false;
    else if (std::strcmp(argv[i], "--activation") == 0) activation_only = true;
    else if (std::strcmp(argv[i], "--dw") == 0) dw_only = true;
    else if (std::strcmp(argv[i], "--row14") == 0) row14 = true;
    else reps = std::atoi(argv[i]);
  }
  if (row14) {  // the 14x14 rows alone (for profiles)
    conv_rows(reps, 128, 32, 64, 14, true);
    activation_rows(reps, 128, 32, 64, 14, 1);
    weight_gradient_row(reps, 128, 32, 64, 14);
    return 0;
  }
  if (dw_only) {  // the weight gradient rows alone (for profiles)
    weight_gradient_row(reps, 128, 32, 64, 14);
    weight_gradient_row(reps, 32, 64, 64, 28);
    return 0;
  }
  if (activation_only) {  // the relu(conv2d) rows only
    activation_rows(reps, 32, 64, 64, 28, 1);
    activation_rows(reps, 32, 64, 64, 28, 64);
    activation_rows(reps, 128, 1, 32, 28, 1);
    activation_rows(reps, 128, 32, 64, 14, 1);
    weight_gradient_row(reps, 128, 32, 64, 14);
    return 0;
  }
  // The Fashion-MNIST CNN's two convolutions (the first needs no input gradient).
  conv_rows(reps, 128, 1, 32, 28, false);
  conv_rows(reps, 128, 32, 64, 14, true);
  {
    Tensor x = Tensor::randn({128, 32, 28, 28}, 4);
    x.realize();
    nn::PoolOptions p;
    p.kernel = {2};
    row("max_pool2d 128x32x28x28 k2 fwd", median_ms(reps, [&] { nn::max_pool2d(x, p).realize(); }), 0);
    Tensor cot = Tensor::randn({128, 32, 14, 14}, 5);
    cot.realize();
    row("max_pool2d 128x32x28x28 k2 fwd+bwd", median_ms(reps, [&] {
          ravel::gradients((nn::max_pool2d(x, p) * cot).sum(), {x})[0].realize();
        }), 0);
    // The same pooling as a maximum of the four strided quarters with Tensor::maximum (its
    // gradient splits ties instead of routing them to the first maximum): the lower bound for
    // max_pool2d's forward and backward on this backend.
    auto quads = [&] {
      Tensor v = x.reshape({128, 32, 14, 2, 14, 2});
      auto q = [&](int64_t i, int64_t j) { return v.select(5, j).select(3, i); };
      return q(0, 0).maximum(q(0, 1)).maximum(q(1, 0).maximum(q(1, 1)));
    };
    row("max of 2x2 quarters (ties split) fwd+bwd", median_ms(reps, [&] {
          ravel::gradients((quads() * cot).sum(), {x})[0].realize();
        }), 0);
  }
  {
    // One training step's gradients (no optimizer): conv(1->32)+relu, pool, conv(32->64)+relu,
    // pool, linear 3136 -> 10, cross-entropy; batch 128.
    const int64_t B = 128;
    Tensor x = Tensor::randn({B, 1, 28, 28}, 6), y = (Tensor::rand({B}, 7) * 10.0f).cast(ravel::DType::I64);
    std::vector<Tensor> ps = {Tensor::randn({32, 1, 3, 3}, 8) * 0.3f, Tensor::zeros({32}),
                              Tensor::randn({64, 32, 3, 3}, 9) * 0.06f, Tensor::zeros({64}),
                              Tensor::randn({3136, 10}, 10) * 0.02f, Tensor::zeros({10})};
    ravel::realize(ps);
    ravel::realize({x, y});
    nn::ConvOptions c;
    c.padding = {1};
    nn::PoolOptions p;
    p.kernel = {2};
    row("cnn step (b128: conv32, pool, conv64, pool, fc)", median_ms(reps, [&] {
          Tensor h = nn::max_pool2d(nn::conv2d(x, ps[0], ps[1], c).relu(), p);
          h = nn::max_pool2d(nn::conv2d(h, ps[2], ps[3], c).relu(), p);
          Tensor loss = nn::cross_entropy(h.reshape({B, 3136}).matmul(ps[4]) + ps[5], y);
          auto g = ravel::gradients(loss, ps);
          g.push_back(loss);
          ravel::realize(g);
        }), 0);
  }
  if (resnet) conv_rows(std::max(3, reps / 3), 32, 64, 64, 56, true);
  return 0;
}
