#include "half_fold.hpp"

#include "dtype_ops.hpp"
#include "fold.hpp"
#include "half_convert.hpp"
#include "tuning_env.hpp"

#include <ravel/half.hpp>

#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RVL_TBB_HAVE_X86 1
#endif

namespace tbbcpu {

// Note [Widening in the fold]
// A half reduction is an f32 program (Note [Halves in f32]) whose last instruction widens the
// half values: LOAD bf16 -> CAST f32 for `x.sum(1)`. Run as written, each block of 1,024 values
// is read at 2 bytes, widened into a 4 KiB scratch slot by the CAST's pass, and read again by the
// fold: on a 4096² sum that extra pass made the bf16 row only 1.2-1.3x the f32 one although it
// moves half the bytes (docs/performance.md §11). The reduction now folds the CAST's source
// instead (Evaluator::fold_eval) and widens in registers: a bf16 is the top half of an f32 (a
// zero-extension and a shift), an f16 goes through F16C's vcvtph2ps, both exact.
// The order is fold.hpp's for f32 (Note [Vectorised horizontal reductions]): 16 lanes of 4
// bytes, the first 16 values as their start, a fixed tree at the end, the tail left to right;
// MAX tracks x - x and refolds left to right when a NaN or infinity was seen. Widening is exact
// and every lane sees the same values in the same order, so the results are bit for bit those
// of the CAST-then-fold path (tests/core/test_half_fold.cpp compares both, and an f64
// reference). Levels as Note [Half conversion levels]: AVX-512 (one 16-lane vector), AVX2 (two
// 8-lane halves of the same 16 lanes), else the values widened into a buffer and folded by
// fold.hpp itself (RAVEL_TBB_SIMD=portable), which is the old path.
namespace {

float widen1(bool f16, uint16_t h) { return f16 ? rvl::f32_from_f16_bits(h) : rvl::f32_from_bf16_bits(h); }

template <int ROP>
float fold_linear_half(bool f16, float acc, const uint16_t* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc = reduce_combine<RVL_DTYPE_F32>(ROP, acc, widen1(f16, v[i]));
  return acc;
}

// The lanes' end (fold.hpp): the tree over 16 lanes, then acc and the tail.
template <int ROP>
float finish(bool f16, float acc, float* lane, const uint16_t* v, int64_t i, int64_t n) {
  for (int w = 8; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] = reduce_combine<RVL_DTYPE_F32>(ROP, lane[j], lane[j + w]);
  acc = reduce_combine<RVL_DTYPE_F32>(ROP, acc, lane[0]);
  return fold_linear_half<ROP>(f16, acc, v + i, n - i);
}

template <int ROP>
float fold_plain(bool f16, float acc, const uint16_t* v, int64_t n) {
  thread_local std::vector<float> w;
  if (static_cast<int64_t>(w.size()) < n) w.resize(static_cast<size_t>(n));
  f16 ? f16_to_f32(w.data(), v, n) : bf16_to_f32(w.data(), v, n);
  return fold<RVL_DTYPE_F32, ROP>(acc, w.data(), n);
}

#ifdef RVL_TBB_HAVE_X86
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in half_convert.cpp (GCC 12)
template <bool F16>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512 widen16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (F16) return _mm512_cvtph_ps(h);
  else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

template <int ROP, bool F16>
__attribute__((target("avx512f,avx512bw"))) float fold_avx512(float acc, const uint16_t* v, int64_t n) {
  if (n < 32) return fold_linear_half<ROP>(F16, acc, v, n);
  __m512 lane = widen16<F16>(v);
  __m512 chk = _mm512_sub_ps(lane, lane);
  int64_t i = 16;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = widen16<F16>(v + i);
    if constexpr (ROP == RVL_REDUCE_SUM) {
      lane = _mm512_add_ps(lane, x);
    } else if constexpr (ROP == RVL_REDUCE_MAX) {
      lane = _mm512_max_ps(x, lane);  // x > lane ? x : lane, i.e. fold's `lane < x ? x : lane`
      chk = _mm512_add_ps(chk, _mm512_sub_ps(x, x));
    } else {
      lane = _mm512_mul_ps(lane, x);
    }
  }
  if constexpr (ROP == RVL_REDUCE_MAX)
    if (_mm512_cmp_ps_mask(chk, chk, _CMP_UNORD_Q) != 0) return fold_linear_half<ROP>(F16, acc, v, n);
  alignas(64) float l[16];
  _mm512_store_ps(l, lane);
  return finish<ROP>(F16, acc, l, v, i, n);
}

// Note [Two rows per fold]
// Each lane of fold_avx512 is one chain of dependent adds (16 values per add, in the lane order
// that keeps the bits): on AMD Zen 4 (2026-12-07) a bf16 `x.sum(1)` row ran at that chain's
// latency, below memory speed, and no faster than the f32 row that moves twice the bytes
// (docs/performance.md §11, "Zen 4"). The lanes' order cannot change, but two rows are two
// outputs: folded in one loop they are two independent chains, so the adds overlap. Each row's
// lanes, tree and tail are exactly fold_half's (tests: tbb_half_fold_*).
template <int ROP, bool F16>
__attribute__((target("avx512f,avx512bw"))) void fold2_avx512(float* acc0, const uint16_t* v0, float* acc1,
                                                              const uint16_t* v1, int64_t n) {
  if (n < 32) {
    *acc0 = fold_avx512<ROP, F16>(*acc0, v0, n);
    *acc1 = fold_avx512<ROP, F16>(*acc1, v1, n);
    return;
  }
  __m512 l0 = widen16<F16>(v0), l1 = widen16<F16>(v1);
  __m512 c0 = _mm512_sub_ps(l0, l0), c1 = _mm512_sub_ps(l1, l1);
  int64_t i = 16;
  for (; i + 16 <= n; i += 16) {
    const __m512 x0 = widen16<F16>(v0 + i), x1 = widen16<F16>(v1 + i);
    if constexpr (ROP == RVL_REDUCE_SUM) {
      l0 = _mm512_add_ps(l0, x0), l1 = _mm512_add_ps(l1, x1);
    } else if constexpr (ROP == RVL_REDUCE_MAX) {
      l0 = _mm512_max_ps(x0, l0), l1 = _mm512_max_ps(x1, l1);
      c0 = _mm512_add_ps(c0, _mm512_sub_ps(x0, x0)), c1 = _mm512_add_ps(c1, _mm512_sub_ps(x1, x1));
    } else {
      l0 = _mm512_mul_ps(l0, x0), l1 = _mm512_mul_ps(l1, x1);
    }
  }
  alignas(64) float l[16];
  if (ROP == RVL_REDUCE_MAX && _mm512_cmp_ps_mask(c0, c0, _CMP_UNORD_Q) != 0) {
    *acc0 = fold_linear_half<ROP>(F16, *acc0, v0, n);
  } else {
    _mm512_store_ps(l, l0);
    *acc0 = finish<ROP>(F16, *acc0, l, v0, i, n);
  }
  if (ROP == RVL_REDUCE_MAX && _mm512_cmp_ps_mask(c1, c1, _CMP_UNORD_Q) != 0) {
    *acc1 = fold_linear_half<ROP>(F16, *acc1, v1, n);
  } else {
    _mm512_store_ps(l, l1);
    *acc1 = finish<ROP>(F16, *acc1, l, v1, i, n);
  }
}

// s_max (dtype_ops.hpp) in lanes: a's NaN, else b's NaN, else a < b ? b : a.
__attribute__((target("avx512f"), always_inline)) inline __m512 max512(__m512 a, __m512 b) {
  const __mmask16 take_b = _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ) |
                           (_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q));
  return _mm512_mask_blend_ps(take_b, a, b);
}

