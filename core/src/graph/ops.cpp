#include "graph/ops.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include <ravel/decompose.hpp>

#include "ravel/error.hpp"

namespace ravel::detail {

namespace {
// User-facing names: the lower-case ABI name unless the Tensor method is called otherwise.
std::array<std::string, RVL_OP_COUNT_> make_names() {
  std::array<std::string, RVL_OP_COUNT_> names;
  for (int32_t op = 0; op < RVL_OP_COUNT_; ++op) {
    std::string n = rvl::op_info(op).name;
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    names[op] = n;
  }
  names[RVL_OP_MAX] = "maximum";
  names[RVL_OP_CMPLT] = "lt";
  names[RVL_OP_CMPNE] = "ne";
  names[RVL_OP_AND] = "logical_and";
  names[RVL_OP_OR] = "logical_or";
  names[RVL_OP_XOR] = "logical_xor";
  return names;
}
}  // namespace

const char* alu_name(AluOp op) {
  static const std::array<std::string, RVL_OP_COUNT_> names = make_names();
  return names[static_cast<int32_t>(op)].c_str();
}

DType alu_result_dtype(AluOp op, DType t) {
  const int32_t r = rvl::op_result_dtype(static_cast<int32_t>(op), static_cast<int32_t>(t));
  return r < 0 ? t : static_cast<DType>(r);
}

void check_alu_dtype(AluOp op, DType t) {
  const int32_t code = static_cast<int32_t>(op);
  RAVEL_CHECK(rvl::op_accepts(code, static_cast<int32_t>(t)), DTypeError, alu_name(op),
              " expects ", rvl::op_accepts_text(code), ", got ", dtype_name(t));
}

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::LogSumExp: return "logsumexp";
  }
  return "?";
}

OpSet parse_masked_ops(const std::string& text) {
  OpSet masked{0, 0};
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    std::string name = text.substr(start, end - start);
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    start = end + 1;
    if (name.empty()) continue;
    if (name == "LOGSUMEXP") {
      masked.reduce |= 1u << RVL_REDUCE_LOGSUMEXP;
      continue;
    }
    int32_t op = 0;
    while (op < RVL_OP_COUNT_ && name != rvl::op_info(op).name) ++op;
    RAVEL_CHECK(op < RVL_OP_COUNT_, ValueError, "unknown op '", name,
                "': expected names of the op table (SQRT, MAX, CMPNE, ...) or LOGSUMEXP");
    RAVEL_CHECK(!((RVL_OPS_REQUIRED >> op) & 1u), ValueError, "op ", name,
                " cannot be masked: every device has it (RVL_OPS_REQUIRED)");
    masked.alu |= RVL_OP_BIT(op);
  }
  return masked;
}

std::vector<rvl_instruction> lower_for_device(const std::vector<rvl_instruction>& code, uint64_t ops,
                                              const std::string& device) {
  if (std::all_of(code.begin(), code.end(), [&](const rvl_instruction& in) { return rvl::ops_have(ops, in.op); }))
    return code;
  rvl::Rewriter r(ops);
  if (r.rewrite(code.data(), static_cast<int32_t>(code.size()))) return r.result();
  throw DeviceError("device " + device + ": " + r.error() + "; nothing was run");
}

}  // namespace ravel::detail
