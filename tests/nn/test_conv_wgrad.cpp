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
#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;

namespace {

struct Case {
  int64_t n, c, o, groups, h, w;  // input [n, c, h, w], weight [o, c / groups, 3, 3]
  int64_t pad_h, pad_w, dil, stride;
  bool bias, relu, views;  // views: x and the cotangent read at an offset through a larger tensor
};

std::string describe(const Case& k) {
  return "n" + std::to_string(k.n) + " c" + std::to_string(k.c) + " o" + std::to_string(k.o) + " g" +
         std::to_string(k.groups) + " " + std::to_string(k.h) + "x" + std::to_string(k.w) + " pad " +
         std::to_string(k.pad_h) + "," + std::to_string(k.pad_w) + " dil " + std::to_string(k.dil) + " stride " +
         std::to_string(k.stride) + (k.bias ? " bias" : "") + (k.relu ? " relu" : "") + (k.views ? " views" : "");
}

int64_t out_extent(int64_t in, int64_t pad, const Case& k) { return (in + 2 * pad - 2 * k.dil - 1) / k.stride + 1; }

// dw and db of sum(f(y) * r) (f = relu or identity) in double, from the definition
// y[n, o, i, j] = b[o] + sum x[n, c, i s - p + a d, j s - p + e d] w[o, c', a, e]; with the sums of
// the terms' magnitudes as the error's scale.
struct Naive {
  std::vector<double> dw, db, adw, adb;
};

Naive naive(const Case& k, const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
            const std::vector<double>& r) {
  const int64_t oh = out_extent(k.h, k.pad_h, k), ow = out_extent(k.w, k.pad_w, k);
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  Naive z;
  z.dw.assign(w.size(), 0.0), z.db.assign(static_cast<size_t>(k.o), 0.0);
  z.adw = z.dw, z.adb = z.db;
  auto taps = [&](int64_t n, int64_t o, int64_t i, int64_t j, auto&& f) {
    for (int64_t cc = 0; cc < cg; ++cc)
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t e = 0; e < 3; ++e) {
          const int64_t yi = i * k.stride - k.pad_h + a * k.dil, xj = j * k.stride - k.pad_w + e * k.dil;
          if (yi < 0 || yi >= k.h || xj < 0 || xj >= k.w) continue;
          const int64_t c = (o / og) * cg + cc;
          f(((n * k.c + c) * k.h + yi) * k.w + xj, ((o * cg + cc) * 3 + a) * 3 + e);
        }
  };
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = k.bias ? b[o] : 0.0;
          taps(n, o, i, j, [&](int64_t xi, int64_t wi) { acc += x[xi] * w[wi]; });
          const double g = k.relu && acc <= 0.0 ? 0.0 : r[static_cast<size_t>(((n * k.o + o) * oh + i) * ow + j)];
          z.db[o] += g, z.adb[o] += std::fabs(g);
          taps(n, o, i, j, [&](int64_t xi, int64_t wi) { z.dw[wi] += g * x[xi], z.adw[wi] += std::fabs(g * x[xi]); });
        }
  return z;
}

// f32 sums against double: within 1e-5 of the terms' magnitudes (a term dropped, read from the
// wrong place or counted twice is off by about one term's size).
void check(const char* what, const std::vector<double>& got, const std::vector<double>& want,
           const std::vector<double>& mag) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_TEST(std::fabs(got[i] - want[i]) <= 1e-5 * mag[i] + 1e-6,
               what << " at " << i << ": " << got[i] << " vs " << want[i]);
}

}  // namespace

BOOST_AUTO_TEST_CASE(weight_gradients_with_long_k_match_naive_loops) {
  const std::vector<Case> cases = {
      {16, 8, 64, 1, 14, 14, 1, 1, 1, 1, true, true, false},    // M 64 (4 vectors), N 72, K 3136
      {23, 5, 40, 1, 13, 11, 1, 0, 1, 1, false, false, false},  // M 40 (3 vectors, 8 rows unused), N 45, K 2691
      {1, 8, 20, 1, 60, 60, 1, 1, 1, 1, true, false, false},    // batch 1: M 20 (2 vectors), K 3600
      {16, 4, 16, 1, 30, 30, 1, 1, 2, 2, false, true, false},   // stride 2, dilation 2: M 16 (1 vector), N 36
      {32, 8, 48, 2, 12, 10, 1, 1, 1, 1, true, true, false},    // groups 2: a batch of two, M 24, N 36, rows of 10
      {12, 3, 72, 1, 14, 14, 1, 1, 1, 1, true, false, false},   // M 72: a second sliver of 8 rows
      {12, 6, 24, 1, 16, 15, 0, 0, 1, 1, true, true, true},     // no padding: x and r read through views
  };
  uint64_t seed = 2400;
  for (const Case& k : cases)
    guarded(describe(k), [&] {
      const int64_t oh = out_extent(k.h, k.pad_h, k), ow = out_extent(k.w, k.pad_w, k);
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
      opt.dilation = {k.dil, k.dil};
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
