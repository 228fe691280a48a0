// Array conversions between f32 and f16/bf16, the CASTs of Note [Halves in f32]: vectorised (F16C
// for f16; integer shifts for bf16; AVX-512, AVX2 or plain loops chosen at run time, Note [Half
// conversion levels] in half_convert.cpp) and bitwise equal to <ravel/half.hpp>.
#pragma once

#include <cstdint>

namespace tbbcpu {

void f32_to_f16(uint16_t* dst, const float* src, int64_t n);
void f16_to_f32(float* dst, const uint16_t* src, int64_t n);
void f32_to_bf16(uint16_t* dst, const float* src, int64_t n);
void bf16_to_f32(float* dst, const uint16_t* src, int64_t n);

// rows runs of n halves (f16 if `f16`, else bf16), lds apart, widened into rows ldd apart, each
// zero-padded to `width` (>= n) floats: one call for a small GEMM's operand block (Note [Half
// operands of the small GEMM]) instead of one per row.
void widen_rows(bool f16, float* dst, int64_t ldd, const uint16_t* src, int64_t lds, int64_t rows, int64_t n,
                int64_t width);

// The level these loops run at (Note [Half conversion levels]): 3 AVX-512 with AVX512-BF16's
// narrowing, 2 AVX-512 (F + BW), 1 AVX2 + F16C, 0 the plain loops; half_fold.cpp widens at the
// same one (2 and 3 alike).
int half_convert_level();

}  // namespace tbbcpu
