// The element functions behind the array loops (array_ops.cpp) and the fused half loops
// (half_fused.cpp): one definition, so every loop computes each element the same way.
#pragma once

#include "dtype_ops.hpp"
#include "fast_math.hpp"

#include <ravel/op_table.hpp>

#include <cmath>

namespace tbbcpu::array_detail {

// Which (op, source dtype) pairs get an array loop: every arithmetic row of the op table on the
// dtypes it accepts. LOAD, CONST, ACC and CAST are handled by the evaluator itself.
constexpr bool supported(int op, int dt) {
  return rvl::op_is_arithmetic(op) && op != RVL_OP_CAST && rvl::op_accepts(op, dt) && tbb_runs(dt);
}
template <int OP> inline constexpr bool kNoFunctor = false;

template <int OP, int DT>
inline ctype<DT> scalar(ctype<DT> a, ctype<DT> b) {
  using T = ctype<DT>;
  if constexpr (OP == RVL_OP_NEG) return s_neg<DT>(a);
  else if constexpr (OP == RVL_OP_RECIP) return T(1) / a;
  else if constexpr (OP == RVL_OP_SQRT) return std::sqrt(a);
  else if constexpr (OP == RVL_OP_EXP2 && DT == RVL_DTYPE_F32) return fast_exp2f(a);  // vectorises
  else if constexpr (OP == RVL_OP_EXP2) return std::exp2(a);
  else if constexpr (OP == RVL_OP_LOG2) return std::log2(a);
  else if constexpr (OP == RVL_OP_SIN) return std::sin(a);
  else if constexpr (OP == RVL_OP_TRUNC) return s_trunc<DT>(a);
  else if constexpr (OP == RVL_OP_ADD) return s_add<DT>(a, b);
  else if constexpr (OP == RVL_OP_MUL) return s_mul<DT>(a, b);
  else if constexpr (OP == RVL_OP_MAX) return s_max<DT>(a, b);
  else if constexpr (OP == RVL_OP_MOD) return s_mod<DT>(a, b);
  else if constexpr (OP == RVL_OP_IDIV) return s_idiv<DT>(a, b);
  else if constexpr (OP == RVL_OP_AND) return static_cast<T>(a & b);
  else if constexpr (OP == RVL_OP_OR) return static_cast<T>(a | b);
  else if constexpr (OP == RVL_OP_XOR) return static_cast<T>(a ^ b);
  // A row added to the op table lands here (supported() instantiates every arithmetic row):
  // the build fails until the op has a CPU functor.
  else static_assert(kNoFunctor<OP>, "op table row without a tbb_cpu functor");
}

}  // namespace tbbcpu::array_detail
