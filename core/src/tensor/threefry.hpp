// Threefry-2x32 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), 20 rounds,
// the counter-based generator JAX and tinygrad use: element i of a stream is a pure function of
// (seed, i), so every device and every schedule produces the same numbers.
#pragma once

#include <cstdint>
#include <vector>

namespace ravel::detail {

// Encrypts the counter (c0, c1) under the key (k0, k1).
void threefry2x32(uint32_t k0, uint32_t k1, uint32_t& c0, uint32_t& c1);
// n uniform numbers in [0, 1): 24 random bits each (f32 resolution), or 53 if `wide`.
std::vector<double> uniform_threefry(uint64_t seed, int64_t n, bool wide);

}  // namespace ravel::detail
