#pragma once

#include <ravel/backend.h>

namespace rvl::hip {
// Validate, compile (once per structure) and launch. Throw rvl::Error; called inside rvl::guard.
void launch_program(int32_t device, rvl_stream* stream, const rvl_program* program);
// The reductions the generated kernels run, with or without a row epilogue (ABI 1.4 / 1.10):
// RVL_REDUCE_OPS_BASIC and LOGSUMEXP, which RAVEL_HIP_NO_LOGSUMEXP=1 hides so that the core's
// max / exp-sum fallback can be compared on the same device.
uint32_t reduce_ops();
void launch_contraction(int32_t device, rvl_stream* stream, const rvl_contraction* c);
}  // namespace rvl::hip
