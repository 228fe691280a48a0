#include "graph/ops.hpp"

#include "ravel/error.hpp"

namespace ravel::detail {

namespace {
constexpr AluInfo kAluTable[] = {
#define RAVEL_ALU_ROW_(name, display, arity, code, rule, boolean) {display, arity, code, DTypeRule::rule, boolean},
    RAVEL_ALU_OPS(RAVEL_ALU_ROW_)
#undef RAVEL_ALU_ROW_
};
}  // namespace

const AluInfo& alu_info(AluOp op) { return kAluTable[static_cast<int>(op)]; }

void check_alu_dtype(AluOp op, DType t) {
  const AluInfo& info = alu_info(op);
  bool ok = true;
  const char* expected = "";
  switch (info.rule) {
    case DTypeRule::Any: break;
    case DTypeRule::Signed: ok = t != DType::Bool; expected = "a numeric dtype (not bool)"; break;
    case DTypeRule::Float: ok = is_float(t); expected = "a float dtype (f32, f64)"; break;
    case DTypeRule::IntOrBool: ok = !is_float(t); expected = "bool or an integer dtype"; break;
  }
  RAVEL_CHECK(ok, DTypeError, info.name, " expects ", expected, ", got ", dtype_name(t));
}

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Prod: return "prod";
  }
  return "?";
}

}  // namespace ravel::detail
