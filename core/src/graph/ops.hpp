// The core's view of Ravel's primitive ops.
//
// Elementwise primitives are the rows of the ABI's op table (RVL_OP_LIST in backend.h, read
// through <ravel/op_table.hpp>): AluOp *is* rvl_op, so arity, accepted dtypes, result dtype and
// lowering come from that one table and nothing here changes when a row is added. What is
// core-specific lives elsewhere: the derivative rule beside the primitive in autodiff/rules.cpp,
// the public method in tensor.hpp. Composites (tanh, softmax, matmul, ...) are plain C++ over
// these (core/src/tensor/composite.cpp). Movement primitives are functions on StridedView
// (graph/view.hpp).
#pragma once

#include <cstdint>

#include <ravel/op_table.hpp>

#include "ravel/backend.h"
#include "ravel/dtype.hpp"

namespace ravel::detail {

// One enumerator per row of the op table, with the ABI's value (LOAD, CONST and ACC exist for
// completeness; graph nodes never carry them).
enum class AluOp : int32_t {
#define RAVEL_ALU_ENUM_(name, arity, accepts, result, accuracy) name = RVL_OP_##name,
  RVL_OP_LIST(RAVEL_ALU_ENUM_)
#undef RAVEL_ALU_ENUM_
};

inline rvl_op abi_op(AluOp op) { return static_cast<rvl_op>(op); }
inline const rvl::OpInfo& alu_info(AluOp op) { return rvl::op_info(static_cast<int32_t>(op)); }
// The name users know the op by (its Tensor method): "maximum", "lt", "logical_and", "sqrt".
const char* alu_name(AluOp op);
// The result dtype of `op` on sources of dtype `t` (bool for comparisons).
DType alu_result_dtype(AluOp op, DType t);
// Throws DTypeError naming the op, the dtype and what the op accepts.
void check_alu_dtype(AluOp op, DType t);

// LogSumExp (ABI 1.4) is optional for a device (Engine::device_has_reduce); only float inputs.
enum class ReduceOp : uint8_t {
  Sum = RVL_REDUCE_SUM,
  Max = RVL_REDUCE_MAX,
  Prod = RVL_REDUCE_PROD,
  LogSumExp = RVL_REDUCE_LOGSUMEXP
};
const char* reduce_name(ReduceOp op);

}  // namespace ravel::detail
