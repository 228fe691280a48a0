// The window GEMM's micro-kernel that reads B's rows in place (Note [B rows in place],
// gemm_window_rows.cpp).
#pragma once

#include <cstdint>

namespace tbbcpu::gemm {

// Two runs of B at once: c_r[i * ldc + j] (=|+=) sum_{k < kc} a[k * 8 + i] * b_r[bk[k] + j] for r = 0, 1,
// i < 8, j < w_r (0 <= w_r <= 16): a is a packed 8-row A sliver (the 8 x 32 kernel's layout), b_r a
// stride-1 run of w_r columns of B whose row k is at b_r + bk[k]; only those columns are read and
// written (w_1 = 0: no second run).
using RowsKernelFn = void (*)(int64_t kc, const float* a, const float* b0, const float* b1, const int64_t* bk,
                              int64_t w0, int64_t w1, float* c0, float* c1, int64_t ldc, bool add);

// The AVX-512 kernel where the chosen family is AVX-512 (gemm::isa_is_avx512), else null.
RowsKernelFn select_rows_kernel_f32();
// Note [One row in place]: the same for M = 1 (row 0 of the packed 8-row A sliver only).
RowsKernelFn select_rows1_kernel_f32();

}  // namespace tbbcpu::gemm
