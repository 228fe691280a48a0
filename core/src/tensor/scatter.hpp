// The one-hot scatter that scatter, scatter_add, scatter_reduce and index_put share, and the
// index checks of the indexing ops (Note [Scatter as a one-hot reduction] in scatter.cpp).
#pragma once

#include <string>

#include "ravel/tensor.hpp"

namespace ravel::detail {

enum class ScatterMode { Replace, Sum, Prod, Mean, Amax, Amin };

// out = self with src's entries sent along axis d to the positions index names, combined by
// `mode`. The caller has checked: index is an integer tensor of self's rank, every entry in
// [0, self.size(d)); index no larger than src on any axis nor than self on any other axis; src
// of self's rank. ValueError (naming `op`) when the one-hot selection exceeds the size limit.
Tensor scatter_along(const Tensor& self, int64_t d, const Tensor& index, const Tensor& src, ScatterMode mode,
                     bool include_self, const char* op);

// hot @ x for a bool matrix hot [a, b] and a float matrix x [b, r], as one GEMM, exact for
// non-finite x (0 * inf is not let in), with hot^T @ g as its derivative (Note [One-hot
// selections as a GEMM] in onehot_matmul.cpp). hot is materialised in x's dtype: callers keep
// a * b within kOneHotGemmMaxElements.
constexpr int64_t kOneHotGemmMaxElements = int64_t{1} << 26;
Tensor onehot_matmul(const Tensor& hot, const Tensor& x);

// IndexError unless every entry of the integer tensor `index` is in [-bound, bound) (NumPy and
// Python indexing), naming op, the first offender, its position and `what` is indexed, as
// check_index_bounds does for [0, bound).
void check_signed_index_bounds(const Tensor& index, int64_t bound, const std::string& op, const std::string& what);
// index as i64 with negative entries counted from the end: where(index < 0, index + n, index).
Tensor wrap_negative_index(const Tensor& index, int64_t n);

}  // namespace ravel::detail