template <int ROP, bool F16>
__attribute__((target("avx512f,avx512bw"))) int64_t fold_into_avx512(float* acc, const uint16_t* v, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_loadu_ps(acc + i), x = widen16<F16>(v + i);
    const __m512 r = ROP == RVL_REDUCE_SUM ? _mm512_add_ps(a, x) : ROP == RVL_REDUCE_MAX ? max512(a, x) : _mm512_mul_ps(a, x);
    _mm512_storeu_ps(acc + i, r);
  }
  return i;
}
#pragma GCC diagnostic pop

template <bool F16>
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 widen8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (F16) return _mm256_cvtph_ps(h);
  else return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

template <int ROP>
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 step8(__m256 lane, __m256 x, __m256& chk) {
  if constexpr (ROP == RVL_REDUCE_SUM) return _mm256_add_ps(lane, x);
  if constexpr (ROP == RVL_REDUCE_MAX) {
    chk = _mm256_add_ps(chk, _mm256_sub_ps(x, x));
    return _mm256_max_ps(x, lane);
  }
  return _mm256_mul_ps(lane, x);
}

// fold_avx2's end: MAX's refold when a NaN or infinity was seen, else the lanes' tree and tail.
template <int ROP, bool F16>
__attribute__((target("avx2,f16c"), always_inline)) inline float finish_avx2(float acc, const uint16_t* v, int64_t i,
                                                                             int64_t n, __m256 lo, __m256 hi,
                                                                             __m256 clo, __m256 chi) {
  if constexpr (ROP == RVL_REDUCE_MAX) {
    const __m256 c = _mm256_add_ps(clo, chi);
    if (_mm256_movemask_ps(_mm256_cmp_ps(c, c, _CMP_UNORD_Q)) != 0) return fold_linear_half<ROP>(F16, acc, v, n);
  }
  alignas(32) float l[16];
  _mm256_store_ps(l, lo);
  _mm256_store_ps(l + 8, hi);
  return finish<ROP>(F16, acc, l, v, i, n);
}

