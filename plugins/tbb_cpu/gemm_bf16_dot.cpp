#include "gemm_bf16_dot.hpp"
#include "tuning_env.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RVL_GEMM_BF16_X86 1
#endif

namespace tbbcpu::gemm {

// Note [BF16 dot-product family]
// AVX512-BF16's vdpbf16ps multiplies 16 pairs of bf16 by 16 pairs and adds both products to 16
// f32 accumulators: per instruction twice the multiply-adds of an f32 FMA, from operands of
// half the bytes. The family packs bf16 A and B without widening, as pairs along k (a 32-bit
// word per row or column and pair), so the 12 x 32 micro-kernel is the f32 one's shape with k
// halved: per pair, two B vectors, twelve broadcast A words, 24 vdpbf16ps. The blocked driver
// (gemm_blocked.cpp) is the f32 one: same blocking (sized for 2-byte elements), tasks, edge
// tiles and epilogue; only the packers and the kernel differ. Small products (the unpacked path,
// Note [Small GEMM]) stay on the widening path.
// Why opt-in (decision 45): Intel's SDM defines vdpbf16ps with denormal inputs treated as zero
// and denormal results flushed (whatever MXCSR says), and it adds a pair's two products before
// accumulating, so results differ from the default path's (bit-exact widened operands, one FMA
// per k) in the last bits, and differ in kind where a product or the sum is subnormal. Tests
// compare it with an f64 reference within a tolerance (tests/bench/test_tbb_gemm_bf16_dot.cpp).
namespace {

typedef uint16_t u16a __attribute__((may_alias));
typedef uint32_t u32a __attribute__((may_alias));

const uint16_t* bits(const rvl::BFloat16* p) { return reinterpret_cast<const uint16_t*>(p); }

#ifdef RVL_GEMM_BF16_X86
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in half_convert.cpp (GCC 12)
template <int MR, int NV>
__attribute__((target("avx512f,avx512bf16"))) void kernel_dot(int64_t kc, const float* a, const float* b, float* c,
                                                             int64_t ldc, bool add) {
  constexpr int NR = NV * 16;
  const auto* ap = reinterpret_cast<const u32a*>(a);
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + NR - 1, 1, 3);
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const int64_t pairs = (kc + 1) / 2;
#pragma GCC unroll 2
  for (int64_t p = 0; p < pairs; ++p, ap += MR, b += NR) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + v * 16);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i]));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], x, bv[v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* q = c + i * ldc + v * 16;
      _mm512_storeu_ps(q, add ? _mm512_add_ps(acc[i][v], _mm512_loadu_ps(q)) : acc[i][v]);
    }
}
#pragma GCC diagnostic pop
#endif

// Interleaves two runs of n bf16 (rows or columns k and k + 1) into n words.
inline void interleave(u32a* d, const uint16_t* x, const uint16_t* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) d[j] = static_cast<uint32_t>(x[j]) | static_cast<uint32_t>(y[j]) << 16;
}

}  // namespace

bool bf16_dot_chosen() {
  static const bool on = [] {
#ifdef RVL_GEMM_BF16_X86
    __builtin_cpu_init();
    // The same variable and choices as gemm_kernels.cpp's isa() (which maps avx512bf16 to the
    // best f32 family): a CPU without AVX512-BF16 falls back, as every named family does.
    return tuning_choice("RAVEL_TBB_GEMM", "", {"portable", "avx2", "avx512", "avx512-tiles", "avx512bf16"}) ==
               "avx512bf16" &&
           __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
  }();
  return on;
}

Kernel<float> select_kernel_bf16_dot() {
#ifdef RVL_GEMM_BF16_X86
  return {12, 32, &kernel_dot<12, 2>};
#else
  return {};
#endif
}

void pack_a_pairs12(float* dst, const rvl::BFloat16* src, int64_t sm, int64_t sk, int64_t h, int64_t kc) {
  constexpr int MR = 12;
  auto* d = reinterpret_cast<u32a*>(dst);
  const uint16_t* s = bits(src);
  const int64_t full = kc / 2;
  if (h == MR && sk == 1) {  // row-major A: each pair is one 32-bit load
    for (int64_t p = 0; p < full; ++p, d += MR)
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) std::memcpy(d + i, s + i * sm + 2 * p, 4);
  } else if (h == MR && sm == 1) {  // transposed A: rows k and k + 1 are contiguous runs
    for (int64_t p = 0; p < full; ++p, d += MR) interleave(d, s + 2 * p * sk, s + (2 * p + 1) * sk, MR);
  } else {
    for (int64_t p = 0; p < full; ++p, d += MR)
      for (int i = 0; i < MR; ++i)
        d[i] = i < h ? static_cast<uint32_t>(s[i * sm + 2 * p * sk]) | static_cast<uint32_t>(s[i * sm + (2 * p + 1) * sk]) << 16
                     : 0u;
  }
  if (kc % 2)  // the last k alone, its pair's second half zero
    for (int i = 0; i < MR; ++i) d[i] = i < h ? static_cast<uint32_t>(s[i * sm + (kc - 1) * sk]) : 0u;
}

void pack_b_pairs32(float* dst, const rvl::BFloat16* src, int64_t sk, int64_t sn, int64_t w, int64_t kc) {
  constexpr int NR = 32;
  auto* d = reinterpret_cast<u32a*>(dst);
  const uint16_t* s = bits(src);
  const int64_t full = kc / 2;
  if (w == NR && sn == 1) {  // row-major B: two rows interleaved
    for (int64_t p = 0; p < full; ++p, d += NR) interleave(d, s + 2 * p * sk, s + (2 * p + 1) * sk, NR);
  } else if (w == NR && sk == 1) {  // transposed B (x @ W^T): each pair is one 32-bit load
    for (int64_t p = 0; p < full; ++p, d += NR)
#pragma GCC unroll 32
      for (int j = 0; j < NR; ++j) std::memcpy(d + j, s + j * sn + 2 * p, 4);
  } else {
    for (int64_t p = 0; p < full; ++p, d += NR)
      for (int j = 0; j < NR; ++j)
        d[j] = j < w ? static_cast<uint32_t>(s[2 * p * sk + j * sn]) | static_cast<uint32_t>(s[(2 * p + 1) * sk + j * sn]) << 16
                     : 0u;
  }
  if (kc % 2)
    for (int j = 0; j < NR; ++j) d[j] = j < w ? static_cast<uint32_t>(s[(kc - 1) * sk + j * sn]) : 0u;
}

void pack_b_rows_pairs32(float* dst, const rvl::BFloat16* src, int64_t sk, int64_t count, int64_t kc) {
  for (int64_t q = 0; q < count; ++q) pack_b_pairs32(dst + q * 32 * kc, src + q * 32, sk, 1, 32, kc);
}

}  // namespace tbbcpu::gemm
