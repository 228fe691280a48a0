// The all-reduce (ABI 1.9 `all_reduce`) as a kernel a GPU backend already knows how to run: the
// fold of n parts in the ABI's order, one generated elementwise program (Note [Fold programs]).
#pragma once

#include <ravel/backend.h>

#include <cstdint>
#include <vector>

namespace rvl::lower {

// Note [Fold programs]
// backend.h fixes the all-reduce's result: outputs[k][i] = in0[i] op in1[i] op ... op in(n-1)[i],
// folded left to right, halves rounded after every step "as two ADDs would". As an rvl_program
// over [count] with n contiguous LOADs that is: ADD / MUL / MAX for SUM / PROD / MAX (bool: or,
// and, or, as the instructions mean), MIN as -max(-a, -b) for floats (MAX propagates NaN; NEG
// is exact) and where(b < a, b, a) for the others, and a CAST to the half dtype after every
// step (a CAST of a computed half rounds, docs/dtypes.md). Every device runs the same program,
// so every output holds the same bytes. The reference's fold (sdk/conformance
// cases_all_reduce.cpp) is written independently with the interpreter's instructions.
struct FoldProgram {
  std::vector<rvl_operand> inputs;
  std::vector<rvl_instruction> code;
  rvl_program program{};  // points into inputs and code: do not copy a FoldProgram
  FoldProgram(const FoldProgram&) = delete;
  FoldProgram& operator=(const FoldProgram&) = delete;
  // parts: n >= 2 buffers in fold order, part k read from element offsets[k] (empty: all 0, as
  // for all_reduce; reduce_scatter reads its own chunk in place, Note [Collective plans]); out,
  // written from element 0, may be parts[k] at offset 0 (elementwise, so in place is safe).
  FoldProgram(const std::vector<rvl_buffer*>& parts, rvl_buffer* out, uint64_t count, int32_t dtype, int32_t op,
              const std::vector<int64_t>& offsets = {});
};

// The instructions alone (n LOADs of args 0..n-1, then the fold); op is an rvl_all_reduce_op.
std::vector<rvl_instruction> all_reduce_fold(int32_t n, int32_t dtype, int32_t op);

}  // namespace rvl::lower
