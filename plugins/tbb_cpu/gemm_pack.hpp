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
//
// Note [Half panels]
// An f16/bf16 operand (source type S = rvl::Float16 / rvl::BFloat16) is widened to f32 by its
// packer (the *_widened functions at the end) as it writes the f32 sliver: no f32 copy of the
// matrix exists, the operand is read once at 2 bytes an element, and the micro-kernels (f32
// accumulation) are those of the f32 GEMM. Contiguous runs are converted by the vector loops of
// half_convert.hpp (F16C; bf16 by shifts): a run along the sliver's own axis (B row-major, A
// transposed) straight into the sliver; runs across it (A row-major, B transposed: one stream
// per row or column, along k) into a stack block of 64 k each, transposed from there while it
// is in L1. Strided gathers convert element by element (<ravel/half.hpp>). Widening is exact,
// so the panels hold exactly the values an f32 copy of the operand would.
#pragma once

#include "half_convert.hpp"

#include <ravel/half.hpp>

#include <algorithm>
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

// ---- half sources (Note [Half panels]) ----------------------------------------------------------
inline float widen1(rvl::Float16 h) { return rvl::f32_from_f16_bits(h.bits); }
inline float widen1(rvl::BFloat16 h) { return rvl::f32_from_bf16_bits(h.bits); }
// n contiguous source elements into n contiguous floats (vector loops).
inline void widen_run(float* d, const rvl::Float16* s, int64_t n) {
  f16_to_f32(d, reinterpret_cast<const uint16_t*>(s), n);
}
inline void widen_run(float* d, const rvl::BFloat16* s, int64_t n) {
  bf16_to_f32(d, reinterpret_cast<const uint16_t*>(s), n);
}
inline constexpr int64_t kWidenBlock = 64;  // k values per stack block

// W streams along k (stride 1), stream q at src + q * sq, into a W-wide sliver dst[k * W + q].
template <int W, class S>
inline void pack_streams_widened(float* __restrict dst, const S* src, int64_t sq, int64_t kc) {
  alignas(64) float tmp[W][kWidenBlock];
  for (int64_t k0 = 0; k0 < kc; k0 += kWidenBlock) {
    const int64_t len = std::min(kWidenBlock, kc - k0);
    for (int q = 0; q < W; ++q) widen_run(tmp[q], src + q * sq + k0, len);
    for (int64_t k = 0; k < len; ++k, dst += W)
#pragma GCC unroll 16
      for (int q = 0; q < W; ++q) dst[q] = tmp[q][k];
  }
}

// pack_a of a half A.
template <int MR, class S>
inline void pack_a_widened(float* __restrict dst, const S* src, int64_t sm, int64_t sk, int64_t h, int64_t kc) {
  if (h == MR && sk == 1) return pack_streams_widened<MR>(dst, src, sm, kc);
  if (h == MR && sm == 1) {
    for (int64_t k = 0; k < kc; ++k, dst += MR) widen_run(dst, src + k * sk, MR);
    return;
  }
  for (int64_t k = 0; k < kc; ++k, dst += MR) {
    int64_t i = 0;
    for (; i < h; ++i) dst[i] = widen1(src[i * sm + k * sk]);
    for (; i < MR; ++i) dst[i] = 0.0f;
  }
}

// pack_b of a half B.
template <int NR, class S>
inline void pack_b_widened(float* __restrict dst, const S* src, int64_t sk, int64_t sn, int64_t w, int64_t kc) {
  if (w == NR && sk == 1 && sn != 1) return pack_streams_widened<NR>(dst, src, sn, kc);
  for (int64_t k = 0; k < kc; ++k, dst += NR) {
    int64_t j = 0;
    if (sn == 1) {
      widen_run(dst, src + k * sk, w);
      j = w;
    }
    for (; j < w; ++j) dst[j] = widen1(src[k * sk + j * sn]);
    for (; j < NR; ++j) dst[j] = 0.0f;
  }
}

// pack_b_rows of a half B: NR values at a time.
template <int NR, class S>
inline void pack_b_rows_widened(float* __restrict dst, const S* src, int64_t sk, int64_t count, int64_t kc) {
  for (int64_t k = 0; k < kc; ++k) {
    const S* s = src + k * sk;
    float* d = dst + k * NR;
    for (int64_t q = 0; q < count; ++q, s += NR, d += NR * kc) widen_run(d, s, NR);
  }
}

}  // namespace tbbcpu::gemm
