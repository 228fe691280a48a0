// The window GEMM's micro-kernel that reads B's rows in place (Note [B rows in place],
// gemm_window_rows.cpp).
#pragma once

#include <cstdint>

namespace tbbcpu::gemm {

// c[i * ldc + j] (=|+=) sum_{k < kc} a[k * 16 + i] * b[bk[k] + j] for i < 16, j < w (1 <= w <= 16):
// a is a packed 16-row A sliver (the 16 x 16 kernel's layout), b a stride-1 run of w columns of
// B, row k of it at b + bk[k]; only the w columns are read and written.
using RowsKernelFn = void (*)(int64_t kc, const float* a, const float* b, const int64_t* bk, int64_t w, float* c,
                              int64_t ldc, bool add);

// The AVX-512 kernel where the chosen family is AVX-512 (gemm::isa_is_avx512), else null.
RowsKernelFn select_rows_kernel_f32();

}  // namespace tbbcpu::gemm
