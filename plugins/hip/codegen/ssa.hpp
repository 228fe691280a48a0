// The SSA instructions of a kernel program as C++ statements, one per instruction, from one
// exhaustive switch over rvl_op (no default: a new op in RVL_OP_LIST breaks the build under
// -Werror=switch until it is given code here, see Note [One op table]).
#pragma once

#include <ravel/backend.h>

#include <functional>
#include <string>

namespace rvl::hip {

// C++ spelling of a dtype in generated code (bool is one byte holding 0 or 1).
const char* ctype(int32_t dtype);
// The unsigned type integer arithmetic wraps in (signed overflow is undefined in C++).
const char* utype(int32_t dtype);
// An exact literal of `dtype` for a CONST value (floats by bit pattern: NaN, inf and -0 survive).
std::string literal(int32_t dtype, const rvl_scalar& value);
std::string float_bits_literal(int32_t dtype, double v);

struct SsaInput {
  const rvl_instruction* ins = nullptr;
  int32_t n = 0;
  // Expression reading input `arg` (already 0 outside its validity range, bool as 0/1).
  std::function<std::string(int32_t arg)> load;
  std::string acc;  // expression for ACC (contraction epilogues only)
  // Long programs call transcendentals out of line (rvl_ol_*): same results, bounded code size.
  bool outline = false;
};

// Appends "const T v<j> = ...;" for every instruction; returns the last value's name.
std::string emit_ssa(std::string& out, const SsaInput& in, const std::string& indent);

// The reduction's combine of two values of `dtype`, and its identity.
std::string combine(int32_t reduce_op, int32_t dtype, const std::string& a, const std::string& b);
std::string identity(int32_t reduce_op, int32_t dtype);
// acc + a * b in the contraction's dtype (FMA for floats: docs/hip.md says so).
std::string multiply_add(int32_t dtype, const std::string& acc, const std::string& a,
                         const std::string& b);

}  // namespace rvl::hip
