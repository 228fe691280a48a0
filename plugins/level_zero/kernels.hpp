// Running kernels: validation, the f64 check, planning, the module cache and the launch.
#pragma once

#include <ravel/backend.h>

namespace rvl::l0 {

void execute_program(int32_t device, rvl_stream* stream, const rvl_program* p);
void execute_contraction(int32_t device, rvl_stream* stream, const rvl_contraction* c);

}  // namespace rvl::l0
