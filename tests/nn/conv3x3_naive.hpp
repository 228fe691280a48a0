// A 3x3 conv2d (+ bias, + relu) and all its gradients in double, from the definition, with the
// sums of the terms' magnitudes as the error's scale: the independent reference of the tests of
// tbb_cpu's window contractions (test_conv_span.cpp, test_conv_wgrad.cpp). Nothing here calls
// Ravel but Boost.Test's check.
#pragma once

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace conv3x3 {

struct Case {
  int64_t n, c, o, groups, h, w;  // input [n, c, h, w], weight [o, c / groups, 3, 3]
  int64_t pad_h, pad_w, dil_h, dil_w, stride;
  bool bias, relu;
  bool views = false;  // x and the cotangent read at an offset through a larger tensor
};

inline int64_t out_h(const Case& k) { return (k.h + 2 * k.pad_h - 2 * k.dil_h - 1) / k.stride + 1; }
inline int64_t out_w(const Case& k) { return (k.w + 2 * k.pad_w - 2 * k.dil_w - 1) / k.stride + 1; }

inline std::string describe(const Case& k) {
  return "n" + std::to_string(k.n) + " c" + std::to_string(k.c) + " o" + std::to_string(k.o) + " g" +
         std::to_string(k.groups) + " " + std::to_string(k.h) + "x" + std::to_string(k.w) + " pad " +
         std::to_string(k.pad_h) + "," + std::to_string(k.pad_w) + " dil " + std::to_string(k.dil_h) + "," +
         std::to_string(k.dil_w) + " stride " + std::to_string(k.stride) + (k.bias ? " bias" : "") +
         (k.relu ? " relu" : "") + (k.views ? " views" : "");
}

// y, and the gradients of sum(f(y) * r) (f = relu or identity) with respect to x, w and b, in
// double, from the definition y[n, o, i, j] = b[o] + sum x[n, c, i s - p + a d, j s - p + e d] w[o, c', a, e].
struct Naive {
  std::vector<double> y, dx, dw, db;
  std::vector<double> ay, adx, adw, adb;  // the sums of the terms' magnitudes: the error's scale
};

inline Naive naive(const Case& k, const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
            const std::vector<double>& r) {
  const int64_t oh = out_h(k), ow = out_w(k);
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

// f32 sums against double: within 1e-5 of the terms' magnitudes (a term read from the wrong
// place, dropped or counted twice is off by about one term).
inline void check(const char* what, const std::vector<double>& got, const std::vector<double>& want,
           const std::vector<double>& mag) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_TEST(std::fabs(got[i] - want[i]) <= 1e-5 * mag[i] + 1e-6,
               what << " at " << i << ": " << got[i] << " vs " << want[i]);
}

}  // namespace conv3x3
