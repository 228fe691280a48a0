// relu(conv2d(x, w, b)) and all three gradients against naive loops in double, at shapes whose
// window contraction tbb_cpu runs with vectors that span output rows and images (Note [Vectors
// across runs and images], plugins/tbb_cpu/gemm_window_span.cpp: 8 | M, output rows >= 12 long,
// AVX-512) and at neighbours that it declines (odd row offsets that would need three pieces,
// groups, stride 2): values, every gradient, batch 1, padding, dilation. nn_conv_span_rows runs
// the same cases with RAVEL_TBB_WINDOW_SPAN=0 (the per-row vectors of Note [B rows in place]).
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


// Output rows of 14 (even offsets: at most two pieces per vector, vectors crossing images at
// 3 x 196 columns, with tiles of several images at batch 40), 16, 15 and 20; 13 (a vector would
// need three pieces: declined); batch 1; no bias (C written in place) and bias + relu (the
// epilogue over the tile); asymmetric padding and dilation; and, declined, groups and stride 2.
BOOST_AUTO_TEST_CASE(spanning_vectors_match_naive_loops) {
  const std::vector<Case> cases = {
      {3, 8, 16, 1, 14, 14, 1, 1, 1, 1, 1, true, true},
      {40, 8, 8, 1, 14, 14, 1, 1, 1, 1, 1, true, false},
      {1, 16, 8, 1, 17, 20, 2, 1, 2, 1, 1, false, false},  // batch 1, dilation along h, rows of 20
      {5, 4, 24, 1, 12, 16, 1, 1, 1, 1, 1, false, true},   // rows of 16
      {3, 8, 8, 1, 11, 17, 1, 2, 1, 2, 1, true, true},     // rows of 15: dilation 2 along w
      {2, 8, 16, 1, 13, 13, 1, 1, 1, 1, 1, true, true},    // rows of 13: declined
      {2, 16, 16, 2, 14, 14, 1, 1, 1, 1, 1, true, true},   // groups: declined (A differs per group)
      {2, 8, 16, 1, 28, 28, 1, 1, 1, 1, 2, true, true},    // stride 2: declined
  };
  uint64_t seed = 2600;
  for (const Case& k : cases)
    guarded(describe(k), [&] {
      const int64_t oh = out_h(k), ow = out_w(k);
      Tensor x = Tensor::randn({k.n, k.c, k.h, k.w}, seed++), w = Tensor::randn({k.o, k.c / k.groups, 3, 3}, seed++);
      Tensor b = Tensor::randn({k.o}, seed++), r = Tensor::randn({k.n, k.o, oh, ow}, seed++);
      ravel::realize({x, w, b, r});
      nn::ConvOptions opt;
      opt.padding = {k.pad_h, k.pad_w};
      opt.dilation = {k.dil_h, k.dil_w};
      opt.stride = {k.stride, k.stride};
      opt.groups = k.groups;
      const std::optional<Tensor> bias = k.bias ? std::optional<Tensor>(b) : std::nullopt;
      auto f = [&] {
        Tensor y = nn::conv2d(x, w, bias, opt);
        return k.relu ? y.relu() : y;
      };
      const Naive want = naive(k, x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), r.to_vector<double>());
      {
        ravel::NoGradGuard no_grad;
        Tensor y = f();
        y.realize();
        if (k.groups == 1 && k.stride == 1 && ravel::fusion_options().policy >= ravel::FusionPolicy::Reduce)
          BOOST_TEST(ravel::last_realization_stats().contractions == 1);  // the epilogue in the contraction
        check("y", y.to_vector<double>(), want.y, want.ay);
      }
      std::vector<Tensor> wrt = {x, w};
      if (k.bias) wrt.push_back(b);
      auto g = ravel::gradients((f() * r).sum(), wrt);
      ravel::realize(g);
      check("dx", g[0].to_vector<double>(), want.dx, want.adx);
      check("dw", g[1].to_vector<double>(), want.dw, want.adw);
      if (k.bias) check("db", g[2].to_vector<double>(), want.db, want.adb);
    });
}
