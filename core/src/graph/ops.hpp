// The one list of Ravel's primitive ops.
//
// Every elementwise primitive is one row: its name, arity, the C ABI instruction it lowers to,
// and which dtypes it accepts. Names, validation and lowering derive from this table; the scalar
// functor lives in each backend (plugins/tbb_cpu/dtype_ops.hpp) and the derivative rule beside
// the primitive in autodiff. Composites (tanh, softmax, matmul, ...) are plain C++ over these
// (core/src/tensor/composite*.cpp). Movement primitives are View functions (tensor/view.hpp).
#pragma once

#include <cstdint>

#include "ravel/backend.h"
#include "ravel/dtype.hpp"

namespace ravel::detail {

// Which dtypes an op accepts.
enum class DTypeRule : uint8_t {
  Any,        // every dtype
  Signed,     // everything but bool (neg of u8 wraps)
  Float,      // f32, f64 (the tensor layer casts ints to f32 first)
  IntOrBool,  // logical/bitwise ops
};

// X(Name, user-facing name, arity, rvl_op, DTypeRule, result_is_bool)
#define RAVEL_ALU_OPS(X)                               \
  X(Neg, "neg", 1, RVL_OP_NEG, Signed, false)                 \
  X(Recip, "recip", 1, RVL_OP_RECIP, Float, false)              \
  X(Sqrt, "sqrt", 1, RVL_OP_SQRT, Float, false)                \
  X(Exp2, "exp2", 1, RVL_OP_EXP2, Float, false)                \
  X(Log2, "log2", 1, RVL_OP_LOG2, Float, false)                \
  X(Sin, "sin", 1, RVL_OP_SIN, Float, false)                  \
  X(Trunc, "trunc", 1, RVL_OP_TRUNC, Any, false)                \
  X(Cast, "cast", 1, RVL_OP_CAST, Any, false)                  \
  X(Add, "add", 2, RVL_OP_ADD, Any, false)                    \
  X(Mul, "mul", 2, RVL_OP_MUL, Any, false)                    \
  X(Max, "maximum", 2, RVL_OP_MAX, Any, false)                    \
  X(Mod, "mod", 2, RVL_OP_MOD, Signed, false)                 \
  X(IDiv, "idiv", 2, RVL_OP_IDIV, Signed, false)               \
  X(CmpLt, "lt", 2, RVL_OP_CMPLT, Any, true)                 \
  X(CmpNe, "ne", 2, RVL_OP_CMPNE, Any, true)                 \
  X(And, "logical_and", 2, RVL_OP_AND, IntOrBool, false)              \
  X(Or, "logical_or", 2, RVL_OP_OR, IntOrBool, false)                \
  X(Xor, "logical_xor", 2, RVL_OP_XOR, IntOrBool, false)              \
  X(Where, "where", 3, RVL_OP_WHERE, Any, false)

enum class AluOp : uint8_t {
#define RAVEL_ALU_ENUM_(name, display, arity, code, rule, boolean) name,
  RAVEL_ALU_OPS(RAVEL_ALU_ENUM_)
#undef RAVEL_ALU_ENUM_
};

struct AluInfo {
  const char* name;  // as the user calls it (Tensor method)
  int arity;
  rvl_op code;
  DTypeRule rule;
  bool result_is_bool;
};
const AluInfo& alu_info(AluOp op);
// Throws DTypeError naming the op, the dtype and what the op accepts.
void check_alu_dtype(AluOp op, DType t);

enum class ReduceOp : uint8_t { Sum = RVL_REDUCE_SUM, Max = RVL_REDUCE_MAX, Prod = RVL_REDUCE_PROD };
const char* reduce_name(ReduceOp op);

}  // namespace ravel::detail
