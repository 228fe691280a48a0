// Note [Row values without an evaluator]
// A row chain's pieces read values that depend on the row alone (layer norm's mean and rstd:
// Note [Row-uniform hoisting]), computed by a small program over the rows before each piece's
// sweep. Run through an Evaluator, each such program costs a block call with its per-call set-up
// (views, slots, a dispatch per instruction) for a handful of rows: once per task of 32 rows
// that was noise, but once per group of rows in L1 (Note [Row groups in L1], row_chain.cpp) it
// measured ~0.2 us per group, ~10% of an in-cache layer norm (2026-12-07), and the row path
// (Note [Row chains in registers]) needs them a few rows at a time. The programs are short and
// of a few ops, so a loop per instruction over a chunk of rows computes them without that set-up. Only ops whose element function is one IEEE operation (or MAX's
// comparison) are taken, through the very functions the array loops use (array_scalar.hpp;
// compiled with -ffp-contract=off like them), so every value has the Evaluator's bits; any other
// program keeps its Evaluator.
#include "row_values.hpp"

#include "array_scalar.hpp"
#include "dtype_ops.hpp"

#include <algorithm>

namespace tbbcpu {
namespace {

using array_detail::scalar;
constexpr int32_t kMaxValueIns = 64;

bool value_op(int32_t op) {
  switch (op) {
    case RVL_OP_LOAD:
    case RVL_OP_CONST:
    case RVL_OP_ADD:
    case RVL_OP_MUL:
    case RVL_OP_MAX:
    case RVL_OP_NEG:
    case RVL_OP_RECIP:
    case RVL_OP_SQRT: return true;
    default: return false;
  }
}

constexpr int64_t kRowChunk = 32;  // rows per pass of the instructions (the chunk's values stay in L1)

// Instruction by instruction over a chunk of rows, so that each one is a loop over the rows that
// the compiler vectorises (one row at a time, a switch per instruction per row was slower than
// the Evaluator it replaced on short rows: 8192 x 128, 2026-12-07).
template <int DT>
void run_typed(const rvl_instruction* ins, int32_t n, const std::byte* const* in, std::byte* out, int64_t r0,
               int64_t r1) {
  using T = ctype<DT>;
  alignas(64) T v[kMaxValueIns][kRowChunk];
  const T* src[kMaxValueIns];  // where instruction j's values for the chunk are
  for (int64_t c0 = r0; c0 < r1; c0 += kRowChunk) {
    const int64_t m = std::min<int64_t>(kRowChunk, r1 - c0);
    for (int32_t j = 0; j < n; ++j) {
      const rvl_instruction& I = ins[j];
      T* d = v[j];
      const T* a = I.src[0] >= 0 ? src[I.src[0]] : nullptr;
      const T* b = I.src[1] >= 0 ? src[I.src[1]] : nullptr;
      src[j] = d;
      switch (I.op) {
        case RVL_OP_LOAD: src[j] = reinterpret_cast<const T*>(in[I.arg]) + c0; break;
        case RVL_OP_CONST: {
          const T c = const_value<DT>(I.value);
          for (int64_t r = 0; r < m; ++r) d[r] = c;
          break;
        }
        case RVL_OP_ADD: for (int64_t r = 0; r < m; ++r) d[r] = scalar<RVL_OP_ADD, DT>(a[r], b[r]); break;
        case RVL_OP_MUL: for (int64_t r = 0; r < m; ++r) d[r] = scalar<RVL_OP_MUL, DT>(a[r], b[r]); break;
        case RVL_OP_MAX: for (int64_t r = 0; r < m; ++r) d[r] = scalar<RVL_OP_MAX, DT>(a[r], b[r]); break;
        case RVL_OP_NEG: for (int64_t r = 0; r < m; ++r) d[r] = scalar<RVL_OP_NEG, DT>(a[r], T{}); break;
        case RVL_OP_RECIP: for (int64_t r = 0; r < m; ++r) d[r] = scalar<RVL_OP_RECIP, DT>(a[r], T{}); break;
        default:  // SQRT (row_values_fit admits no other)
          for (int64_t r = 0; r < m; ++r) d[r] = scalar<RVL_OP_SQRT, DT>(a[r], T{});
          break;
      }
    }
    T* o = reinterpret_cast<T*>(out) + c0;
    for (int64_t r = 0; r < m; ++r) o[r] = src[n - 1][r];
  }
}

}  // namespace

bool row_values_fit(const rvl_instruction* ins, int32_t n, const int32_t* in_dtype, int32_t n_in) {
  if (n < 1 || n > kMaxValueIns) return false;
  const int32_t dt = ins[0].dtype;
  if (dt != RVL_DTYPE_F32 && dt != RVL_DTYPE_F64) return false;
  for (int32_t j = 0; j < n; ++j) {
    const rvl_instruction& I = ins[j];
    if (I.dtype != dt || !value_op(I.op)) return false;
    if (I.op == RVL_OP_LOAD && (I.arg < 0 || I.arg >= n_in || in_dtype[I.arg] != dt)) return false;
    if (I.op == RVL_OP_LOAD || I.op == RVL_OP_CONST) continue;
    const int arity = rvl::op_info(I.op).arity;
    for (int k = 0; k < 3; ++k) {
      const bool used = k < arity;
      if (used && (I.src[k] < 0 || I.src[k] >= j)) return false;
      if (!used && I.src[k] >= 0) return false;
    }
  }
  return true;
}

void run_row_values(const rvl_instruction* ins, int32_t n, const std::byte* const* in, std::byte* out, int64_t r0,
                    int64_t r1) {
  if (ins[0].dtype == RVL_DTYPE_F32) run_typed<RVL_DTYPE_F32>(ins, n, in, out, r0, r1);
  else run_typed<RVL_DTYPE_F64>(ins, n, in, out, r0, r1);
}

}  // namespace tbbcpu
