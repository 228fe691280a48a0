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
#include <string>
#include <vector>

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

// Note [Capabilities]
// What a device runs: the rows of the op table (ABI 1.6 rvl_device_properties.ops) and the
// reductions (1.4 reduce_ops), read once per device by the runtime (LoadedPlugin::caps) minus
// what RAVEL_MASK_OPS masks off. The core sends a device nothing outside its set. An elementwise
// op it lacks is rewritten when its kernel is lowered (lower_for_device below, with the
// decomposition table of <ravel/decompose.hpp>, which ravel-conformance shares); a LOGSUMEXP
// reduction it lacks becomes a max and a sum of exponentials when the graph is built (Note
// [Online logsumexp], tensor/reduce.cpp), because that decomposition needs two kernels, not
// more instructions in one. What has no decomposition is refused, naming op, dtype and device,
// before any kernel of the realization runs.
struct OpSet {
  uint64_t alu = RVL_OPS_1_0;                 // bit RVL_OP_BIT(op)
  uint32_t reduce = RVL_REDUCE_OPS_BASIC;     // bit (1u << rvl_reduce_op)
  bool has(AluOp op) const { return (alu >> static_cast<uint32_t>(op)) & 1u; }
  bool has(ReduceOp op) const { return (reduce >> static_cast<uint32_t>(op)) & 1u; }
};
// Parses RAVEL_MASK_OPS: op names separated by commas, as the op table spells them, any case
// ("sqrt,MAX,logsumexp"): the ops to treat every device as lacking. ValueError for an unknown
// name, or one that cannot be lacked (LOAD, CONST, ACC; SUM, MAX and PROD as reductions).
OpSet parse_masked_ops(const std::string& text);
// `code` rewritten so that every instruction is in `ops` (the device's op mask); DeviceError
// naming the op, its dtype and `device` when an op has no decomposition into them.
std::vector<rvl_instruction> lower_for_device(const std::vector<rvl_instruction>& code, uint64_t ops,
                                              const std::string& device);

}  // namespace ravel::detail
