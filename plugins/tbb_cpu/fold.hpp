// Folding a run of values into one accumulator (the reductions of program.cpp and the chains
// of row_chain.cpp share it).
#pragma once

#include "dtype_ops.hpp"

#include <cstdint>

namespace tbbcpu {

template <int DT, int ROP>
__attribute__((always_inline)) inline ctype<DT> fold_linear(ctype<DT> acc, const ctype<DT>* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc = reduce_combine<DT>(ROP, acc, v[i]);
  return acc;
}

// Note [Vectorised horizontal reductions]
// A float sum folded strictly left to right is one dependent add per element: GCC may not
// reorder it (no -ffast-math), so it runs at one add per 3-4 cycles, far below memory speed.
// Floats are folded instead into L = 64 bytes of independent lanes (four SSE vectors, two AVX
// ones), combined in a fixed tree at the end: the order depends only on n, so results stay
// deterministic, and the error bound is that of pairwise-ish summation (better, not worse).
// MAX is exact in any order; its lanes skip NaN and infinity checks and instead track x - x
// (NaN exactly when x is NaN or infinite), and when that flags anything the slice is folded
// again left to right, so NaN propagation is exactly the scalar rule's. Integers keep the
// plain loop (wrap-around sums are associative, and GCC vectorises them as written).
// always_inline: row_chain.cpp inlines it into an AVX2 clone.
template <int DT, int ROP>
__attribute__((always_inline)) inline ctype<DT> fold(ctype<DT> acc, const ctype<DT>* v, int64_t n) {
  using T = ctype<DT>;
  if constexpr (is_float_v<DT>) {
    constexpr int L = 64 / sizeof(T);
    if (n >= 2 * L) {
      T lane[L], chk[L];
      for (int j = 0; j < L; ++j) lane[j] = v[j], chk[j] = v[j] - v[j];
      int64_t i = L;
      for (; i + L <= n; i += L) {
        if constexpr (ROP == RVL_REDUCE_MAX) {
          for (int j = 0; j < L; ++j) {
            const T x = v[i + j];
            lane[j] = lane[j] < x ? x : lane[j];
            chk[j] += x - x;
          }
        } else if constexpr (ROP == RVL_REDUCE_SUM) {
          for (int j = 0; j < L; ++j) lane[j] += v[i + j];
        } else {
          for (int j = 0; j < L; ++j) lane[j] *= v[i + j];
        }
      }
      if constexpr (ROP == RVL_REDUCE_MAX) {
        T c = 0;
        for (int j = 0; j < L; ++j) c += chk[j];
        if (c != c) return fold_linear<DT, ROP>(acc, v, n);  // NaN or infinity: exact rule
      }
      for (int w = L / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) lane[j] = reduce_combine<DT>(ROP, lane[j], lane[j + w]);
      acc = reduce_combine<DT>(ROP, acc, lane[0]);
      return fold_linear<DT, ROP>(acc, v + i, n - i);
    }
  }
  return fold_linear<DT, ROP>(acc, v, n);
}

}  // namespace tbbcpu
