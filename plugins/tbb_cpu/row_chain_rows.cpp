// Note [Row chains in registers]
// The fused path of a row chain (Note [Row chains], row_chain.cpp) runs each piece through an
// Evaluator, block by block: a part's values go through a block slot before their fold, and a
// task's rows are swept once per piece from L2. Layer norm at 8192 x 1024 stayed at 0.71-0.8x
// the hand loop that way, and a hand-written AVX-512 row loop inside this plugin (TBB, the same
// buffers) ran it in half the time (1.39 against 2.6 ms, 2026-12-07): the cost was the
// per-element work of the generic path, not memory. When every piece is a register chain
// (Note [Register chains]: one chain of ADD, MUL, NEG, RECIP over runs of the row, single
// values and per-row values) or, for a part, one LOAD of a run, a task here goes row by row,
// in batches of rows that fit L1 (16 KiB of x, at least one row): each piece runs over the
// batch, its row-uniform values computed for the batch at once, before the next piece, so x is
// read from memory once and then from L1. A part's values are summed from the
// registers (Note [Chain sums in registers], register_chain.cpp) and never stored, the
// row-uniform values come from run_row_values (Note [Row values without an evaluator]), and the
// epilogue's chain writes the output row. No Evaluator, block slot or per-block plan: a piece's
// steps are planned once per launch and only their pointers set per row.
// Bits: each value is the chain's (the same IEEE operations in the same order as the chunk
// loop); a part's row is folded in runs of up to 1,024 elements in chain_sum.hpp's order, as the
// block path folds a row of up to 1,024 elements, or a longer row's 1,024-element blocks.
// Taken when: the reduced axis is the last of two, every part a SUM with an f32 result, every
// value f32, the row a multiple of kChainGroup long, the inputs dense along the row (or one value
// per row), the output dense along the row; anything else keeps the block path.
// RAVEL_TBB_NO_ROW_REGISTERS=1 turns it off (measurements, tests).
#include "row_chain_rows.hpp"

#include "array_ops.hpp"
#include "chain_sum.hpp"
#include "fused_loop.hpp"
#include "parallel.hpp"
#include "register_chain.hpp"
#include "row_values.hpp"
#include "tuning_env.hpp"

#include <ravel/op_table.hpp>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>

