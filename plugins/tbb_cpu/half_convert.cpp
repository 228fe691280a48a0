#include "half_convert.hpp"

#include <ravel/half.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RVL_TBB_HAVE_F16C 1
#endif

namespace tbbcpu {

namespace {

// F16C's VCVTPS2PH with round-to-nearest-even gives what <ravel/half.hpp> gives for every input
// (NaN quieted with its top payload bits, overflow to infinity, subnormals kept; MXCSR's DAZ/FTZ
// do not apply to it), and VCVTPH2PS is exact: tested over every f16 pattern and the f32
// neighbourhood of every f16 value through this plugin (tests/core/test_half.cpp). bf16 is
// integer arithmetic (f32_to_bf16 below), the same in every width.
// Note [Half conversion levels]: the widest loops the CPU has are chosen once per process:
// AVX-512 (F + BW + VL: 16 values a step, F16C's 512-bit forms; the tail as one masked step,
// Note [Masked tails]), else AVX2 + F16C (8), else the
// plain loops (the baseline build's SSE2 vectorisation of the bf16 loops, <ravel/half.hpp>
// for f16). RAVEL_TBB_SIMD=portable forces the plain loops, RAVEL_TBB_SIMD=avx2 caps them at
// AVX2 (ctest runs tests/core/test_half.cpp's device checks under both: every level is checked
// bit for bit on a CPU that has AVX-512).
// A CPU with AVX512-BF16 (and VL) narrows f32 to bf16 with vcvtneps2bf16 (Note [Exact
// vcvtneps2bf16]); RAVEL_TBB_SIMD=avx512 caps the conversions at the integer AVX-512 loops (ctest
// runs the device checks that way too).
enum Level { kPlain = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3 };
int level() {
  static const int on = [] {
    const char* env = std::getenv("RAVEL_TBB_SIMD");
    if (env && std::strcmp(env, "portable") == 0) return int{kPlain};
#ifdef RVL_TBB_HAVE_F16C
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl");
    const bool bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
    if (bf16 && !(env && (std::strcmp(env, "avx2") == 0 || std::strcmp(env, "avx512") == 0))) return int{kAvx512Bf16};
    if (avx512 && !(env && std::strcmp(env, "avx2") == 0)) return int{kAvx512};
    return avx2 ? int{kAvx2} : int{kPlain};
#else
    return int{kPlain};
#endif
  }();
  return on;
}

#ifdef RVL_TBB_HAVE_F16C
// GCC 12 warns that the unmasked 512-bit intrinsics' own "undefined" pass-through operand may be
// used uninitialised (a false positive inside <immintrin.h>, GCC 12); warnings stay at
// zero in this tree, hence the push.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Note [Masked tails]
// The AVX-512 loops convert whole vectors of 16 and then the rest as one more vector under a
// mask (masked loads do not fault on the lanes left out, masked stores do not write them), so a
// short or ragged run (a 27-column row of a small GEMM's output, a 200-long row of its A) costs
// one more vector instead of an AVX2 pass plus a scalar loop of up to 15 values. The masked
// lanes compute exactly as full ones, so the bits do not change.
#define RVL_AVX512_HALF __attribute__((target("avx512f,avx512bw,avx512vl")))
RVL_AVX512_HALF inline __mmask16 tail_mask(int64_t left) {
  return static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
}
RVL_AVX512_HALF inline __m512 load_f32(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
RVL_AVX512_HALF inline __m256i load_16(const uint16_t* p, __mmask16 m) { return _mm256_maskz_loadu_epi16(m, p); }
RVL_AVX512_HALF inline void store_16(uint16_t* p, __mmask16 m, __m256i v) { _mm256_mask_storeu_epi16(p, m, v); }

// Runs step(i, mask) over [0, n): full vectors, then one masked one.
template <class Step>
RVL_AVX512_HALF inline int64_t masked_loop(int64_t n, const Step& step) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) step(i, static_cast<__mmask16>(0xFFFFu));
  if (i < n) step(i, tail_mask(n - i));
  return n;
}

RVL_AVX512_HALF int64_t f32_to_bf16_avx512(uint16_t* dst, const float* src, int64_t n) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
  const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  return masked_loop(n, [&](int64_t i, __mmask16 m) RVL_AVX512_HALF {
    const __m512i u = _mm512_castps_si512(load_f32(src + i, m));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
    const __m512i hi = _mm512_srli_epi32(u, 16);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(hi, one)), 16);
    const __m512i r = _mm512_mask_or_epi32(rounded, nan, hi, quiet);  // a NaN: its top half, quiet
    store_16(dst + i, m, _mm512_cvtepi32_epi16(r));
  });
}
// Note [Exact vcvtneps2bf16]
// AVX512-BF16's vcvtneps2bf16 rounds 16 f32 to bf16 in one instruction, and Intel's SDM
// (convert_fp32_to_bfloat16) gives it exactly f32_to_bf16's rule below for every input but one
// class: a NaN becomes its top half made quiet, a normal or infinite value x becomes
// (x + 0x7FFF + lowest kept bit) >> 16 (so overflow carries into infinity), but a denormal input
// becomes a signed zero whatever MXCSR says, where <ravel/half.hpp> rounds it to the nearest bf16
// subnormal. Lanes whose exponent is zero and mantissa non-zero are therefore redone with the
// integer rounding (a masked blend, run only when a vector holds one), so the results are
// bitwise decision 40's, and this loop is the default where the CPU has the instruction (the
// device checks of tests/core/test_half.cpp cover subnormals, ties and NaN payloads at every
// level). It takes about half the instructions of the integer loop, which rounds the output of
// every bf16 kernel.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) int64_t f32_to_bf16_avx512bf16(uint16_t* dst, const float* src,
                                                                                              int64_t n) {
  const __m512i exp_mask = _mm512_set1_epi32(0x7F800000), man_mask = _mm512_set1_epi32(0x007FFFFF);
  const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
  // Written out (not masked_loop): the step has a target masked_loop lacks, so it would not inline.
  auto step = [&](int64_t i, __mmask16 m) __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), always_inline)) {
    const __m512 x = load_f32(src + i, m);
    __m256i r = (__m256i)_mm512_cvtneps_pbh(x);
    const __m512i u = _mm512_castps_si512(x);
    const __mmask16 sub = _mm512_testn_epi32_mask(u, exp_mask) & _mm512_test_epi32_mask(u, man_mask);
    if (sub != 0) {
      const __m512i rounded =
          _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(_mm512_srli_epi32(u, 16), one)), 16);
      r = _mm256_mask_mov_epi16(r, sub, _mm512_cvtepi32_epi16(rounded));
    }
    store_16(dst + i, m, r);
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) step(i, static_cast<__mmask16>(0xFFFFu));
  if (i < n) step(i, tail_mask(n - i));
  return n;
}
RVL_AVX512_HALF int64_t bf16_to_f32_avx512(float* dst, const uint16_t* src, int64_t n) {
  return masked_loop(n, [&](int64_t i, __mmask16 m) RVL_AVX512_HALF {
    const __m512i w = _mm512_cvtepu16_epi32(load_16(src + i, m));
    _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  });
}
RVL_AVX512_HALF int64_t f32_to_f16_avx512(uint16_t* dst, const float* src, int64_t n) {
  return masked_loop(n, [&](int64_t i, __mmask16 m) RVL_AVX512_HALF {
    store_16(dst + i, m, _mm512_cvtps_ph(load_f32(src + i, m), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  });
}
RVL_AVX512_HALF int64_t f16_to_f32_avx512(float* dst, const uint16_t* src, int64_t n) {
  return masked_loop(n, [&](int64_t i, __mmask16 m) RVL_AVX512_HALF {
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(load_16(src + i, m)));
  });
}
// widen_rows at this level: each row one masked_loop, then its padding zeroed.
template <bool F16>
RVL_AVX512_HALF void widen_rows_avx512(float* dst, int64_t ldd, const uint16_t* src, int64_t lds, int64_t rows,
                                       int64_t n, int64_t width) {
  for (int64_t r = 0; r < rows; ++r, dst += ldd, src += lds) {
    masked_loop(n, [&](int64_t i, __mmask16 m) RVL_AVX512_HALF {
      const __m256i h = load_16(src + i, m);
      const __m512 x = F16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      _mm512_mask_storeu_ps(dst + i, m, x);
    });
    for (int64_t j = n; j < width; j += 16) _mm512_mask_storeu_ps(dst + j, tail_mask(width - j), _mm512_setzero_ps());
  }
}
#undef RVL_AVX512_HALF
#pragma GCC diagnostic pop
#endif

#ifdef RVL_TBB_HAVE_F16C
// f32_to_bf16's rounding, 8 lanes: packus_epi32 narrows the (non-negative, < 2^16) results per
// 128-bit half, and the permute puts the two halves' four values back in order.
__attribute__((target("avx2"))) int64_t f32_to_bf16_avx2(uint16_t* dst, const float* src, int64_t n) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i out[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i + 8 * h));
      const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
      const __m256i hi = _mm256_srli_epi32(u, 16);
      const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one)), 16);
      out[h] = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), nan);
    }
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(out[0], out[1]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  return i;
}
__attribute__((target("avx2"))) int64_t bf16_to_f32_avx2(float* dst, const uint16_t* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(w, 16));
  }
  return i;
}

