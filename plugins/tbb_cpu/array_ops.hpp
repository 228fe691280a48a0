// Typed array loops for every (instruction, dtype) the ABI allows: the evaluator's inner loops.
//
// Each kernel processes n elements of contiguous typed arrays and has no other side effect.
// Kernels exist exactly for the combinations validate.cpp accepts; asking for another one
// returns NULL (a plugin bug, reported as RVL_STATUS_INTERNAL by the caller).
#pragma once

#include <ravel/backend.h>

#include <cstdint>

namespace tbbcpu {

// dst[i] = op(a[i], b[i], c[i]) for unused sources the pointer is ignored.
// `dt` is the dtype of the operands (for CMPLT/CMPNE the sources, for WHERE the values).
using ArrayFn = void (*)(void* dst, const void* a, const void* b, const void* c, int64_t n);
using CastFn = void (*)(void* dst, const void* src, int64_t n);

ArrayFn array_kernel(int32_t op, int32_t dt);
// Whether the AVX2 clones run (the CPU has AVX2 and RAVEL_TBB_SIMD is not "portable"); other
// loops with AVX2 clones (row_chain.cpp's folds, evaluator.cpp's per-row fills) follow it.
bool simd_avx2();
CastFn cast_kernel(int32_t from, int32_t to);
// dst[0..n) = the CONST value for dtype dt.
void fill_const(void* dst, int32_t dt, const rvl_scalar& v, int64_t n);

}  // namespace tbbcpu
