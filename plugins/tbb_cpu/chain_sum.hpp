// The SUM fold of a row chain's parts (row_chain.cpp): Note [Wide lanes for chain sums].
#pragma once

#include <cstdint>
#include <cstring>

namespace tbbcpu {

// Note [Wide lanes for chain sums]
// fold.hpp folds a float run into 64 bytes of lanes: one vector add chain, one add per 4 cycles
// whatever the width, so a 1,024-element row costs 64 dependent adds per part. Here a row
// chain's SUM runs on 256 bytes of lanes, eight independent 32-byte accumulators (named locals of
// the AVX2 width, so that GCC keeps them in registers: 64-byte vectors in the AVX2 clone, or an
// array of them, went through the stack, every add waiting on a store), combined in a fixed
// tree, then the rest left to right. The order depends only on n, never on
// the SIMD tier, so the bits are the same on every machine; they are not fold.hpp's (another
// summation order, within the tolerance the tests hold chains to; docs/architecture.md
// decision 65), and the error bound is that of a 64-way (float) or 32-way (double) pairwise-ish
// sum: no worse.
template <class T>
[[gnu::always_inline]] inline T sum_wide_lanes(T acc, const T* v, int64_t n) {
  typedef T V __attribute__((vector_size(32)));
  constexpr int W = 32 / sizeof(T);  // lanes per accumulator
  constexpr int L = 8 * W;           // lanes in all: 64 floats, 32 doubles
  if (n >= L) {
    V a0, a1, a2, a3, a4, a5, a6, a7, x;
    std::memcpy(&a0, v, 32), std::memcpy(&a1, v + W, 32), std::memcpy(&a2, v + 2 * W, 32);
    std::memcpy(&a3, v + 3 * W, 32), std::memcpy(&a4, v + 4 * W, 32), std::memcpy(&a5, v + 5 * W, 32);
    std::memcpy(&a6, v + 6 * W, 32), std::memcpy(&a7, v + 7 * W, 32);
    int64_t i = L;
    for (; i + L <= n; i += L) {
      std::memcpy(&x, v + i, 32), a0 += x;
      std::memcpy(&x, v + i + W, 32), a1 += x;
      std::memcpy(&x, v + i + 2 * W, 32), a2 += x;
      std::memcpy(&x, v + i + 3 * W, 32), a3 += x;
      std::memcpy(&x, v + i + 4 * W, 32), a4 += x;
      std::memcpy(&x, v + i + 5 * W, 32), a5 += x;
      std::memcpy(&x, v + i + 6 * W, 32), a6 += x;
      std::memcpy(&x, v + i + 7 * W, 32), a7 += x;
    }
    // The lanes halved in a fixed tree: lane j += lane j + L/2, then L/4, ... down to one.
    a0 += a4, a1 += a5, a2 += a6, a3 += a7;
    a0 += a2, a1 += a3;
    a0 += a1;
    T lane[W];
    std::memcpy(lane, &a0, sizeof lane);
    for (int w = W / 2; w >= 1; w /= 2)
      for (int j = 0; j < w; ++j) lane[j] += lane[j + w];
    acc += lane[0];
    v += i, n -= i;
  }
  for (int64_t k = 0; k < n; ++k) acc += v[k];
  return acc;
}

}  // namespace tbbcpu
