// SPIR-V kernels from parametric kernel plans (Note [Generic kernels] in
// <ravel/lowering/parametric.hpp>).
#pragma once

#include "kernel_emitter.hpp"

namespace rvl::l0 {

// Work-group sizes the emitted kernels are compiled for (OpExecutionMode LocalSize).
constexpr uint32_t kElementwiseGroup = 64;
constexpr uint32_t kGemmGroup = uint32_t(kGemmTile * kGemmTile);

// Kernel arguments, in order: output, non-empty inputs, meta.
Words emit_program(const ProgramSig& sig);
// Kernel arguments, in order: A, B, C, non-empty epilogue inputs, meta.
Words emit_contraction(const ContractionSig& sig);

}  // namespace rvl::l0
