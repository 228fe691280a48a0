// A convolution's weight gradient (and the bias's) against naive loops in double, at shapes whose
// window contraction has a long K = batch x output positions against a small M x N = O x C*taps:
// tbb_cpu runs those as C^T with B broadcast in place (Note [Weight gradients with B broadcast in
// place], plugins/tbb_cpu/gemm_window_wgrad.cpp: f32, AVX-512, K >= 2048 and >= 8 max(M, N)).
// M of 16 to 72 (one to four vectors, a second sliver past 64, rows of the last sliver unused),
// N not a multiple of the block's columns, K with remainders against the panels and parts, batch
// 1, stride, dilation, asymmetric padding, groups, and an input and cotangent read through views
// with offsets. nn_conv_wgrad_packed runs the same cases with RAVEL_TBB_WINDOW_WGRAD=0.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"
#include "conv3x3_naive.hpp"
#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;
using namespace conv3x3;


BOOST_AUTO_TEST_CASE(weight_gradients_with_long_k_match_naive_loops) {
  const std::vector<Case> cases = {
      {16, 8, 64, 1, 14, 14, 1, 1, 1, 1, 1, true, true, false},    // M 64 (4 vectors), N 72, K 3136
      {23, 5, 40, 1, 13, 11, 1, 0, 1, 1, 1, false, false, false},  // M 40 (3 vectors, 8 rows unused), N 45, K 2691
      {1, 8, 20, 1, 60, 60, 1, 1, 1, 1, 1, true, false, false},    // batch 1: M 20 (2 vectors), K 3600
      {16, 4, 16, 1, 30, 30, 1, 1, 2, 2, 2, false, true, false},   // stride 2, dilation 2: M 16 (1 vector), N 36
      {32, 8, 48, 2, 12, 10, 1, 1, 1, 1, 1, true, true, false},    // groups 2: a batch of two, M 24, N 36, rows of 10
      {12, 3, 72, 1, 14, 14, 1, 1, 1, 1, 1, true, false, false},   // M 72: a second sliver of 8 rows
      {12, 6, 24, 1, 16, 15, 0, 0, 1, 1, 1, true, true, true},     // no padding: x and r read through views
  };
  uint64_t seed = 2400;
  for (const Case& k : cases)
    guarded(describe(k), [&] {
      const int64_t oh = out_h(k), ow = out_w(k);
      BOOST_TEST_REQUIRE(k.n * oh * ow >= 2048);  // the long K the case is about
      Tensor x = Tensor::randn({k.n, k.c, k.h, k.w}, seed++), w = Tensor::randn({k.o, k.c / k.groups, 3, 3}, seed++);
      Tensor b = Tensor::randn({k.o}, seed++), r = Tensor::randn({k.n, k.o, oh, ow}, seed++);
      if (k.views) {  // the same values at an offset inside larger tensors, strided along the batch
        Tensor xb = Tensor::randn({k.n, k.c + 2, k.h, k.w}, seed++), rb = Tensor::randn({k.n, k.o + 1, oh, ow}, seed++);
        x = xb.slice(1, 1, k.c + 1);
        r = rb.slice(1, 1, std::nullopt);
      }
      ravel::realize({x, w, b, r});
      nn::ConvOptions opt;
      opt.padding = {k.pad_h, k.pad_w};
      opt.dilation = {k.dil_h, k.dil_w};
      opt.stride = {k.stride, k.stride};
      opt.groups = k.groups;
      const std::optional<Tensor> bias = k.bias ? std::optional<Tensor>(b) : std::nullopt;
      Tensor y = nn::conv2d(x, w, bias, opt);
      if (k.relu) y = y.relu();
      std::vector<Tensor> wrt = {w};
      if (k.bias) wrt.push_back(b);
      auto g = ravel::gradients((y * r).sum(), wrt);
      ravel::realize(g);
      const Naive want =
          naive(k, x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), r.to_vector<double>());
      check("dw", g[0].to_vector<double>(), want.dw, want.adw);
      if (k.bias) check("db", g[1].to_vector<double>(), want.db, want.adb);
    });
}
