// Note [Half programs as one fused loop]
// A program over f16 or bf16 values computes in f32 (Note [Halves in f32]): LOAD half -> CAST
// f32 -> f32 ops -> CAST half. The block evaluator ran each CAST as a pass of its own (bf16 folded
// its casts into the first and last f32 ops: Note [Casts folded into their readers]; f16 kept
// every pass), so `exp(a) * b + c` in f16 was 8 passes per block and its bf16 form 4 passes that
// each widen or narrow in a different array loop, while the f32 program is one fused loop
// (Note [Fused loops]). Here such a program is one fused loop too: a widening CAST of a half input
// is a step that converts the input's chunk into a chunk register (16-bit values read straight
// from memory), and a final narrowing CAST is a step that rounds the last chunk register into
// the output. The values in between are the f32 program's, chunk by chunk, in L1.
//
// Bits: widening is exact, and the narrowing is half_convert.cpp's rule in every tier (bf16: the
// integer round to nearest even, NaN made quiet, written as a plain loop that every tier's
// clone vectorises; f16: F16C's vcvtps2ph with round to nearest even, which half_convert.cpp and
// tests/core/test_half.cpp show equal to <ravel/half.hpp>, and <ravel/half.hpp> itself in the
// portable tier). So every element is rounded once from the same f32 value as the passes give
// (tests: tbb_array_tiers' half fused loops against the passes' conversions, bit for bit in every
// tier; tbb_half_fused_loops through the API).
//
// The helpers below are inlined into fused_loop.cpp's per-tier clones: each F16C one carries
// its own target attribute (a subset of its clone's), so GCC inlines it there and nowhere else
// (an always_inline helper with intrinsics would not compile outside such a clone).
#pragma once

#include <ravel/half.hpp>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RVL_TBB_HALF_CHUNK_X86 1
#endif

namespace tbbcpu {
namespace {

[[gnu::always_inline]] inline void widen_bf16_chunk(float* __restrict d, const uint16_t* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(s[i]) << 16;
    std::memcpy(d + i, &u, 4);
  }
}

// half_convert.cpp's f32_to_bf16 rule: add 0x7FFF plus the lowest kept bit (a carry reaches
// infinity by itself); a NaN keeps its top half, made quiet.
[[gnu::always_inline]] inline void narrow_bf16_chunk(uint16_t* __restrict d, const float* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, s + i, 4);
    const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    d[i] = static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : rounded);
  }
}

inline void widen_f16_plain(float* __restrict d, const uint16_t* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = rvl::f32_from_f16_bits(s[i]);
}
inline void narrow_f16_plain(uint16_t* __restrict d, const float* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = rvl::f16_bits_from(s[i]);
}

#ifdef RVL_TBB_HALF_CHUNK_X86
// GCC 12's false positive on the 512-bit intrinsics' "undefined" pass-through operand, as in
// half_convert.cpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// 8 at a time with F16C; the rest (the block's last, short chunk) through <ravel/half.hpp>.
__attribute__((target("avx2,f16c"))) inline void widen_f16_f16c(float* __restrict d, const uint16_t* __restrict s,
                                                                int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  widen_f16_plain(d + i, s + i, n - i);
}
__attribute__((target("avx2,f16c"))) inline void narrow_f16_f16c(uint16_t* __restrict d, const float* __restrict s,
                                                                 int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  narrow_f16_plain(d + i, s + i, n - i);
}
// 16 at a time, the rest as one masked vector (Note [Masked tails] in half_convert.cpp).
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void widen_f16_avx512(float* __restrict d,
                                                                                  const uint16_t* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = static_cast<__mmask16>(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(d + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i)));
  }
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void narrow_f16_avx512(uint16_t* __restrict d,
                                                                                   const float* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = static_cast<__mmask16>(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1u);
    const __m512 x = _mm512_maskz_loadu_ps(m, s + i);
    _mm256_mask_storeu_epi16(d + i, m, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}
#pragma GCC diagnostic pop
#endif

// The f16 conversions of tier TIER (a SimdTier; the AVX2 one needs F16C, which fused_loop.cpp
// checks before it picks that tier for a program with f16 values).
template <int TIER>
[[gnu::always_inline]] inline void widen_f16_chunk(float* d, const uint16_t* s, int64_t n) {
#ifdef RVL_TBB_HALF_CHUNK_X86
  if constexpr (TIER >= 2) return widen_f16_avx512(d, s, n);
  if constexpr (TIER == 1) return widen_f16_f16c(d, s, n);
#endif
  widen_f16_plain(d, s, n);
}
template <int TIER>
[[gnu::always_inline]] inline void narrow_f16_chunk(uint16_t* d, const float* s, int64_t n) {
#ifdef RVL_TBB_HALF_CHUNK_X86
  if constexpr (TIER >= 2) return narrow_f16_avx512(d, s, n);
  if constexpr (TIER == 1) return narrow_f16_f16c(d, s, n);
#endif
  narrow_f16_plain(d, s, n);
}

// The conversion steps of a fused loop (fused_loop.cpp): codes below every rvl_op. A widening
// step reads 16-bit values at its source, a narrowing one writes them.
constexpr int32_t kWidenF16 = -1, kWidenBf16 = -2, kNarrowF16 = -3, kNarrowBf16 = -4;

// A conversion step over len elements of the chunk at i0 (Note [Half programs as one fused
// loop]); a, d: 16-bit values where the step reads or writes halves. n == C: the unrolled form.
template <int64_t C, int TIER>
[[gnu::always_inline]] inline void convert_step(int32_t op, float* d, int64_t ds, const float* a, int64_t as, int64_t i0,
                                           int64_t n) {
  const auto* ha = reinterpret_cast<const uint16_t*>(a) + i0 * as;
  auto* hd = reinterpret_cast<uint16_t*>(d) + i0 * ds;
  float* fd = d + i0 * ds;
  const float* fa = a + i0 * as;
  switch (op) {
    case kWidenBf16: n == C ? widen_bf16_chunk(fd, ha, C) : widen_bf16_chunk(fd, ha, n); break;
    case kWidenF16: n == C ? widen_f16_chunk<TIER>(fd, ha, C) : widen_f16_chunk<TIER>(fd, ha, n); break;
    case kNarrowBf16: n == C ? narrow_bf16_chunk(hd, fa, C) : narrow_bf16_chunk(hd, fa, n); break;
    default: n == C ? narrow_f16_chunk<TIER>(hd, fa, C) : narrow_f16_chunk<TIER>(hd, fa, n); break;
  }
}

}  // namespace
}  // namespace tbbcpu
