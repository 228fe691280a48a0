#pragma once

#include <ravel/backend.h>

namespace rvl::hip {
// Validate, compile (once per structure) and launch. Throw rvl::Error; called inside rvl::guard.
void launch_program(int32_t device, rvl_stream* stream, const rvl_program* program);
void launch_contraction(int32_t device, rvl_stream* stream, const rvl_contraction* c);
}  // namespace rvl::hip
