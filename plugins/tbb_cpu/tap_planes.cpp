// The tap sums' plane kernels (tap_planes.hpp; Note [Tap sums], tap_rows.cpp).
#include "tap_planes.hpp"

#include "array_ops.hpp"

#include <algorithm>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define RVL_TAP_ROWS_X86 1
#endif

#include <ravel/backend.h>

namespace tbbcpu {
namespace {

void tap_plane_portable(const PlaneTerm* t, int n_terms, int64_t rows, int64_t width, float* out, int64_t out_step) {
  for (int64_t h = 0; h < rows; ++h, out += out_step) {
    for (int64_t j = 0; j < width; ++j) {
      float acc = 0.0f;
      for (int i = 0; i < n_terms; ++i) {
        const PlaneTerm& r = t[i];
        float v;
        if (r.has_row) {
          const bool ok = h >= r.h_lo && h < r.h_hi && j >= r.a && j < r.b;
          const float x = ok ? reinterpret_cast<const float*>(r.p + static_cast<uintptr_t>(h * r.p_step))[j] : 0.0f;
          v = r.has_scalar ? x * r.s[h * r.s_step] : x;
        } else {
          v = r.s[h * r.s_step];
        }
        acc = i == 0 ? v : acc + v;
      }
      out[j] = acc;
    }
  }
}

#ifdef RVL_TAP_ROWS_X86
#pragma GCC push_options
#pragma GCC target("avx512f")
// Lanes j + l with a <= j + l < b (a mask of the low (b - j) lanes without the low (a - j)).
inline __mmask16 span_mask(int64_t a, int64_t b, int64_t j) {
  const int64_t lo = std::clamp<int64_t>(a - j, 0, 16), hi = std::clamp<int64_t>(b - j, 0, 16);
  if (lo >= hi) return 0;
  const uint32_t upto = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
  return static_cast<__mmask16>(upto & ~((1u << lo) - 1u));
}

void tap_plane_avx512(const PlaneTerm* t, int n_terms, int64_t rows, int64_t width, float* out, int64_t out_step) {
  constexpr int kChunks = 64;  // width <= 1024 (tap_rows.cpp: kMaxRow)
  const int64_t chunks = (width + 15) / 16;
  // The lane masks of every term and chunk: the same for every row.
  __mmask16 masks[RVL_MAX_INPUTS][kChunks];
  for (int i = 0; i < n_terms; ++i)
    for (int64_t c = 0; c < chunks; ++c) masks[i][c] = t[i].has_row ? span_mask(t[i].a, t[i].b, 16 * c) : 0;
  for (int64_t h = 0; h < rows; ++h, out += out_step) {
    __m512 sv[RVL_MAX_INPUTS];
    const float* rp[RVL_MAX_INPUTS];
    bool live[RVL_MAX_INPUTS];
    for (int i = 0; i < n_terms; ++i) {
      const PlaneTerm& r = t[i];
      sv[i] = r.has_scalar || !r.has_row ? _mm512_set1_ps(r.s[h * r.s_step]) : _mm512_setzero_ps();
      live[i] = h >= r.h_lo && h < r.h_hi;
      rp[i] = reinterpret_cast<const float*>(r.p + static_cast<uintptr_t>(h * r.p_step));
    }
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t lanes = std::min<int64_t>(16, width - 16 * c);
      __m512 acc = _mm512_setzero_ps();
      for (int i = 0; i < n_terms; ++i) {
        const PlaneTerm& r = t[i];
        __m512 v;
        if (r.has_row) {
          const __mmask16 m = live[i] ? masks[i][c] : 0;
          // Formed from integers: the lanes outside the mask may lie outside the buffer.
          const float* at = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(rp[i]) + 64 * static_cast<uintptr_t>(c));
          const __m512 x = _mm512_maskz_loadu_ps(m, at);
          v = r.has_scalar ? _mm512_mul_ps(x, sv[i]) : x;
        } else {
          v = sv[i];
        }
        acc = i == 0 ? v : _mm512_add_ps(acc, v);
      }
      _mm512_mask_storeu_ps(out + 16 * c, static_cast<__mmask16>(lanes >= 16 ? 0xFFFFu : (1u << lanes) - 1u), acc);
    }
  }
}
// The common form (a depthwise convolution's): every product first, then the per-row values
// (the bias), each per-row value the same for the whole plane (a channel's weight) and every row
// input stepping alike from row to row (shifts of one image). The weights are broadcast once
// per plane, the lane masks set once, and the rows where every tap is inside the image (all but
// the first and last) test nothing per term: a masked load, a multiply and an add per tap and
// 16 lanes. NP > 0: exactly NP products, unrolled (3x3: 9).
template <int NP>
void tap_plane_products_avx512(const PlaneTerm* t, int n_terms, int64_t rows, int64_t width, float* out,
                               int64_t out_step) {
  constexpr int kChunks = 64;
  const int64_t chunks = (width + 15) / 16;
  int n_prod = 0;
  while (n_prod < n_terms && t[n_prod].has_row && t[n_prod].has_scalar) ++n_prod;
  const int np = NP > 0 ? NP : n_prod;
  __mmask16 masks[kChunks][RVL_MAX_INPUTS];
  __m512 sv[RVL_MAX_INPUTS];
  intptr_t shift[RVL_MAX_INPUTS];
  int64_t h_lo = 0, h_hi = rows;
  for (int i = 0; i < n_terms; ++i) {
    sv[i] = _mm512_set1_ps(t[i].s[0]);
    if (i >= np) continue;
    shift[i] = static_cast<intptr_t>(t[i].p - t[0].p);
    h_lo = std::max(h_lo, t[i].h_lo);
    h_hi = std::min(h_hi, t[i].h_hi);
    for (int64_t c = 0; c < chunks; ++c) masks[c][i] = span_mask(t[i].a, t[i].b, 16 * c);
  }
  const int64_t step = t[0].p_step;
  for (int64_t h = 0; h < rows; ++h, out += out_step) {
    const uintptr_t row = t[0].p + static_cast<uintptr_t>(h * step);
    const bool interior = h >= h_lo && h < h_hi;
    __mmask16 live[RVL_MAX_INPUTS] = {};
    if (!interior)
      for (int i = 0; i < np; ++i) live[i] = h >= t[i].h_lo && h < t[i].h_hi ? 0xFFFF : 0;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t lanes = std::min<int64_t>(16, width - 16 * c);
      const uintptr_t at = row + 64 * static_cast<uintptr_t>(c);
      const __mmask16* m = masks[c];
      auto product = [&](int i) {
        const __mmask16 k = interior ? m[i] : static_cast<__mmask16>(m[i] & live[i]);
        // Formed from integers: the lanes outside the mask may lie outside the buffer.
        const float* x = reinterpret_cast<const float*>(at + static_cast<uintptr_t>(shift[i]));
        return _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x), sv[i]);
      };
      __m512 acc = product(0);
      if constexpr (NP > 0) {
#pragma GCC unroll 16
        for (int i = 1; i < NP; ++i) acc = _mm512_add_ps(acc, product(i));
      } else {
        for (int i = 1; i < np; ++i) acc = _mm512_add_ps(acc, product(i));
      }
      for (int i = np; i < n_terms; ++i) acc = _mm512_add_ps(acc, sv[i]);
      _mm512_mask_storeu_ps(out + 16 * c, static_cast<__mmask16>(lanes >= 16 ? 0xFFFFu : (1u << lanes) - 1u), acc);
    }
  }
}
#pragma GCC pop_options
#endif

}  // namespace

// products_first: the terms are `products` products, then per-row values, all of them one
// value per plane, the row inputs stepping alike (tap_plane_products_avx512).
TapPlaneFn select_tap_plane(bool products_first, int products) {
#ifdef RVL_TAP_ROWS_X86
  if (simd_tier() >= kSimdAvx512) {
    if (!products_first) return &tap_plane_avx512;
    return products == 9 ? &tap_plane_products_avx512<9> : &tap_plane_products_avx512<0>;
  }
#endif
  return &tap_plane_portable;
}

}  // namespace tbbcpu