__attribute__((target("f16c,avx"))) int64_t f32_to_f16_f16c(uint16_t* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return i;
}
__attribute__((target("f16c,avx"))) int64_t f16_to_f32_f16c(float* dst, const uint16_t* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  return i;
}
#endif

}  // namespace

int half_convert_level() { return level(); }

void f32_to_f16(uint16_t* dst, const float* src, int64_t n) {
  int64_t i = 0;
#ifdef RVL_TBB_HAVE_F16C
  const int l = level();
  if (l >= kAvx512) i = f32_to_f16_avx512(dst, src, n);
  if (l >= kAvx2) i += f32_to_f16_f16c(dst + i, src + i, n - i);
#endif
  for (; i < n; ++i) dst[i] = rvl::f16_bits_from(src[i]);
}

void f16_to_f32(float* dst, const uint16_t* src, int64_t n) {
  int64_t i = 0;
#ifdef RVL_TBB_HAVE_F16C
  const int l = level();
  if (l >= kAvx512) i = f16_to_f32_avx512(dst, src, n);
  if (l >= kAvx2) i += f16_to_f32_f16c(dst + i, src + i, n - i);
#endif
  for (; i < n; ++i) dst[i] = rvl::f32_from_f16_bits(src[i]);
}

// bf16 is the top half of an f32: round to nearest even by adding 0x7FFF plus the lowest kept
// bit (the carry moves into the exponent, up to infinity, by itself); a NaN keeps its top bits
// and is made quiet. Branch-free, so GCC vectorises it.
void f32_to_bf16(uint16_t* dst, const float* src, int64_t n) {
  int64_t i = 0;
#ifdef RVL_TBB_HAVE_F16C
  const int l = level();
  if (l == kAvx512Bf16) i = f32_to_bf16_avx512bf16(dst, src, n);
  else if (l == kAvx512) i = f32_to_bf16_avx512(dst, src, n);
  if (l >= kAvx2) i += f32_to_bf16_avx2(dst + i, src + i, n - i);
#endif
  for (; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    dst[i] = static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : rounded);
  }
}

void bf16_to_f32(float* dst, const uint16_t* src, int64_t n) {
  int64_t i = 0;
#ifdef RVL_TBB_HAVE_F16C
  const int l = level();
  if (l >= kAvx512) i = bf16_to_f32_avx512(dst, src, n);
  if (l >= kAvx2) i += bf16_to_f32_avx2(dst + i, src + i, n - i);
#endif
  for (; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

void widen_rows(bool f16, float* dst, int64_t ldd, const uint16_t* src, int64_t lds, int64_t rows, int64_t n,
                int64_t width) {
#ifdef RVL_TBB_HAVE_F16C
  if (level() >= kAvx512) return f16 ? widen_rows_avx512<true>(dst, ldd, src, lds, rows, n, width)
                                     : widen_rows_avx512<false>(dst, ldd, src, lds, rows, n, width);
#endif
  for (int64_t r = 0; r < rows; ++r, dst += ldd, src += lds) {
    f16 ? f16_to_f32(dst, src, n) : bf16_to_f32(dst, src, n);
    std::fill(dst + n, dst + width, 0.0f);
  }
}

}  // namespace tbbcpu
