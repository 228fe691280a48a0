// Micro-kernels (see gemm_kernels.hpp for the contract).
#include "gemm_kernels.hpp"

#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RVL_GEMM_X86 1
#endif

namespace tbbcpu::gemm {
namespace {

// ---- portable: MR x (NV vectors of 16 bytes) -------------------------------------------------
// 4 rows x 2 vectors = 8 accumulators + 2 B vectors + 1 broadcast fits the 16 SSE registers.
template <class T>
struct Vec16 {
  typedef T type __attribute__((vector_size(16)));
  static constexpr int lanes = 16 / sizeof(T);
};

template <class T, int MR, int NV>
void kernel_portable(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool add) {
  using V = typename Vec16<T>::type;
  constexpr int L = Vec16<T>::lanes;
  constexpr int NR = NV * L;
  V acc[MR][NV] = {};
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + k * NR + v * L, sizeof(V));
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const T ai = a[k * MR + i];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] += ai * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      T* p = c + i * ldc + v * L;
      V out = acc[i][v];
      if (add) {
        V old;
        std::memcpy(&old, p, sizeof(V));
        out += old;
      }
      std::memcpy(p, &out, sizeof(V));
    }
  }
}

#ifdef RVL_GEMM_X86
// ---- AVX2 + FMA: 6 x 16 f32 and 6 x 8 f64 ----------------------------------------------------
// 12 accumulators + 2 B vectors + 1 broadcast = 15 of the 16 ymm registers.
#define RVL_AVX2 __attribute__((target("avx2,fma")))

RVL_AVX2 void kernel_avx2_f32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                              bool add) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
         c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < kc; ++k, a += 6, b += 16) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 x = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(x, b0, c00); c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(x, b0, c10); c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(x, b0, c20); c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(x, b0, c30); c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(x, b0, c40); c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(x, b0, c50); c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  const __m256 r[6][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                          {c30, c31}, {c40, c41}, {c50, c51}};
  for (int i = 0; i < 6; ++i)
    for (int v = 0; v < 2; ++v) {
      float* p = c + i * ldc + v * 8;
      _mm256_storeu_ps(p, add ? _mm256_add_ps(r[i][v], _mm256_loadu_ps(p)) : r[i][v]);
    }
}

RVL_AVX2 void kernel_avx2_f64(int64_t kc, const double* a, const double* b, double* c,
                              int64_t ldc, bool add) {
  __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < kc; ++k, a += 6, b += 8) {
    const __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
    __m256d x = _mm256_broadcast_sd(a + 0);
    c00 = _mm256_fmadd_pd(x, b0, c00); c01 = _mm256_fmadd_pd(x, b1, c01);
    x = _mm256_broadcast_sd(a + 1);
    c10 = _mm256_fmadd_pd(x, b0, c10); c11 = _mm256_fmadd_pd(x, b1, c11);
    x = _mm256_broadcast_sd(a + 2);
    c20 = _mm256_fmadd_pd(x, b0, c20); c21 = _mm256_fmadd_pd(x, b1, c21);
    x = _mm256_broadcast_sd(a + 3);
    c30 = _mm256_fmadd_pd(x, b0, c30); c31 = _mm256_fmadd_pd(x, b1, c31);
    x = _mm256_broadcast_sd(a + 4);
    c40 = _mm256_fmadd_pd(x, b0, c40); c41 = _mm256_fmadd_pd(x, b1, c41);
    x = _mm256_broadcast_sd(a + 5);
    c50 = _mm256_fmadd_pd(x, b0, c50); c51 = _mm256_fmadd_pd(x, b1, c51);
  }
  const __m256d r[6][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                           {c30, c31}, {c40, c41}, {c50, c51}};
  for (int i = 0; i < 6; ++i)
    for (int v = 0; v < 2; ++v) {
      double* p = c + i * ldc + v * 4;
      _mm256_storeu_pd(p, add ? _mm256_add_pd(r[i][v], _mm256_loadu_pd(p)) : r[i][v]);
    }
}

bool have_avx2_fma() {
  // RAVEL_TBB_GEMM_PORTABLE=1 forces the portable kernels (to test them on AVX2 machines).
  static const bool yes = [] {
    const char* env = std::getenv("RAVEL_TBB_GEMM_PORTABLE");
    if (env && env[0] == '1') return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return yes;
}
#endif

}  // namespace

Kernel<float> select_kernel_f32() {
#ifdef RVL_GEMM_X86
  if (have_avx2_fma()) return {6, 16, &kernel_avx2_f32};
#endif
  return {4, 8, &kernel_portable<float, 4, 2>};
}

Kernel<double> select_kernel_f64() {
#ifdef RVL_GEMM_X86
  if (have_avx2_fma()) return {6, 8, &kernel_avx2_f64};
#endif
  return {4, 4, &kernel_portable<double, 4, 2>};
}

const char* isa_name() {
#ifdef RVL_GEMM_X86
  if (have_avx2_fma()) return "avx2+fma";
#endif
  return "portable";
}

}  // namespace tbbcpu::gemm
