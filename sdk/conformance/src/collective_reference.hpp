// What the collective groups share (all_reduce, cases_all_reduce.cpp; reduce_scatter and
// all_gather, cases_scatter_gather.cpp): the reference fold in the ABI's order and the dtypes a
// mesh runs. Defined in cases_all_reduce.cpp.
#pragma once

#include "device_buffers.hpp"

#include <cstdint>
#include <vector>

namespace rvl::conformance::all_reduce_cases {

// The dtypes every device of `devices` runs.
uint32_t common_dtypes(const std::vector<int32_t>& devices);
// "sum", "max", "prod", "min".
const char* op_name(int32_t op);
// The fold of `parts` in order, element by element, on the reference interpreter's instructions.
ref::HostBuffer fold(int32_t op, const std::vector<ref::HostBuffer>& parts);
// `head` followed by `tail` bytes of `fill`.
std::vector<uint8_t> with_tail(const std::vector<uint8_t>& head, size_t tail, uint8_t fill);

}  // namespace rvl::conformance::all_reduce_cases