namespace tbbcpu {
namespace {

constexpr int64_t kFoldRun = 1024;      // elements per folded run (the Note)
constexpr int64_t kBatchBytes = 16384;  // x per batch of rows (the Note)

// Where an operand's values are for row r: Run: p + r * rstride (the row's first element);
// One: p[r * rstride] (rstride 0: a constant); Prev: the previous step's value.
struct Source {
  ChainOperand::Kind kind;
  const float* p;
  int64_t rstride;
};

struct StepPlan {
  int32_t op;
  Source a, b;
};

struct PiecePlan {
  std::vector<StepPlan> steps;  // empty: the piece is one LOAD (load, a Run)
  Source load{ChainOperand::Run, nullptr, 0};
  std::vector<float> consts;    // CONST values the steps point at (reserved, never reallocated)
};

bool bits_f32(int32_t dt) { return dt == RVL_DTYPE_F32; }

// The row-wise source of LOAD/CONST instruction I, or false.
bool leaf_source(const Program& p, const RowsPlan& plan, const rvl_instruction& I, PiecePlan& pp, Source* s) {
  if (!bits_f32(I.dtype)) return false;
  if (I.op == RVL_OP_CONST) {
    pp.consts.push_back(static_cast<float>(I.value.f));
    *s = {ChainOperand::One, &pp.consts.back(), 0};
    return true;
  }
  if (I.op != RVL_OP_LOAD || I.arg < 0) return false;
  if (I.arg >= plan.base) {
    const size_t k = static_cast<size_t>(I.arg - plan.base);
    if (k >= plan.row_arrays.size() || !bits_f32(plan.row_dtypes[k])) return false;
    *s = {ChainOperand::One, reinterpret_cast<const float*>(plan.row_arrays[k]), 1};
    return true;
  }
  const View& v = p.inputs[static_cast<size_t>(I.arg)];
  if (!bits_f32(v.dtype) || v.empty) return false;
  for (int d = 0; d < 2; ++d)
    if (v.lo[d] != 0 || v.hi[d] != p.shape[d]) return false;
  const float* base = reinterpret_cast<const float*>(v.data) + v.offset;
  if (v.stride[1] == 1) *s = {ChainOperand::Run, base, v.stride[0]};
  else if (v.stride[1] == 0) *s = {ChainOperand::One, base, v.stride[0]};
  else return false;
  return true;
}

// Plans `code` as a register chain (or, for a part, one LOAD of a run); false if it is not one.
bool plan_piece(const Program& p, const RowsPlan& plan, const std::vector<rvl_instruction>& code, bool part,
                PiecePlan& pp) {
  const auto n = static_cast<int32_t>(code.size());
  if (n < 1 || n > kFusedMaxIns) return false;
  pp.consts.reserve(static_cast<size_t>(n));
  std::vector<Source> leaf(static_cast<size_t>(n));
  std::vector<int32_t> step_of(static_cast<size_t>(n), -1);
  for (int32_t j = 0; j < n; ++j) {
    const rvl_instruction& I = code[static_cast<size_t>(j)];
    if (I.op == RVL_OP_LOAD || I.op == RVL_OP_CONST) {
      if (!leaf_source(p, plan, I, pp, &leaf[static_cast<size_t>(j)])) return false;
      continue;
    }
    if (!bits_f32(I.dtype) || !chain_op(I.op)) return false;
    const int arity = rvl::op_info(I.op).arity;
    StepPlan st{I.op, {}, {}};
    Source* ops[2] = {&st.a, &st.b};
    bool reads_prev = false;
    for (int k = 0; k < 2; ++k) {
      const int32_t q = I.src[k < arity ? k : 0];
      if (q < 0 || q >= j) return false;
      if (step_of[static_cast<size_t>(q)] >= 0) {
        // only the previous step's value (Note [Register chains])
        if (step_of[static_cast<size_t>(q)] != static_cast<int32_t>(pp.steps.size()) - 1) return false;
        *ops[k] = {ChainOperand::Prev, nullptr, 0};
        reads_prev = true;
      } else {
        *ops[k] = leaf[static_cast<size_t>(q)];
      }
    }
    if (pp.steps.empty() == reads_prev) return false;  // the first reads no step, the others the last
    step_of[static_cast<size_t>(j)] = static_cast<int32_t>(pp.steps.size());
    pp.steps.push_back(st);
  }
  if (step_of[static_cast<size_t>(n - 1)] >= 0) return true;  // the last instruction is the chain's end
  // One LOAD of a run, summed as it is (a part only).
  if (!part || n != 1 || leaf[0].kind != ChainOperand::Run) return false;
  pp.load = leaf[0];
  return true;
}

// A run's sum in chain_sum.hpp's order; the AVX2 clone where row_chain.cpp's fold uses it (the
// same bits: the order does not depend on the vector width).
float sum_run_portable(float acc, const float* v, int64_t n) { return sum_wide_lanes<float>(acc, v, n); }
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) float sum_run_avx2(float acc, const float* v, int64_t n) {
  return sum_wide_lanes<float>(acc, v, n);
}
#endif
float sum_run(float acc, const float* v, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (simd_avx2()) return sum_run_avx2(acc, v, n);
#endif
  return sum_run_portable(acc, v, n);
}

ChainOperand at_row(const Source& s, int64_t r, int64_t j) {
  switch (s.kind) {
    case ChainOperand::Run: return {ChainOperand::Run, s.p + r * s.rstride + j, 0};
    case ChainOperand::One: return {ChainOperand::One, s.p + r * s.rstride, 0};
    default: return {ChainOperand::Prev, nullptr, 0};
  }
}

}  // namespace

