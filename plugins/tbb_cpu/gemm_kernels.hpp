// Register-blocked GEMM micro-kernels for the float fast path of contraction.cpp.
//
// A micro-kernel computes one MR x NR tile of C over a packed k-panel:
//   c[i*ldc + j] (=|+=) sum_{k<kc} a[k*MR + i] * b[k*NR + j]
// where a is an MR-tall sliver of packed A and b an NR-wide sliver of packed B (both zero padded
// at the edges, so the kernel always runs full size and the caller ignores padded outputs).
// `add` selects accumulate (later k-panels) versus overwrite (first k-panel).
//
// Two families: a portable one written with GCC vector extensions (16-byte vectors, so baseline
// SSE2 builds vectorise it), and AVX2+FMA ones compiled as target-attribute clones and chosen at
// run time with __builtin_cpu_supports, because the library itself is built for plain x86-64.
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

// Selects the best micro-kernel for this CPU (decided once per process).
Kernel<float> select_kernel_f32();
Kernel<double> select_kernel_f64();
// The micro-kernel family select_kernel_* chose ("avx2+fma", "portable"), for ravel-info.
const char* isa_name();

}  // namespace tbbcpu::gemm
