// f16 and bf16 in generated kernels: a kernel body rewritten to compute in f32 around 2-byte
// loads, stores and rounding casts (Note [Halves in kernels]). Used by every GPU renderer (the
// C-family one for HIP and OpenCL through c_source.hpp's conversions), so the rule "compute in
// f32, round once per kernel output" (backend.h, docs/dtypes.md) is written once.
#pragma once

#include <ravel/backend.h>
#include <ravel/validate.hpp>

#include <vector>

namespace rvl::lower {

// The dtype a value of `dtype` is computed in: f32 for f16 and bf16, itself otherwise.
int32_t compute_dtype(int32_t dtype);

// Note [Halves in kernels]
// The ABI's half arithmetic (docs/dtypes.md, "Half arithmetic"): every op on halves is computed
// in f32 and rounded once, when the value is stored or explicitly cast. So the instructions are
// rewritten before rendering, exactly as the CPU plugin does (Note [Halves in f32] in
// plugins/tbb_cpu/half_kernels.cpp), and the renderers need only three half operations, the
// conversions:
//  - LOAD of a half view stays (a 2-byte load), followed by CAST to f32 (exact);
//  - CONST of a half becomes an f32 CONST of the value rounded to the half (exact in f32);
//  - CAST to a half stays (it rounds, RNE) and is followed by CAST back to f32, unless it is the
//    program's last instruction (its bits are then stored as they are);
//  - every other instruction of a half dtype becomes f32 (ACC included: contractions and row
//    reductions accumulate in f32).
// The last instruction's dtype (the value a kernel stores) may therefore be f32 where the output
// is a half: the renderer rounds it once into the output (c::convert). A reduction accumulates
// the f32 values in f32 (compute_dtype of its output) and rounds the result once.
std::vector<rvl_instruction> widen_halves(const rvl_instruction* ins, int32_t n);

// `p` with its instructions widened into `storage` (which must outlive the copy); `p` itself
// when nothing in it is a half. Epilogues and stages are left alone (their users widen them).
validate::Program widened(const validate::Program& p, std::vector<rvl_instruction>& storage);

}  // namespace rvl::lower
