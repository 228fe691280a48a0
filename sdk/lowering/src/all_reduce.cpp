#include <ravel/backend.hpp>
#include <ravel/lowering/all_reduce.hpp>

namespace rvl::lower {

namespace {

rvl_instruction instruction(rvl_op op, int32_t dtype, int32_t a = -1, int32_t b = -1) {
  rvl_instruction in{};
  in.op = op;
  in.dtype = dtype;
  in.src[0] = a, in.src[1] = b, in.src[2] = -1;
  return in;
}

rvl_operand contiguous(rvl_buffer* b, int32_t dtype, uint64_t count) {
  rvl_operand o{};
  o.struct_size = sizeof o;
  o.buffer = b;
  o.dtype = dtype;
  o.view.struct_size = sizeof o.view;
  o.view.strides[0] = 1;
  o.view.valid_hi[0] = static_cast<int64_t>(count);
  return o;
}

}  // namespace

std::vector<rvl_instruction> all_reduce_fold(int32_t n, int32_t dt, int32_t op) {
  std::vector<rvl_instruction> code;
  for (int32_t k = 0; k < n; ++k) {
    code.push_back(instruction(RVL_OP_LOAD, dt));
    code.back().arg = k;
  }
  const auto push = [&](rvl_instruction in) {
    code.push_back(in);
    return static_cast<int32_t>(code.size() - 1);
  };
  int32_t acc = 0;
  for (int32_t k = 1; k < n; ++k) {
    switch (op) {
      case RVL_ALL_REDUCE_SUM: acc = push(instruction(RVL_OP_ADD, dt, acc, k)); break;
      case RVL_ALL_REDUCE_PROD: acc = push(instruction(RVL_OP_MUL, dt, acc, k)); break;
      case RVL_ALL_REDUCE_MAX: acc = push(instruction(RVL_OP_MAX, dt, acc, k)); break;
      default:
        if (rvl::dtype_is_float(dt)) {
          const int32_t na = push(instruction(RVL_OP_NEG, dt, acc)), nb = push(instruction(RVL_OP_NEG, dt, k));
          acc = push(instruction(RVL_OP_NEG, dt, push(instruction(RVL_OP_MAX, dt, na, nb))));
        } else {
          const int32_t less = push(instruction(RVL_OP_CMPLT, RVL_DTYPE_BOOL, k, acc));
          rvl_instruction w = instruction(RVL_OP_WHERE, dt, less, k);
          w.src[2] = acc;
          acc = push(w);
        }
    }
    if (rvl::dtype_is_half(dt)) acc = push(instruction(RVL_OP_CAST, dt, acc));
  }
  return code;
}

FoldProgram::FoldProgram(const std::vector<rvl_buffer*>& parts, rvl_buffer* out, uint64_t count, int32_t dtype,
                         int32_t op, const std::vector<int64_t>& offsets)
    : code(all_reduce_fold(static_cast<int32_t>(parts.size()), dtype, op)) {
  for (size_t k = 0; k < parts.size(); ++k) {
    inputs.push_back(contiguous(parts[k], dtype, count));
    if (k < offsets.size()) inputs.back().view.offset = offsets[k];
  }
  program.struct_size = sizeof program;
  program.rank = 1;
  program.shape[0] = static_cast<int64_t>(count);
  program.n_inputs = static_cast<int32_t>(inputs.size());
  program.inputs = inputs.data();
  program.n_instructions = static_cast<int32_t>(code.size());
  program.instructions = code.data();
  program.reduce_op = RVL_REDUCE_NONE;
  program.output = contiguous(out, dtype, count);
}

}  // namespace rvl::lower
