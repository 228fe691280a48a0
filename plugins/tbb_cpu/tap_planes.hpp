// The tap sums' plane kernels (Note [Tap sums], tap_rows.cpp): one plane of a sum of taps,
// rows of `width` elements, each term a row input times a per-row value, a row input, or a
// per-row value.
#pragma once

#include <cstdint>

namespace tbbcpu {

// One plane's operands (rows h < rows of `width` elements), per term: the row input's first
// element of row 0 (`p`, bytes `p_step` per row; lanes outside [a, b) and rows outside
// [h_lo, h_hi) read as zero and are not addressed), the per-row value (`s` at row 0, `s_step`
// elements per row), which of the two the term has.
struct PlaneTerm {
  uintptr_t p;
  int64_t p_step, a, b, h_lo, h_hi;
  const float* s;
  int64_t s_step;
  bool has_row, has_scalar;
};

// out[h * out_step + j] = the terms' sum, added in order (t[0] + t[1]) + t[2] + ..., products
// not contracted into FMA.
using TapPlaneFn = void (*)(const PlaneTerm* t, int n_terms, int64_t rows, int64_t width, float* out,
                            int64_t out_step);

// products_first: the terms are `products` products, then per-row values, all of them one
// value per plane (s_step 0), the row inputs stepping alike (p_step equal). width <= 1024.
TapPlaneFn select_tap_plane(bool products_first, int products);

}  // namespace tbbcpu
