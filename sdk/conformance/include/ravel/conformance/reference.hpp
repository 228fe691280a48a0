// The SDK's reference interpreter for the Ravel backend ABI (see docs/abi.md).
//
// Deliberately simple and obviously correct rather than fast: every element is computed on its
// own from its multi-index, values travel as int64 (bool and integer dtypes) or double (floats),
// and every rule of docs/abi.md is re-derived here without sharing code with any plugin.
//  - Element-wise instructions are evaluated exactly as the ABI specifies them for the
//    instruction's dtype (an f32 ADD is rounded to f32, integers wrap, x/0 == 0, ...).
//  - Reductions and contractions accumulate in f64 (floats) or in wrapping int64 (integers;
//    exact, since wrap-around is compatible with + and *), and round to the dtype once at the end.
// The reference does not validate: feed it only kernels a plugin accepted (or that you built).
#pragma once

#include <ravel/backend.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace rvl::ref {

// A value of any dtype: `i` for bool and integer dtypes, `f` for floats.
struct Value {
  int64_t i = 0;
  double f = 0;
};
inline Value ival(int64_t i) { return Value{i, 0}; }
inline Value fval(double f) { return Value{0, f}; }

bool is_float(int32_t dtype);
size_t element_size(int32_t dtype);  // throws std::invalid_argument for an unknown dtype

// Host-side contents of a buffer, read as elements of `dtype`.
struct HostBuffer {
  int32_t dtype = RVL_DTYPE_F32;
  std::vector<uint8_t> bytes;

  HostBuffer() = default;
  HostBuffer(int32_t dt, int64_t elements);  // zero-filled
  int64_t elements() const;
  Value get(int64_t index) const;  // throws std::out_of_range
  void set(int64_t index, Value v);  // converts v to the dtype (wraps / rounds), bounds-checked
};

// Converts an int64 / double into the value set of `dtype` (wrap-around, f32 rounding, 0/1).
Value normalize(int32_t dtype, Value v);
// CAST from `from` to `to` (docs/abi.md 7.3).
Value cast(int32_t to, int32_t from, Value x);
// The value of a CONST instruction of `dtype`.
Value constant(int32_t dtype, const rvl_scalar& s);
// One element-wise instruction. `dtype` is the result dtype, `src_dtype` that of source 0.
Value apply(int32_t op, int32_t dtype, int32_t src_dtype, Value a, Value b = {}, Value c = {});
// The identity of a reduction in `dtype` (-inf / MIN for MAX, 1 for PROD, 0 for SUM).
Value reduce_identity(int32_t reduce_op, int32_t dtype);

// Evaluates a program. `inputs[k]` holds the buffer behind p.inputs[k] and `out` the buffer
// behind p.output (updated in place; elements the program does not store keep their value).
// Views are taken from `p` as given (offsets in elements of those host buffers).
void run_program(const rvl_program& p, const std::vector<const HostBuffer*>& inputs,
                 HostBuffer& out);

// Evaluates a contraction (with its epilogue, if any); `epilogue_inputs` as for run_program.
void run_contraction(const rvl_contraction& c, const HostBuffer& a, const HostBuffer& b,
                     const std::vector<const HostBuffer*>& epilogue_inputs, HostBuffer& out);

}  // namespace rvl::ref
