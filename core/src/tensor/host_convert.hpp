// Element conversion on the host, with the ABI's CAST semantics (backend.h, docs/dtypes.md):
// float -> integer truncates toward zero and saturates (NaN -> 0), integer -> integer wraps,
// -> bool is x != 0, -> f16/bf16 rounds to nearest even (<ravel/half.hpp>).
//
// Why on the host: data made on the host (ranges, random numbers, files) is converted once before
// upload; and a read (to_vector, item, printing) of a dtype its device does not run converts
// after the download instead of asking the device for a cast it cannot do (Note [Dtypes a device
// lacks] in runtime/realize.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ravel/dtype.hpp"

namespace ravel::detail {

// Converts n elements of `from` at src into `to` at dst (which must not overlap src).
void host_convert(const void* src, DType from, void* dst, DType to, int64_t n);

// `v` converted to `to`, as bytes.
std::vector<unsigned char> host_convert_doubles(const std::vector<double>& v, DType to);

}  // namespace ravel::detail
