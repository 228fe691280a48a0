// relu(conv2d(x, w, b)) and all three gradients against naive loops in double, at shapes whose
// window contraction tbb_cpu runs with vectors that span output rows and images (Note [Vectors
// across runs and images], plugins/tbb_cpu/gemm_window_span.cpp: 8 | M, output rows >= 12 long,
// AVX-512) and at neighbours that it declines (odd row offsets that would need three pieces,
// groups, stride 2): values, every gradient, batch 1, padding, dilation. nn_conv_span_rows runs
// the same cases with RAVEL_TBB_WINDOW_SPAN=0 (the per-row vectors of Note [B rows in place]).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
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

// Note [Bias and relu in registers] (plugins/tbb_cpu/gemm_bias_relu.cpp): bias + relu applied to
// the span kernel's accumulators keep relu's rules bit for bit: an output whose window reads a
// NaN is NaN, an output at or below zero is +0.0 (bits 0, never -0.0), the rest the naive value.
// x has a NaN in image 1 and image 2 all zeros (its outputs are the bias exactly, -0.0 in one
// channel: +0.0 + -0.0 is +0.0, and the negative ones clip to +0.0).
BOOST_AUTO_TEST_CASE(bias_and_relu_in_the_kernel_keep_nan_and_zero_signs) {
  const Case k{3, 8, 16, 1, 14, 14, 1, 1, 1, 1, 1, true, true};
  std::vector<float> xv = Tensor::randn({k.n, k.c, k.h, k.w}, 2700).to_vector<float>();
  xv[static_cast<size_t>(((1 * k.c + 2) * k.h + 5) * k.w + 7)] = std::nanf("");
  for (int64_t c = 0; c < k.c; ++c)  // image 2 all zeros: every output is the bias
    for (int64_t i = 0; i < k.h * k.w; ++i) xv[static_cast<size_t>((2 * k.c + c) * k.h * k.w + i)] = 0.0f;
  std::vector<float> bv = Tensor::randn({k.o}, 2701).to_vector<float>();
  bv[3] = -0.0f;
  Tensor x = Tensor::from_vector<float>(xv, {k.n, k.c, k.h, k.w});
  Tensor w = Tensor::randn({k.o, k.c, 3, 3}, 2702), b = Tensor::from_vector<float>(bv, {k.o});
  ravel::realize({x, w, b});
  nn::ConvOptions opt;
  opt.padding = {1, 1};
  ravel::NoGradGuard no_grad;
  std::vector<float> y = nn::conv2d(x, w, b, opt).relu().to_vector<float>();
  std::vector<double> xd(xv.begin(), xv.end()), r(y.size(), 0.0);
  const Naive want = naive(k, xd, w.to_vector<double>(), b.to_vector<double>(), r);
  BOOST_REQUIRE_EQUAL(y.size(), want.y.size());
  int64_t nans = 0, zeros = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &y[i], sizeof bits);
    if (std::isnan(want.y[i])) {
      ++nans;
      BOOST_TEST(std::isnan(y[i]), "y at " << i << ": " << y[i] << ", want NaN");
    } else if (want.y[i] == 0.0) {
      ++zeros;
      BOOST_TEST(bits == 0u, "y at " << i << ": bits " << std::hex << bits << ", want +0.0");
    } else {
      BOOST_TEST(std::fabs(y[i] - want.y[i]) <= 1e-5 * want.ay[i] + 1e-6, "y at " << i << ": " << y[i] << " vs " << want.y[i]);
    }
  }
  BOOST_TEST(nans == 9 * k.o);  // the 3 x 3 outputs around the NaN, in every channel
  BOOST_TEST(zeros > 0);
}

// A bias that is one constant (Tensor::full, or zeros: the epilogue reads a CONST, not a LOAD)
// takes the same in-kernel path; values against the naive loops, with and without relu.
BOOST_AUTO_TEST_CASE(a_constant_bias_in_the_kernel) {
  for (const bool relu : {false, true})
    for (const double bias : {0.0, -0.5}) {
      const Case k{3, 8, 16, 1, 14, 14, 1, 1, 1, 1, 1, true, relu};
      guarded(describe(k) + " bias " + std::to_string(bias), [&] {
        Tensor x = Tensor::randn({k.n, k.c, k.h, k.w}, 2800), w = Tensor::randn({k.o, k.c, 3, 3}, 2801);
        ravel::realize({x, w});
        Tensor b = Tensor::full({k.o}, bias);
        nn::ConvOptions opt;
        opt.padding = {1, 1};
        ravel::NoGradGuard no_grad;
        Tensor y = nn::conv2d(x, w, b, opt);
        if (relu) y = y.relu();
        y.realize();  // the epilogue in the contraction, not in to_vector's cast
        const std::vector<double> r(static_cast<size_t>(k.n * k.o * out_h(k) * out_w(k)), 0.0);
        const Naive want = naive(k, x.to_vector<double>(), w.to_vector<double>(), std::vector<double>(k.o, bias), r);
        check("y", y.to_vector<double>(), want.y, want.ay);
      });
    }
}