template <int ROP, bool F16>
__attribute__((target("avx2,f16c"))) float fold_avx2(float acc, const uint16_t* v, int64_t n) {
  if (n < 32) return fold_linear_half<ROP>(F16, acc, v, n);
  __m256 lo = widen8<F16>(v), hi = widen8<F16>(v + 8);  // lanes 0-7 and 8-15
  __m256 chk_lo = _mm256_sub_ps(lo, lo), chk_hi = _mm256_sub_ps(hi, hi);
  int64_t i = 16;
  for (; i + 16 <= n; i += 16) {
    lo = step8<ROP>(lo, widen8<F16>(v + i), chk_lo);
    hi = step8<ROP>(hi, widen8<F16>(v + i + 8), chk_hi);
  }
  return finish_avx2<ROP, F16>(acc, v, i, n, lo, hi, chk_lo, chk_hi);
}

// Note [Two rows per fold] at AVX2: the same 16 lanes per row as fold_avx2 (two 8-lane halves).
template <int ROP, bool F16>
__attribute__((target("avx2,f16c"))) void fold2_avx2(float* acc0, const uint16_t* v0, float* acc1,
                                                     const uint16_t* v1, int64_t n) {
  if (n < 32) {
    *acc0 = fold_avx2<ROP, F16>(*acc0, v0, n);
    *acc1 = fold_avx2<ROP, F16>(*acc1, v1, n);
    return;
  }
  __m256 lo0 = widen8<F16>(v0), hi0 = widen8<F16>(v0 + 8), lo1 = widen8<F16>(v1), hi1 = widen8<F16>(v1 + 8);
  __m256 clo0 = _mm256_sub_ps(lo0, lo0), chi0 = _mm256_sub_ps(hi0, hi0);
  __m256 clo1 = _mm256_sub_ps(lo1, lo1), chi1 = _mm256_sub_ps(hi1, hi1);
  int64_t i = 16;
  for (; i + 16 <= n; i += 16) {
    lo0 = step8<ROP>(lo0, widen8<F16>(v0 + i), clo0);
    hi0 = step8<ROP>(hi0, widen8<F16>(v0 + i + 8), chi0);
    lo1 = step8<ROP>(lo1, widen8<F16>(v1 + i), clo1);
    hi1 = step8<ROP>(hi1, widen8<F16>(v1 + i + 8), chi1);
  }
  *acc0 = finish_avx2<ROP, F16>(*acc0, v0, i, n, lo0, hi0, clo0, chi0);
  *acc1 = finish_avx2<ROP, F16>(*acc1, v1, i, n, lo1, hi1, clo1, chi1);
}

__attribute__((target("avx2"), always_inline)) inline __m256 max256(__m256 a, __m256 b) {
  const __m256 take_b = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ),
                                     _mm256_and_ps(_mm256_cmp_ps(b, b, _CMP_UNORD_Q), _mm256_cmp_ps(a, a, _CMP_ORD_Q)));
  return _mm256_blendv_ps(a, b, take_b);
}

template <int ROP, bool F16>
__attribute__((target("avx2,f16c"))) int64_t fold_into_avx2(float* acc, const uint16_t* v, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_loadu_ps(acc + i), x = widen8<F16>(v + i);
    const __m256 r = ROP == RVL_REDUCE_SUM ? _mm256_add_ps(a, x) : ROP == RVL_REDUCE_MAX ? max256(a, x) : _mm256_mul_ps(a, x);
    _mm256_storeu_ps(acc + i, r);
  }
  return i;
}
#endif

