// The oneTBB plugin's half folds (plugins/tbb_cpu/half_fold.cpp, Note [Widening in the fold]):
// fold_half (and fold_half2, two rows at once) must give the bits fold.hpp's f32 fold gives over
// the same values widened first (the path a half reduction took before), and fold_half_into those of the element-wise combine,
// for SUM, MAX and PROD, f16 and bf16, every length up to 100 and a few around the evaluator's
// blocks, at misaligned starts, with NaN, infinities, subnormals and signed zeros mixed in (and runs of
// signed zeros alone, where a max's operand order shows). The
// sum is also checked against a sum in double (a bound that does not depend on the order), so a
// fold that matched a wrong reference would still fail. CMake runs it at every level this CPU has
// (RAVEL_TBB_SIMD unset, avx2, portable); the level each run checks is printed.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <ravel/backend.hpp>
#include <ravel/half.hpp>

#include "dtype_ops.hpp"
#include "fold.hpp"
#include "half_convert.hpp"
#include "half_fold.hpp"

namespace {

uint64_t next(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return s >> 11;
}

float widen(int32_t dt, uint16_t h) {
  return dt == RVL_DTYPE_F16 ? rvl::f32_from_f16_bits(h) : rvl::f32_from_bf16_bits(h);
}
uint16_t narrow(int32_t dt, float x) { return dt == RVL_DTYPE_F16 ? rvl::f16_bits_from(x) : rvl::bf16_bits_from(x); }

// n halves near 1 (so products stay finite over a few hundred elements); mode 1 mixes in
// specials, mode 2 is signed zeros and negatives only (a max whose lanes compare +0 with -0).
std::vector<uint16_t> values(int32_t dt, int64_t n, uint64_t& seed, int mode) {
  std::vector<uint16_t> v(static_cast<size_t>(n) + 8);
  const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, 3e-6f, -2.5e4f};
  const float zeros[] = {0.0f, -0.0f, -1.0f, -0.0f};
  for (auto& h : v) {
    const uint64_t r = next(seed);
    const float x = static_cast<float>(static_cast<int64_t>(r % 2001) - 1000) / 4000.0f + ((r >> 20) % 2 ? 1.0f : -1.0f);
    h = narrow(dt, mode == 2 ? zeros[r % 4] : mode == 1 && r % 17 == 0 ? special[(r >> 8) % 8] : x);
  }
  return v;
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }

template <int ROP>
float reference(int32_t dt, float acc, const uint16_t* v, int64_t n) {
  std::vector<float> w(static_cast<size_t>(n) + 1);
  for (int64_t i = 0; i < n; ++i) w[static_cast<size_t>(i)] = widen(dt, v[i]);
  return tbbcpu::fold<RVL_DTYPE_F32, ROP>(acc, w.data(), n);
}

