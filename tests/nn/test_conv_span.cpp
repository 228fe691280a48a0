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
#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;

namespace {

struct Case {
  int64_t n, c, o, groups, h, w;  // input [n, c, h, w], weight [o, c / groups, 3, 3]
  int64_t pad_h, pad_w, dil_h, dil_w, stride;
  bool bias, relu;
};

std::string describe(const Case& k) {
  return "n" + std::to_string(k.n) + " c" + std::to_string(k.c) + " o" + std::to_string(k.o) + " g" +
         std::to_string(k.groups) + " " + std::to_string(k.h) + "x" + std::to_string(k.w) + " pad " +
         std::to_string(k.pad_h) + "," + std::to_string(k.pad_w) + " dil " + std::to_string(k.dil_h) + "," +
         std::to_string(k.dil_w) + " stride " + std::to_string(k.stride) + (k.bias ? " bias" : "") +
         (k.relu ? " relu" : "");
}

// y, and the gradients of sum(f(y) * r) (f = relu or identity) with respect to x, w and b, in
// double, from the definition y[n, o, i, j] = b[o] + sum x[n, c, i s - p + a d, j s - p + e d] w[o, c', a, e].
struct Naive {
  std::vector<double> y, dx, dw, db;
  std::vector<double> ay, adx, adw, adb;  // the sums of the terms' magnitudes: the error's scale
};

Naive naive(const Case& k, const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
            const std::vector<double>& r) {
  const int64_t oh = (k.h + 2 * k.pad_h - 2 * k.dil_h - 1) / k.stride + 1;
  const int64_t ow = (k.w + 2 * k.pad_w - 2 * k.dil_w - 1) / k.stride + 1;
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  Naive z;
  z.y.assign(static_cast<size_t>(k.n * k.o * oh * ow), 0.0);
  z.dx.assign(x.size(), 0.0), z.dw.assign(w.size(), 0.0), z.db.assign(static_cast<size_t>(k.o), 0.0);
  z.ay = z.y, z.adx = z.dx, z.adw = z.dw, z.adb = z.db;
  auto taps = [&](int64_t n, int64_t o, int64_t i, int64_t j, auto&& f) {
    for (int64_t cc = 0; cc < cg; ++cc)
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t e = 0; e < 3; ++e) {
          const int64_t yi = i * k.stride - k.pad_h + a * k.dil_h, xj = j * k.stride - k.pad_w + e * k.dil_w;
          if (yi < 0 || yi >= k.h || xj < 0 || xj >= k.w) continue;
          const int64_t c = (o / og) * cg + cc;
          f(((n * k.c + c) * k.h + yi) * k.w + xj, ((o * cg + cc) * 3 + a) * 3 + e);
        }
  };
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const size_t at = static_cast<size_t>(((n * k.o + o) * oh + i) * ow + j);
          double acc = k.bias ? b[o] : 0.0, mag = std::fabs(acc);
          taps(n, o, i, j, [&](int64_t xi, int64_t wi) { acc += x[xi] * w[wi], mag += std::fabs(x[xi] * w[wi]); });
          z.y[at] = k.relu ? std::max(acc, 0.0) : acc;
          z.ay[at] = mag;
          const double g = k.relu && acc <= 0.0 ? 0.0 : r[at];
          z.db[o] += g, z.adb[o] += std::fabs(g);
          taps(n, o, i, j, [&](int64_t xi, int64_t wi) {
            z.dx[xi] += g * w[wi], z.adx[xi] += std::fabs(g * w[wi]);
            z.dw[wi] += g * x[xi], z.adw[wi] += std::fabs(g * x[xi]);
          });
        }
  return z;
}

// f32 sums against double: within 1e-5 of the terms' magnitudes (a lane read from the wrong
// place or dropped is off by about one term).
void check(const char* what, const std::vector<double>& got, const std::vector<double>& want,
           const std::vector<double>& mag) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_TEST(std::fabs(got[i] - want[i]) <= 1e-5 * mag[i] + 1e-6,
               what << " at " << i << ": " << got[i] << " vs " << want[i]);
}

}  // namespace

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
      const int64_t oh = (k.h + 2 * k.pad_h - 2 * k.dil_h - 1) / k.stride + 1;
      const int64_t ow = (k.w + 2 * k.pad_w - 2 * k.dil_w - 1) / k.stride + 1;
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
