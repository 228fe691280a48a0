// Typed array loops for every (instruction, dtype) the ABI allows: the evaluator's inner loops.
//
// Each kernel processes n elements of contiguous typed arrays and has no other side effect.
// Kernels exist exactly for the combinations validate.cpp accepts; asking for another one
// returns NULL (a plugin bug, reported as RVL_STATUS_INTERNAL by the caller).
#pragma once

#include <ravel/backend.h>

#include <cstdint>

// The AVX-512 clones' target: F for the floats, BW for bytes and 16-bit lanes, DQ and VL for
// the 64-bit integer and narrower-vector forms GCC picks for the loops' tails;
// prefer-vector-width=512, as GCC's generic tuning would otherwise keep 256-bit vectors.
#define RVL_TBB_AVX512_TARGET "avx512f,avx512bw,avx512dq,avx512vl,prefer-vector-width=512"

namespace tbbcpu {

// dst[i] = op(a[i], b[i], c[i]) for unused sources the pointer is ignored.
// `dt` is the dtype of the operands (for CMPLT/CMPNE the sources, for WHERE the values).
using ArrayFn = void (*)(void* dst, const void* a, const void* b, const void* c, int64_t n);
using CastFn = void (*)(void* dst, const void* src, int64_t n);

ArrayFn array_kernel(int32_t op, int32_t dt);

// The instruction-set tiers of the array loops (Note [Array loops per ISA]).
enum SimdTier : int { kSimdPortable = 0, kSimdAvx2 = 1, kSimdAvx512 = 2 };
// The widest tier this CPU runs.
int simd_tier_supported();
// The tier array_kernel uses: simd_tier_supported(), capped by RAVEL_TBB_SIMD=portable|avx2.
int simd_tier();
// The loop of one tier (tests compare the tiers bit for bit); NULL for a tier the CPU lacks.
ArrayFn array_kernel_at(int tier, int32_t op, int32_t dt);
// Note [Array loops with a per-row scalar]: dst[i] = op(*a, b[i]) (scalar_a) or op(a[i], *b), for
// the binary ops with a result of their operands' dtype, on f32 and f64; NULL for the others.
using ScalarFn = void (*)(void* dst, const void* a, const void* b, int64_t n);
ScalarFn scalar_kernel(int32_t op, int32_t dt, bool scalar_a);
ScalarFn scalar_kernel_at(int tier, int32_t op, int32_t dt, bool scalar_a);
// Whether the AVX2 (or wider) clones run; other loops with AVX2 clones (row_chain.cpp's folds,
// evaluator.cpp's per-row fills) follow it.
bool simd_avx2();
CastFn cast_kernel(int32_t from, int32_t to);
// dst[0..n) = the CONST value for dtype dt.
void fill_const(void* dst, int32_t dt, const rvl_scalar& v, int64_t n);

}  // namespace tbbcpu