template <int ROP>
float fold_half_op(bool f16, float acc, const uint16_t* v, int64_t n) {
#ifdef RVL_TBB_HAVE_X86
  const int level = half_convert_level();
  if (level >= 2) return f16 ? fold_avx512<ROP, true>(acc, v, n) : fold_avx512<ROP, false>(acc, v, n);
  if (level == 1) return f16 ? fold_avx2<ROP, true>(acc, v, n) : fold_avx2<ROP, false>(acc, v, n);
#endif
  return fold_plain<ROP>(f16, acc, v, n);
}

template <int ROP>
void fold_half2_op(bool f16, float* acc0, const uint16_t* v0, float* acc1, const uint16_t* v1, int64_t n) {
#ifdef RVL_TBB_HAVE_X86
  const int level = half_convert_level();
  if (level >= 2) return f16 ? fold2_avx512<ROP, true>(acc0, v0, acc1, v1, n) : fold2_avx512<ROP, false>(acc0, v0, acc1, v1, n);
  if (level == 1) return f16 ? fold2_avx2<ROP, true>(acc0, v0, acc1, v1, n) : fold2_avx2<ROP, false>(acc0, v0, acc1, v1, n);
#endif
  *acc0 = fold_plain<ROP>(f16, *acc0, v0, n);
  *acc1 = fold_plain<ROP>(f16, *acc1, v1, n);
}

template <int ROP>
void fold_half_into_op(bool f16, float* acc, const uint16_t* v, int64_t n) {
  int64_t i = 0;
#ifdef RVL_TBB_HAVE_X86
  const int level = half_convert_level();
  if (level >= 2) i = f16 ? fold_into_avx512<ROP, true>(acc, v, n) : fold_into_avx512<ROP, false>(acc, v, n);
  else if (level == 1) i = f16 ? fold_into_avx2<ROP, true>(acc, v, n) : fold_into_avx2<ROP, false>(acc, v, n);
#endif
  for (; i < n; ++i) acc[i] = reduce_combine<RVL_DTYPE_F32>(ROP, acc[i], widen1(f16, v[i]));
}

}  // namespace

float fold_half(int32_t rop, int32_t half_dtype, float acc, const uint16_t* v, int64_t n) {
  const bool f16 = half_dtype == RVL_DTYPE_F16;
  switch (rop) {
    case RVL_REDUCE_SUM: return fold_half_op<RVL_REDUCE_SUM>(f16, acc, v, n);
    case RVL_REDUCE_MAX: return fold_half_op<RVL_REDUCE_MAX>(f16, acc, v, n);
    default: return fold_half_op<RVL_REDUCE_PROD>(f16, acc, v, n);
  }
}

bool two_row_folds() {
  static const bool on = tuning_int("RAVEL_TBB_NO_TWO_ROW_FOLD", 0, 0, 1) == 0;
  return on;
}

void fold_half2(int32_t rop, int32_t half_dtype, float* acc0, const uint16_t* v0, float* acc1, const uint16_t* v1,
                int64_t n) {
  const bool f16 = half_dtype == RVL_DTYPE_F16;
  switch (rop) {
    case RVL_REDUCE_SUM: return fold_half2_op<RVL_REDUCE_SUM>(f16, acc0, v0, acc1, v1, n);
    case RVL_REDUCE_MAX: return fold_half2_op<RVL_REDUCE_MAX>(f16, acc0, v0, acc1, v1, n);
    default: return fold_half2_op<RVL_REDUCE_PROD>(f16, acc0, v0, acc1, v1, n);
  }
}

void fold_half_into(int32_t rop, int32_t half_dtype, float* acc, const uint16_t* v, int64_t n) {
  const bool f16 = half_dtype == RVL_DTYPE_F16;
  switch (rop) {
    case RVL_REDUCE_SUM: return fold_half_into_op<RVL_REDUCE_SUM>(f16, acc, v, n);
    case RVL_REDUCE_MAX: return fold_half_into_op<RVL_REDUCE_MAX>(f16, acc, v, n);
    default: return fold_half_into_op<RVL_REDUCE_PROD>(f16, acc, v, n);
  }
}

}  // namespace tbbcpu
