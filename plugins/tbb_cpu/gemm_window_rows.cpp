// Note [B rows in place]
// A convolution's forward and its input gradient (the transposed convolution, Note
// [Convolution's input gradient as a convolution] in the core) are window GEMMs with a short M
// (the output channels: 16 or 32 in the Fashion-MNIST CNN) whose B is the (padded) input's
// window: its columns (n, oh, ow) run contiguously along ow, 28 or 14 at a time, and row k =
// (c, kh, kw) of a run is just the input row shifted by (kh, kw). The packed path copies every B
// element into a sliver (Note [Packing runs]) that is then used by only M / MR = 1-4 A slivers,
// so packing cost about as much as the multiply-adds (perf: the packing loop 32% of the CNN's
// input-gradient contraction, the micro-kernel 23%). Here B is not packed: for two runs of at
// most 16 columns each, the kernel loads row k of each run with one masked load at b_r + bk[k]
// (one offset for both) and multiplies both by the 8 values of a packed A column (broadcast):
// 16 accumulators, 11 loads per 16 multiply-adds (the packed 8 x 32 tile: 10), 14 of 16 lanes
// used on rows of 14 or 28 (packed slivers span runs and use all 32), and no B element copied.
// (One run over 16-row slivers, 18 loads per 16 multiply-adds, measured the same: the kernel is
// bound by the multiply-adds, perf ~1.5-2 per cycle.) Where the epilogue only stores, the kernel
// writes C itself (gemm_pack_window.cpp). Taken by gemm_pack_window.cpp for f32 on AVX-512 where
// B's columns run >= 12 long on average and 8-row slivers waste <= 1/4 of M; RAVEL_TBB_WINDOW_ROWS=0
// packs B as before (A/B in one binary). docs/performance.md §8, 2026-12-07.
#include "gemm_window_rows.hpp"

#include "gemm_kernels.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define RVL_WINDOW_ROWS_X86 1
#endif

namespace tbbcpu::gemm {
namespace {

#ifdef RVL_WINDOW_ROWS_X86
#pragma GCC push_options
#pragma GCC target("avx512f")
void rows_kernel_avx512(int64_t kc, const float* a, const float* b0, const float* b1, const int64_t* bk, int64_t w0,
                        int64_t w1, float* c0, float* c1, int64_t ldc, bool add) {
  auto mask_of = [](int64_t w) { return static_cast<__mmask16>(w >= 16 ? 0xFFFFu : (1u << w) - 1u); };
  const __mmask16 m0 = mask_of(w0), m1 = mask_of(w1);
  __m512 acc0[8], acc1[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k, a += 8) {
    const int64_t o = bk[k];
    const __m512 x0 = _mm512_maskz_loadu_ps(m0, b0 + o), x1 = _mm512_maskz_loadu_ps(m1, b1 + o);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc0[i] = _mm512_fmadd_ps(ai, x0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, x1, acc1[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    float* p0 = c0 + i * ldc;
    float* p1 = c1 + i * ldc;
    _mm512_mask_storeu_ps(p0, m0, add ? _mm512_add_ps(acc0[i], _mm512_maskz_loadu_ps(m0, p0)) : acc0[i]);
    _mm512_mask_storeu_ps(p1, m1, add ? _mm512_add_ps(acc1[i], _mm512_maskz_loadu_ps(m1, p1)) : acc1[i]);
  }
}

// Note [One row in place]: M = 1 (a depthwise convolution, Og = 1, batched over the channels:
// Note [Grouped implicit im2col] in the core): only row 0 of the packed 8-row A sliver is used
// (a[8 * k]); the 8-row kernel above would compute 8 rows for one. Two accumulators per run
// (even and odd k) halve the multiply-add chain, added at the end.
void rows1_kernel_avx512(int64_t kc, const float* a, const float* b0, const float* b1, const int64_t* bk, int64_t w0,
                         int64_t w1, float* c0, float* c1, int64_t, bool add) {
  auto mask_of = [](int64_t w) { return static_cast<__mmask16>(w >= 16 ? 0xFFFFu : (1u << w) - 1u); };
  const __mmask16 m0 = mask_of(w0), m1 = mask_of(w1);
  __m512 e0 = _mm512_setzero_ps(), e1 = e0, o0 = e0, o1 = e0;
  int64_t k = 0;
  for (; k + 1 < kc; k += 2) {
    const __m512 ae = _mm512_set1_ps(a[8 * k]), ao = _mm512_set1_ps(a[8 * (k + 1)]);
    e0 = _mm512_fmadd_ps(ae, _mm512_maskz_loadu_ps(m0, b0 + bk[k]), e0);
    e1 = _mm512_fmadd_ps(ae, _mm512_maskz_loadu_ps(m1, b1 + bk[k]), e1);
    o0 = _mm512_fmadd_ps(ao, _mm512_maskz_loadu_ps(m0, b0 + bk[k + 1]), o0);
    o1 = _mm512_fmadd_ps(ao, _mm512_maskz_loadu_ps(m1, b1 + bk[k + 1]), o1);
  }
  if (k < kc) {
    const __m512 ae = _mm512_set1_ps(a[8 * k]);
    e0 = _mm512_fmadd_ps(ae, _mm512_maskz_loadu_ps(m0, b0 + bk[k]), e0);
    e1 = _mm512_fmadd_ps(ae, _mm512_maskz_loadu_ps(m1, b1 + bk[k]), e1);
  }
  e0 = _mm512_add_ps(e0, o0);
  e1 = _mm512_add_ps(e1, o1);
  _mm512_mask_storeu_ps(c0, m0, add ? _mm512_add_ps(e0, _mm512_maskz_loadu_ps(m0, c0)) : e0);
  _mm512_mask_storeu_ps(c1, m1, add ? _mm512_add_ps(e1, _mm512_maskz_loadu_ps(m1, c1)) : e1);
}
#pragma GCC pop_options
#endif

}  // namespace

RowsKernelFn select_rows_kernel_f32() {
#ifdef RVL_WINDOW_ROWS_X86
  if (isa_is_avx512()) return &rows_kernel_avx512;
#endif
  return nullptr;
}

RowsKernelFn select_rows1_kernel_f32() {
#ifdef RVL_WINDOW_ROWS_X86
  if (isa_is_avx512()) return &rows1_kernel_avx512;
#endif
  return nullptr;
}

}  // namespace tbbcpu::gemm
