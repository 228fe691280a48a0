// ABI 1.10: reductions with a row epilogue (rvl_program.n_epilogue > 0).
//
// Note [Row epilogue]
// softmax is e^(x - lse) with lse = logsumexp(x) over the same row: as two kernels the row is
// read from memory twice (the reduction, then the elementwise kernel) and lse makes a round
// trip through memory. With the epilogue the host hands both to one program, and:
//  - LOGSUMEXP with its reduced axes innermost (rows contiguous in linear order) runs
//    Evaluator::run_logsumexp_fused (lse_reduce.cpp): each thread folds rows a block at a time
//    (the online max-and-sum), and as soon as rows are finished it runs the epilogue over them,
//    with ACC the row's result, while they are still in L1/L2. x is read from memory once.
//  - Every other case (SUM/MAX/PROD, reduced axes outermost or interleaved, rows so long that
//    they are split across threads, f16/bf16) runs as two passes here: the reduction into a
//    scratch buffer of acc_dtype, then the epilogue as an elementwise program whose ACC reads
//    that buffer broadcast along the reduced axes. Correct everywhere, and no slower than the
//    two kernels the host would send otherwise (one launch fewer).
// The epilogue's elementwise evaluator walks the space in row-major linear order; the fused
// path needs that order to equal the reduction's (output o owns [o R, (o + 1) R)), which holds
// exactly when no kept axis of extent > 1 follows a reduced axis of extent > 1.
#include "evaluator.hpp"
#include "kernel.hpp"

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

#include <cstddef>
#include <vector>

namespace tbbcpu {
namespace {

bool any_half(const Program& p) {
  if (rvl::dtype_is_half(p.out.dtype) || rvl::dtype_is_half(p.acc_dtype)) return true;
  for (const View& v : p.inputs)
    if (rvl::dtype_is_half(v.dtype)) return true;
  for (int32_t j = 0; j < p.n_ins; ++j)
    if (rvl::dtype_is_half(p.ins[j].dtype)) return true;
  for (int32_t j = 0; j < p.n_epilogue; ++j)
    if (rvl::dtype_is_half(p.epilogue[j].dtype)) return true;
  return false;
}

// The reduction alone, into `out` (of acc_dtype, laid out as the reduced result).
Program reduction_part(const Program& p, const View& out) {
  Program q = p;
  q.epilogue = nullptr;
  q.n_epilogue = 0;
  q.out = out;
  return q;
}

// The epilogue alone, as an elementwise program over the same space writing p.out; ACC reads
// `acc` (the reduced values, stride 0 along the reduced axes), appended as the last input.
Program epilogue_part(const Program& p, std::vector<rvl_instruction>& code, const View* acc) {
  Program e = p;
  e.reduce_op = RVL_REDUCE_NONE;
  e.reduce_axes = 0;
  e.epilogue = nullptr;
  e.n_epilogue = 0;
  code.assign(p.epilogue, p.epilogue + p.n_epilogue);
  if (acc) {
    const int32_t arg = static_cast<int32_t>(e.inputs.size());
    e.inputs.push_back(*acc);
    for (rvl_instruction& in : code)
      if (in.op == RVL_OP_ACC) in.op = RVL_OP_LOAD, in.arg = arg;
  }
  e.ins = code.data();
  e.n_ins = static_cast<int32_t>(code.size());
  return e;
}

}  // namespace

View row_values(const Program& p, int32_t dtype, std::byte* data) {
  View v;
  v.dtype = dtype;
  v.data = data;
  int64_t kept = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    v.lo[d] = 0;
    v.hi[d] = p.shape[d];
    const bool red = (p.reduce_axes >> d) & 1u;
    v.stride[d] = red ? 0 : kept;
    if (!red) kept *= p.shape[d];
  }
  return v;
}

bool reduced_innermost(const Program& p) {
  bool seen_reduced = false;
  for (int d = 0; d < p.rank; ++d) {
    if (p.shape[d] <= 1) continue;
    const bool red = (p.reduce_axes >> d) & 1u;
    if (!red && seen_reduced) return false;
    seen_reduced = seen_reduced || red;
  }
  return true;
}

void run_with_epilogue(const Program& p) {
  View acc = row_values(p, p.acc_dtype, nullptr);  // the reduced values' layout
  if (p.reduce_op == RVL_REDUCE_LOGSUMEXP && reduced_innermost(p) && !any_half(p)) {
    // Its output view is never written (run_logsumexp_fused stores nothing through it).
    const Program q = reduction_part(p, acc);
    std::vector<rvl_instruction> code;
    const Program e = epilogue_part(p, code, nullptr);
    const Evaluator main(q), epi(e);
    if (main.run_logsumexp_fused(epi)) return;
  }
  if (p.inputs.size() >= RVL_MAX_INPUTS)
    rvl::fail(RVL_STATUS_UNSUPPORTED, "program: a reduction epilogue with " + std::to_string(p.inputs.size()) +
                                          " inputs (this device needs one input slot free for it)");
  int64_t kept = 1;  // the reduction's outputs
  for (int d = 0; d < p.rank; ++d)
    if (!((p.reduce_axes >> d) & 1u)) kept *= p.shape[d];
  std::vector<uint64_t> scratch(static_cast<size_t>(kept) + 1);  // 8-byte slots fit every dtype
  acc.data = reinterpret_cast<std::byte*>(scratch.data());
  run_kernel(reduction_part(p, acc));
  std::vector<rvl_instruction> code;
  run_kernel(epilogue_part(p, code, &acc));
}

}  // namespace tbbcpu
