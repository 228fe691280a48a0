#include "half_convert.hpp"

#include <ravel/half.hpp>

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
// neighbourhood of every f16 value through this plugin (tests/core/test_half.cpp).
// RAVEL_TBB_SIMD=portable forces the scalar loops, as for the other array loops.
bool use_f16c() {
  static const bool on = [] {
    const char* env = std::getenv("RAVEL_TBB_SIMD");
    if (env && std::strcmp(env, "portable") == 0) return false;
#ifdef RVL_TBB_HAVE_F16C
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#else
    return false;
#endif
  }();
  return on;
}

#ifdef RVL_TBB_HAVE_F16C
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

void f32_to_f16(uint16_t* dst, const float* src, int64_t n) {
  int64_t i = 0;
#ifdef RVL_TBB_HAVE_F16C
  if (use_f16c()) i = f32_to_f16_f16c(dst, src, n);
#endif
  for (; i < n; ++i) dst[i] = rvl::f16_bits_from(src[i]);
}

void f16_to_f32(float* dst, const uint16_t* src, int64_t n) {
  int64_t i = 0;
#ifdef RVL_TBB_HAVE_F16C
  if (use_f16c()) i = f16_to_f32_f16c(dst, src, n);
#endif
  for (; i < n; ++i) dst[i] = rvl::f32_from_f16_bits(src[i]);
}

// bf16 is the top half of an f32: round to nearest even by adding 0x7FFF plus the lowest kept
// bit (the carry moves into the exponent, up to infinity, by itself); a NaN keeps its top bits
// and is made quiet. Branch-free, so GCC vectorises it.
void f32_to_bf16(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    dst[i] = static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : rounded);
  }
}

void bf16_to_f32(float* dst, const uint16_t* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

}  // namespace tbbcpu