template <int ROP>
void check_lengths(int32_t dt, const char* name) {
  uint64_t seed = 42 + ROP * 7 + dt;
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n <= 100; ++n) lengths.push_back(n);
  for (int64_t n : {127, 128, 129, 511, 1023, 1024, 1025, 4096}) lengths.push_back(n);
  int64_t bad = 0;
  for (int64_t n : lengths)
    for (int misalign = 0; misalign < 3; ++misalign)
      for (int specials : {0, 1, 2}) {
        const std::vector<uint16_t> v = values(dt, n + misalign, seed, specials);
        const uint16_t* p = v.data() + misalign;
        const float acc0 = ROP == RVL_REDUCE_PROD ? 1.0f : ROP == RVL_REDUCE_MAX ? -INFINITY : 0.0f;
        for (float acc : {acc0, widen(dt, v[0])}) {
          const float got = tbbcpu::fold_half(ROP, dt, acc, p, n), want = reference<ROP>(dt, acc, p, n);
          if (!same(got, want) && bad++ < 5)
            BOOST_ERROR(name << " fold n=" << n << " misalign=" << misalign << " specials=" << specials << ": "
                             << got << ", want " << want);
        }
        // Two rows at once (Note [Two rows per fold]): each the reference's bits, the second row
        // with other specials than the first (a NaN in one row must not refold the other).
        {
          const std::vector<uint16_t> w = values(dt, n + 1, seed, (specials + 1) % 3);
          const float a0 = ROP == RVL_REDUCE_PROD ? 1.0f : ROP == RVL_REDUCE_MAX ? -INFINITY : 0.0f;
          const float b0 = widen(dt, w[0]);
          float x = a0, y = b0;
          tbbcpu::fold_half2(ROP, dt, &x, p, &y, w.data() + 1, n);
          const float wx = reference<ROP>(dt, a0, p, n), wy = reference<ROP>(dt, b0, w.data() + 1, n);
          if ((!same(x, wx) || !same(y, wy)) && bad++ < 5)
            BOOST_ERROR(name << " fold2 n=" << n << " misalign=" << misalign << " specials=" << specials << ": " << x
                             << ", " << y << ", want " << wx << ", " << wy);
        }
        // Element-wise into accumulators (x.sum(0)'s rows).
        std::vector<float> acc(static_cast<size_t>(n) + 1), want(static_cast<size_t>(n) + 1);
        for (int64_t i = 0; i < n; ++i) acc[i] = want[i] = widen(dt, v[static_cast<size_t>(n - 1 - i) % v.size()]);
        tbbcpu::fold_half_into(ROP, dt, acc.data(), p, n);
        for (int64_t i = 0; i < n; ++i) want[i] = tbbcpu::reduce_combine<RVL_DTYPE_F32>(ROP, want[i], widen(dt, p[i]));
        for (int64_t i = 0; i < n; ++i)
          if (!same(acc[i], want[i]) && bad++ < 5)
            BOOST_ERROR(name << " fold_into n=" << n << " element " << i << ": " << acc[i] << ", want " << want[i]);
      }
  BOOST_TEST(bad == 0, name << ": " << bad << " mismatches");
}

}  // namespace

BOOST_AUTO_TEST_CASE(half_folds_match_the_f32_fold_of_the_widened_values_bit_for_bit) {
  std::printf("half_fold: conversion level %d (3 AVX-512 + AVX512-BF16, 2 AVX-512, 1 AVX2 + F16C, 0 plain)\n", tbbcpu::half_convert_level());
  for (int32_t dt : {RVL_DTYPE_BF16, RVL_DTYPE_F16}) {
    const std::string tag = dt == RVL_DTYPE_BF16 ? "bf16" : "f16";
    check_lengths<RVL_REDUCE_SUM>(dt, (tag + " sum").c_str());
    check_lengths<RVL_REDUCE_MAX>(dt, (tag + " max").c_str());
    check_lengths<RVL_REDUCE_PROD>(dt, (tag + " prod").c_str());
  }
}

// The order-independent check: |fold - exact| <= n * 2^-24 * sum |x| (any summation order of n
// f32 values), the exact sum taken in double.
BOOST_AUTO_TEST_CASE(half_sums_are_within_the_f32_error_bound_of_a_double_sum) {
  for (int32_t dt : {RVL_DTYPE_BF16, RVL_DTYPE_F16}) {
    uint64_t seed = 7;
    for (int64_t n : {5, 33, 1000, 4096, 100000}) {
      const std::vector<uint16_t> v = values(dt, n, seed, 0);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) exact += widen(dt, v[i]), mag += std::fabs(widen(dt, v[i]));
      const float got = tbbcpu::fold_half(RVL_REDUCE_SUM, dt, 0.0f, v.data(), n);
      BOOST_TEST(std::fabs(got - exact) <= static_cast<double>(n) * std::ldexp(1.0, -24) * mag,
                 "dtype " << dt << " n=" << n << ": " << got << " against " << exact);
      float mx = -INFINITY;
      for (int64_t i = 0; i < n; ++i) mx = std::fmax(mx, widen(dt, v[i]));
      BOOST_TEST(tbbcpu::fold_half(RVL_REDUCE_MAX, dt, -INFINITY, v.data(), n) == mx, "max, n=" << n);
    }
  }
}
