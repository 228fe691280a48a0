// Running kernels: validation, the f64 check, planning, the module cache and the launch.
#pragma once

#include <ravel/backend.h>

namespace rvl::l0 {

// The reductions the SPIR-V emitter runs (rvl_device_properties.reduce_ops): the basic ones and
// the online LOGSUMEXP (ScalarOps::lse_merge), which RAVEL_L0_NO_LOGSUMEXP=1 hides so that the
// core's max / exp-sum fallback runs instead. Every one of them also runs with a row epilogue
// (reduce_epilogue_ops, ABI 1.10) and in chains (reduce_chain_ops, ABI 1.11; emit_program.cpp).
uint32_t reduce_ops();

void execute_program(int32_t device, rvl_stream* stream, const rvl_program* p);
void execute_contraction(int32_t device, rvl_stream* stream, const rvl_contraction* c);

}  // namespace rvl::l0