bool run_rows_in_registers(const Program& p, const RowsPlan& plan) {
  static const bool off = tuning_int("RAVEL_TBB_NO_ROW_REGISTERS", 0, 0, 1) == 1;
  if (off || !register_chain_enabled() || p.rank != 2 || p.reduce_axes != 2u) return false;
  const int64_t R = plan.R, rows = plan.rows;
  if (R < kChainGroup || R % kChainGroup != 0 || plan.pieces.empty() || plan.pieces.back().acc) return false;
  for (int32_t dt : plan.part_dtypes)  // a part's results are stored as floats
    if (!bits_f32(dt)) return false;
  const View& out = p.out;
  if (!bits_f32(out.dtype) || out.stride[1] != 1 || out.lo[0] != 0 || out.lo[1] != 0 || out.hi[0] != rows ||
      out.hi[1] != R)
    return false;
  std::vector<PiecePlan> pp(plan.pieces.size());
  int64_t work = 0;
  for (size_t i = 0; i < plan.pieces.size(); ++i) {
    const RowsPiece& pc = plan.pieces[i];
    if (!plan_piece(p, plan, *pc.code, pc.acc != nullptr, pp[i])) return false;
    for (const auto* v : pc.values)
      if (!row_values_fit(v->data(), static_cast<int32_t>(v->size()), plan.part_dtypes.data(),
                          static_cast<int32_t>(plan.part_dtypes.size())))
        return false;
    work += rows * R * static_cast<int64_t>(pc.code->size());
  }
  float* const y = reinterpret_cast<float*>(out.data) + out.offset;
  const int tier = simd_tier();
  // Rows per batch: every piece runs over a batch before the next, its row values computed for
  // the batch at once; a batch's x (at most kBatchBytes, at least a row) stays in L1.
  const int64_t batch = std::max<int64_t>(1, kBatchBytes / (R * static_cast<int64_t>(sizeof(float))));
  auto body = [&](int64_t r0, int64_t r1) {
    ChainStep st[kFusedMaxIns];
    for (int64_t b0 = r0; b0 < r1; b0 += batch)
      for (size_t i = 0; i < plan.pieces.size(); ++i) {
        const int64_t b1 = std::min(r1, b0 + batch);
        const RowsPiece& pc = plan.pieces[i];
        for (size_t v = 0; v < pc.values.size(); ++v)
          run_row_values(pc.values[v]->data(), static_cast<int32_t>(pc.values[v]->size()), plan.part_data.data(),
                         pc.value_out[v], b0, b1);
        const PiecePlan& q = pp[i];
        const auto n_steps = static_cast<int32_t>(q.steps.size());
        for (int64_t r = b0; r < b1; ++r) {
        auto set_steps = [&](int64_t j) {
          for (int32_t k = 0; k < n_steps; ++k)
            st[k] = {q.steps[k].op, at_row(q.steps[k].a, r, j), at_row(q.steps[k].b, r, j)};
        };
          if (!pc.acc) {  // the epilogue: the output row
            set_steps(0);
            run_register_chain(tier, st, n_steps, y + r * out.stride[0], R, 0);
            continue;
          }
          float acc = 0.0f;
          for (int64_t j = 0; j < R; j += kFoldRun) {
            const int64_t len = std::min(kFoldRun, R - j);
            if (n_steps == 0) {
              acc = sum_run(acc, q.load.p + r * q.load.rstride + j, len);
            } else {
              set_steps(j);
              acc = run_register_chain_sum(tier, st, n_steps, len, acc);
            }
          }
          pc.acc[r] = acc;
        }
      }
  };
  if (run_inline(work) || rows <= plan.per) {
    body(0, rows);
  } else {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, plan.per),
                      [&](const tbb::blocked_range<int64_t>& rr) { body(rr.begin(), rr.end()); });
  }
  return true;
}

}  // namespace tbbcpu
