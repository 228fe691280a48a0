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

// X(Name, arity, rvl_op, DTypeRule, result_is_bool)
#define RAVEL_ALU_OPS(X)                               \
  X(Neg, 1, RVL_OP_NEG, Signed, false)                 \
  X(Recip, 1, RVL_OP_RECIP, Float, false)              \
  X(Sqrt, 1, RVL_OP_SQRT, Float, false)                \
  X(Exp2, 1, RVL_OP_EXP2, Float, false)                \
  X(Log2, 1, RVL_OP_LOG2, Float, false)                \
  X(Sin, 1, RVL_OP_SIN, Float, false)                  \
  X(Trunc, 1, RVL_OP_TRUNC, Any, false)                \
  X(Cast, 1, RVL_OP_CAST, Any, false)                  \
  X(Add, 2, RVL_OP_ADD, Any, false)                    \
  X(Mul, 2, RVL_OP_MUL, Any, false)                    \
  X(Max, 2, RVL_OP_MAX, Any, false)                    \
  X(Mod, 2, RVL_OP_MOD, Signed, false)                 \
  X(IDiv, 2, RVL_OP_IDIV, Signed, false)               \
  X(CmpLt, 2, RVL_OP_CMPLT, Any, true)                 \
  X(CmpNe, 2, RVL_OP_CMPNE, Any, true)                 \
  X(And, 2, RVL_OP_AND, IntOrBool, false)              \
  X(Or, 2, RVL_OP_OR, IntOrBool, false)                \
  X(Xor, 2, RVL_OP_XOR, IntOrBool, false)              \
  X(Where, 3, RVL_OP_WHERE, Any, false)

enum class AluOp : uint8_t {
#define RAVEL_ALU_ENUM_(name, arity, code, rule, boolean) name,
  RAVEL_ALU_OPS(RAVEL_ALU_ENUM_)
#undef RAVEL_ALU_ENUM_
};

struct AluInfo {
  const char* name;
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
