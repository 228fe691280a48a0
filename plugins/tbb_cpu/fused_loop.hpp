// One loop per f32 program: every instruction of the program on a chunk of elements before the
// next chunk (Note [Fused loops]).
#pragma once

#include <ravel/backend.h>

#include <cstdint>

namespace tbbcpu {

// Programs of more instructions keep the block evaluator (the chunk registers live on the stack).
constexpr int32_t kFusedMaxIns = 64;

// Whether run_fused_loop runs `ins`: every instruction's dtype is f32; every computed one is an
// arithmetic op with an f32 result from f32 sources (no CAST, comparison or WHERE); the last
// instruction is computed, and at least two are (one computed instruction is one pass anyway).
// `halves` (Note [Half programs as one fused loop], half_chunk.hpp) admits f16/bf16 LOADs read
// only by CASTs to f32, and a CAST of an f32 value to f16/bf16 as the last instruction; those
// CASTs count as computed.
bool fused_loop_fits(const rvl_instruction* ins, int32_t n_ins, bool halves = false);

// A leaf's values for the block (LOAD, CONST, ACC): n consecutive floats at p, or (one) the single
// value *p that every element of the block reads, or (rows) one value per row: element i reads
// p[(i / row_len) * rstride] (Note [Per-row operands in fused loops]). A half LOAD's p points to
// its 16-bit values (cast to const float*), element i at ((const uint16_t*)p)[i]. No initialisers: the
// evaluator keeps an array of kFusedMaxIns of them per block, and sets what it uses.
struct FusedValue {
  const float* p;
  bool one;
  bool rows;
  int64_t rstride;
};

// Computes a block of n elements of `ins` (fused_loop_fits) into out[0, n), floats or (a program
// ending in a CAST to f16/bf16) 16-bit values. val[j] must be set for
// every leaf j; the function fills it in for the computed ones (scratch for the caller). The
// instructions computed from single values alone are computed once, the rest chunk by chunk.
// `tier` is a SimdTier (array_ops.hpp): every tier gives the same bits as the array loops.
// `chunk`: elements per chunk, 32, 64 or 128 (anything else: 64); the bits do not depend on it.
// row_len > 0: the block is rows of row_len elements from its element 0, and row_len is a multiple
// of the chunk (the caller checks), so no chunk straddles two rows; leaves may then be `rows`.
// Returns false, with nothing done, when an instruction computes from single values only and one
// of them is a `rows` value (a per-row value: the caller runs row by row instead).
bool run_fused_loop(int tier, int64_t chunk, const rvl_instruction* ins, int32_t n_ins, FusedValue* val, void* out,
                    int64_t n, int64_t row_len = 0);

// Whether the evaluator uses it: false under RAVEL_TBB_NO_FUSED_LOOP=1 (measurements, tests).
bool fused_loop_enabled();
// Whether the evaluator runs half programs as fused loops: false under RAVEL_TBB_NO_FUSED_LOOP=1
// or RAVEL_TBB_NO_HALF_FUSED_LOOP=1 (they keep the passes; measurements, tests).
bool half_fused_loop_enabled();
// Kernels of fewer elements keep the passes (RAVEL_TBB_FUSED_MIN; Note [Fused loops in the
// evaluator]).
int64_t fused_loop_min_elements();

}  // namespace tbbcpu
