// Register-blocked GEMM micro-kernels for the float fast path of contraction.cpp.
//
// A micro-kernel computes one MR x NR tile of C over a packed k-panel:
//   c[i*ldc + j] (=|+=) sum_{k<kc} a[k*MR + i] * b[k*NR + j]
// where a is an MR-tall sliver of packed A and b an NR-wide sliver of packed B (both zero padded
// at the edges, so the kernel always runs full size and the caller ignores padded outputs).
// `add` selects accumulate (later k-panels) versus overwrite (first k-panel).
//
// Three families, chosen once per process at run time with __builtin_cpu_supports (the library
// itself is built for plain x86-64): AVX-512F (12 x 32 f32, 12 x 16 f64), AVX2+FMA (6 x 16 f32,
// 6 x 8 f64), both the same source (gemm_simd_body.inc) compiled under `#pragma GCC target`, and
// a portable one in GCC vector extensions (16-byte vectors, so baseline SSE2 builds vectorise it;
// 4 x 8 f32, 4 x 4 f64). RAVEL_TBB_GEMM=avx512|avx2|portable forces one for testing (a family
// the CPU lacks falls back to the best it has); RAVEL_TBB_GEMM_PORTABLE=1 is the older spelling.
#pragma once

#include <cstdint>
#include <cstring>

namespace tbbcpu::gemm {

template <class T>
using KernelFn = void (*)(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool add);

template <class T>
struct Kernel {
  int mr = 0, nr = 0;
  KernelFn<T> fn = nullptr;
};

// The small-GEMM micro-kernel (gemm_small.cpp, Note [Small GEMM]): no packed operands. An MR x NR
// tile, NR = NV vectors, over all of k in one pass:
//   c[i*ldc + j] = sum_{k<kc} a[i][k*sak] * b[k*ldb + j]
// a: MR row pointers (a row may repeat: the caller clamps rows past the edge and drops them);
// b: kc rows of at least NR readable values, ldb apart. c is always written, never accumulated.
template <class T>
using SmallKernelFn = void (*)(int64_t kc, const T* const* a, int64_t sak, const T* b, int64_t ldb, T* c,
                               int64_t ldc);

// One dot product sum_{k<kc} a[k*sa] * b[k*sb], summed from zero in k order with the small
// kernel's rounding (one FMA per step on the AVX families, multiply then add portably): equal,
// bitwise, to any lane of `fn` given the same a and b (Note [Batched dot products]).
template <class T>
using DotFn = T (*)(int64_t kc, const T* a, int64_t sa, const T* b, int64_t sb);

template <class T>
struct SmallKernel {
  int mr = 0, nr = 0;
  SmallKernelFn<T> fn = nullptr;
  DotFn<T> dot = nullptr;
};

// Selects the best micro-kernel for this CPU (decided once per process).
Kernel<float> select_kernel_f32();
Kernel<double> select_kernel_f64();
// The f32 kernel for a GEMM of m rows and n columns (Notes [Eight-row tiles for short M],
// [Sixteen-column tiles for narrow N]).
Kernel<float> select_kernel_f32_for_shape(int64_t m, int64_t n);
// Packs one B sliver of a window GEMM with AVX-512 gathers where the chosen family is AVX-512:
// dst[k * nr + j] = b[bk[k] + bn[j]] for j < w, 0 for w <= j < nr (nr 16 or 32). False (nothing
// written) elsewhere. Note [Gathering B slivers].
bool gather_sliver_f32(float* dst, const float* b, const int64_t* bk, int64_t kc, const int64_t* bn, int64_t w,
                       int64_t nr);
// The small-GEMM kernel of the same family (same RAVEL_TBB_GEMM choice).
SmallKernel<float> select_small_f32();
SmallKernel<double> select_small_f64();
// Whether the chosen family is AVX-512 (the window dot products, gemm_window_dot.cpp, use it).
bool isa_is_avx512();
// The micro-kernel family select_kernel_* chose ("avx512f", "avx2+fma", "portable"), for ravel-info.
const char* isa_name();

}  // namespace tbbcpu::gemm
