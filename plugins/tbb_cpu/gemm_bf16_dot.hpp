// The AVX512-BF16 GEMM family (RAVEL_TBB_GEMM=avx512bf16; Note [BF16 dot-product family] in
// gemm_bf16_dot.cpp): bf16 A and B packed as k-pairs, multiplied with vdpbf16ps, f32 accumulation.
// Opt-in only: it flushes subnormal inputs and outputs and adds two products before accumulating,
// so its results are not the default path's bits (decisions 45 and 64).
#pragma once

#include "gemm_kernels.hpp"

#include <ravel/half.hpp>

#include <cstdint>

namespace tbbcpu::gemm {

// Whether bf16 contractions of the blocked path use this family: RAVEL_TBB_GEMM=avx512bf16 and
// a CPU with AVX512-BF16 (decided once per process; otherwise the default widening path runs).
bool bf16_dot_chosen();

// The 12 x 32 micro-kernel (the KernelFn contract of gemm_kernels.hpp, with `a` and `b` the pair
// slivers written by the packers below and kc the k extent, odd allowed: the last pair is padded).
Kernel<float> select_kernel_bf16_dot();

// Packers with gemm_pack.hpp's signatures and sliver placement (a sliver of kc k-values takes
// ceil(kc / 2) rows of 32-bit pairs, inside the MR * kc floats the driver reserves for it):
// A: pair p of row i at word p * MR + i, holding (A[i][2p], A[i][2p + 1]);
// B: pair p of column j at word p * NR + j, holding (B[2p][j], B[2p + 1][j]);
// rows/columns past h/w and the k past kc are zero.
void pack_a_pairs12(float* dst, const rvl::BFloat16* src, int64_t sm, int64_t sk, int64_t h, int64_t kc);
void pack_b_pairs32(float* dst, const rvl::BFloat16* src, int64_t sk, int64_t sn, int64_t w, int64_t kc);
void pack_b_rows_pairs32(float* dst, const rvl::BFloat16* src, int64_t sk, int64_t count, int64_t kc);

}  // namespace tbbcpu::gemm
