// Packing of GEMM operands into the micro-kernels' sliver layout (contract: gemm_kernels.hpp).
//
// An A sliver is MR rows x kc of A stored k-major, dst[k*MR + i]; a B sliver is kc x NR of B
// stored dst[k*NR + j]. Rows/columns past the matrix edge are zero, so the micro-kernel always
// runs full size. Every packer writes its destination contiguously, whatever the source layout:
//   A row-major (k contiguous):   MR read streams along k, one contiguous MR-wide write per k;
//   A transposed (i contiguous):  one contiguous MR-wide copy per k;
//   B row-major (j contiguous):   one contiguous NR-wide copy per k;
//   B transposed (k contiguous):  NR read streams along k (x @ W^T of a linear layer);
//   anything else (0, negative or odd strides): a general strided gather.
// So transposed and strided operands are read in place: no copy before the GEMM.
// MR and NR are template parameters (the packers are instantiated for each micro-kernel shape)
// so the inner loops are fixed-length and fully unrolled.
#pragma once

#include <cstdint>

namespace tbbcpu::gemm {

// A sliver: rows [0, h) of `src` (row stride sm, column stride sk), columns [0, kc).
template <class T, int MR>
inline void pack_a(T* __restrict dst, const T* src, int64_t sm, int64_t sk, int64_t h, int64_t kc) {
  if (h == MR && sk == 1) {
    const T* r[MR];
    for (int i = 0; i < MR; ++i) r[i] = src + i * sm;
    for (int64_t k = 0; k < kc; ++k, dst += MR)
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) dst[i] = r[i][k];
    return;
  }
  if (h == MR && sm == 1) {
    for (int64_t k = 0; k < kc; ++k, dst += MR) {
      const T* s = src + k * sk;
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) dst[i] = s[i];
    }
    return;
  }
  for (int64_t k = 0; k < kc; ++k, dst += MR) {
    int64_t i = 0;
    for (; i < h; ++i) dst[i] = src[i * sm + k * sk];
    for (; i < MR; ++i) dst[i] = T{};
  }
}

// B sliver: columns [0, w) of `src` (row stride sk, column stride sn), rows [0, kc).
template <class T, int NR>
inline void pack_b(T* __restrict dst, const T* src, int64_t sk, int64_t sn, int64_t w, int64_t kc) {
  if (w == NR && sn == 1) {
    for (int64_t k = 0; k < kc; ++k, dst += NR) {
      const T* s = src + k * sk;
#pragma GCC unroll 32
      for (int j = 0; j < NR; ++j) dst[j] = s[j];
    }
    return;
  }
  if (w == NR && sk == 1) {
    // Blocks of 8 k: each column's 8 values are one cache-line-sized read, so the NR streams
    // advance together and the writes stay contiguous.
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8, dst += 8 * NR)
      for (int j = 0; j < NR; ++j) {
        const T* s = src + j * sn + k;
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q) dst[q * NR + j] = s[q];
      }
    for (; k < kc; ++k, dst += NR)
#pragma GCC unroll 32
      for (int j = 0; j < NR; ++j) dst[j] = src[j * sn + k];
    return;
  }
  for (int64_t k = 0; k < kc; ++k, dst += NR) {
    int64_t j = 0;
    if (sn == 1)
      for (; j < w; ++j) dst[j] = src[k * sk + j];
    else
      for (; j < w; ++j) dst[j] = src[k * sk + j * sn];
    for (; j < NR; ++j) dst[j] = T{};
  }
}

// `count` full B slivers side by side (row-major B: column stride 1), sliver q at dst + q*NR*kc:
// each row of the group is read as one contiguous run (count * NR values) instead of one
// NR-wide piece per sliver pass, so the hardware prefetcher sees a few long streams.
template <class T, int NR>
inline void pack_b_rows(T* __restrict dst, const T* src, int64_t sk, int64_t count, int64_t kc) {
  for (int64_t k = 0; k < kc; ++k) {
    const T* s = src + k * sk;
    T* d = dst + k * NR;
    for (int64_t q = 0; q < count; ++q, s += NR, d += NR * kc)
#pragma GCC unroll 32
      for (int j = 0; j < NR; ++j) d[j] = s[j];
  }
}

}  // namespace tbbcpu::gemm
