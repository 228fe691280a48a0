// ABI 1.11: chains of row reductions (rvl_program.stages; docs/abi.md §19).
//
// Note [Row chains]
// Layer norm is mean = sum(x)/n, var = sum((x - mean)^2)/n, y = (x - mean) * rstd * g + b: the
// second reduction reads the first one's value broadcast over the row and the epilogue reads
// both. As separate kernels x is read from memory three times; as one program (stages[0] the
// sum, the program's own reduction the sum of squares, then the epilogue) it can be read once:
//  - The fused path (run_fused): when the reduced axes are innermost (row o is the linear range
//    [o R, (o + 1) R)), every value is f32 or f64 and each reduction is SUM, MAX, PROD or a
//    non-widening LOGSUMEXP, each thread takes a block of rows small enough to stay in L2 and
//    runs over it, in order, every stage, the program's reduction and the epilogue. Each part
//    is an elementwise Evaluator over the same space (its ACCs rewritten into LOADs of the
//    per-row values, which Note [Row-invariant loads]'s one-value-per-row path fills without
//    segments), evaluated block by block and folded per row (chain_sum.hpp's wide lanes for
//    SUM, fold.hpp's vector lanes for MAX and PROD, or
//    Note [Online log-sum-exp]'s state for LOGSUMEXP). Only the first part's sweep misses cache.
//    What in a piece depends on the row alone (layer norm's mean and rsqrt) is computed once per
//    row before its sweep (Note [Row-uniform hoisting], row_uniform.hpp), and a block inside one
//    row reads per-row and row-invariant inputs without segments (evaluator.cpp).
//    When every piece is a register chain and every part a SUM in f32 over rows a multiple of 64
//    long, the rows run one by one with no Evaluator instead (Note [Row chains in registers],
//    row_chain_rows.cpp): everything above is planned, then handed to it.
//  - Every other case (halves, integers, reduced axes outer or interleaved, an empty space, a
//    tiled part) runs as passes (run_passes): each reduction a whole kernel into a scratch
//    buffer of its acc_dtype, read by the later ones as a broadcast LOAD, then the epilogue.
//    Correct everywhere; as fast as the kernels the host would send otherwise.
// ACC k names stages[k - 1] for k >= 1 and the program's own reduction for k = 0; the per-row
// values of part k live in one buffer per part (8-byte slots), in the kept axes' row-major order.
#include "evaluator.hpp"
#include "array_ops.hpp"
#include "chain_sum.hpp"
#include "fold.hpp"
#include "fused_loop.hpp"
#include "kernel.hpp"
#include "parallel.hpp"
#include "register_chain.hpp"
#include "row_chain_rows.hpp"
#include "row_uniform.hpp"
#include "row_values.hpp"
#include "tuning_env.hpp"

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace tbbcpu {
namespace {

// One reduction of the chain: stages in order, then the program's own (ACC index 0).
struct Part {
  const rvl_instruction* ins;
  int32_t n_ins;
  int32_t reduce_op;
  int32_t acc_dtype;
};

std::vector<Part> parts_of(const Program& p) {
  std::vector<Part> parts;
  for (const Program::Stage& s : p.stages) parts.push_back({s.ins, s.n_ins, s.reduce_op, s.acc_dtype});
  const int32_t main_dtype = p.n_epilogue > 0 ? p.acc_dtype : p.out.dtype;
  parts.push_back({p.ins, p.n_ins, p.reduce_op, main_dtype});
  return parts;
}

// Input slot of ACC k once the per-row buffers are appended after the program's inputs: the
// stages' in order, then the program's own.
int32_t acc_slot(int32_t k, int32_t base, int32_t n_stages) { return base + (k == 0 ? n_stages : k - 1); }

std::vector<rvl_instruction> acc_as_loads(const rvl_instruction* ins, int32_t n, int32_t base, int32_t n_stages) {
  std::vector<rvl_instruction> code(ins, ins + n);
  for (rvl_instruction& in : code)
    if (in.op == RVL_OP_ACC) in.op = RVL_OP_LOAD, in.arg = acc_slot(in.arg, base, n_stages);
  return code;
}

// A program over p's space reading p's inputs and then `extra`, running `code`.
Program over_space(const Program& p, const std::vector<View>& extra, const std::vector<rvl_instruction>& code,
                   int32_t reduce_op, const View& out) {
  Program q;
  q.rank = p.rank;
  std::copy(p.shape, p.shape + p.rank, q.shape);
  q.inputs = p.inputs;
  q.inputs.insert(q.inputs.end(), extra.begin(), extra.end());
  q.ins = code.data();
  q.n_ins = static_cast<int32_t>(code.size());
  q.reduce_op = reduce_op;
  q.reduce_axes = reduce_op == RVL_REDUCE_NONE ? 0u : p.reduce_axes;
  q.out = out;
  return q;
}

struct RowBuffers {
  std::vector<std::vector<uint64_t>> slots;  // per part, one 8-byte slot per row
  std::vector<View> views;                   // in acc_slot order
};

RowBuffers make_row_buffers(const Program& p, const std::vector<Part>& parts, int64_t rows) {
  RowBuffers b;
  b.slots.resize(parts.size());
  for (size_t k = 0; k < parts.size(); ++k) {
    b.slots[k].resize(static_cast<size_t>(rows) + 1);
    b.views.push_back(row_values(p, parts[k].acc_dtype, reinterpret_cast<std::byte*>(b.slots[k].data())));
  }
  return b;
}

int64_t row_count(const Program& p, int64_t* reduced) {
  int64_t rows = 1, r = 1;
  for (int d = 0; d < p.rank; ++d) ((p.reduce_axes >> d) & 1u ? r : rows) *= p.shape[d];
  *reduced = r;
  return rows;
}

void run_passes(const Program& p) {
  const std::vector<Part> parts = parts_of(p);
  const int32_t base = static_cast<int32_t>(p.inputs.size());
  const int32_t n_stages = static_cast<int32_t>(p.stages.size());
  if (p.inputs.size() + parts.size() > RVL_MAX_INPUTS)
    rvl::fail(RVL_STATUS_UNSUPPORTED, "program: a chain of " + std::to_string(parts.size()) + " reductions with " +
                                          std::to_string(p.inputs.size()) + " inputs (this device needs an input slot "
                                          "free for each reduction's values)");
  int64_t reduced = 0;
  RowBuffers b = make_row_buffers(p, parts, row_count(p, &reduced));
  for (size_t k = 0; k < parts.size(); ++k) {
    const Part& part = parts[k];
    const bool final_store = k + 1 == parts.size() && p.n_epilogue == 0;
    const std::vector<rvl_instruction> code = acc_as_loads(part.ins, part.n_ins, base, n_stages);
    run_kernel(over_space(p, b.views, code, part.reduce_op, final_store ? p.out : b.views[k]));
  }
  if (p.n_epilogue == 0) return;
  const std::vector<rvl_instruction> code = acc_as_loads(p.epilogue, p.n_epilogue, base, n_stages);
  run_kernel(over_space(p, b.views, code, RVL_REDUCE_NONE, p.out));
}

// ---- the fused path ------------------------------------------------------------------------

bool float_dtype(int32_t dt) { return dt == RVL_DTYPE_F32 || dt == RVL_DTYPE_F64; }

bool fusable(const Program& p, const std::vector<Part>& parts) {
  if (!reduced_innermost(p) || !float_dtype(p.out.dtype)) return false;
  for (const View& v : p.inputs)
    if (rvl::dtype_is_half(v.dtype)) return false;
  for (const Part& part : parts) {
    if (!float_dtype(part.acc_dtype) || part.ins[part.n_ins - 1].dtype != part.acc_dtype) return false;
    for (int32_t j = 0; j < part.n_ins; ++j)
      if (rvl::dtype_is_half(part.ins[j].dtype)) return false;
  }
  for (int32_t j = 0; j < p.n_epilogue; ++j)
    if (rvl::dtype_is_half(p.epilogue[j].dtype)) return false;
  return true;
}

// Folds the values of linear elements [s, e) (rows R long) into the rows' accumulators.
template <class T>
__attribute__((always_inline)) inline void fold_rows_body(int32_t op, T* acc, LseRow* lse, const T* v, int64_t s,
                                                          int64_t e, int64_t R) {
  constexpr int DT = std::is_same_v<T, float> ? RVL_DTYPE_F32 : RVL_DTYPE_F64;
  for (int64_t pos = s; pos < e;) {
    const int64_t row = pos / R, end = std::min(e, (row + 1) * R), n = end - pos;
    const T* x = v + (pos - s);
    switch (op) {
      case RVL_REDUCE_SUM: acc[row] = sum_wide_lanes<T>(acc[row], x, n); break;  // Note [Wide lanes for chain sums]
      case RVL_REDUCE_MAX: acc[row] = fold<DT, RVL_REDUCE_MAX>(acc[row], x, n); break;
      case RVL_REDUCE_PROD: acc[row] = fold<DT, RVL_REDUCE_PROD>(acc[row], x, n); break;
      default: lse_row_fold<T>(lse[row], x, n); break;
    }
    pos = end;
  }
}

// The lanes' order does not depend on the vector width (fold.hpp, chain_sum.hpp), so both clones
// give the same bits; AVX2 only where array_ops.cpp's loops use it (simd_avx2).
template <class T>
void fold_rows_portable(int32_t op, T* acc, LseRow* lse, const T* v, int64_t s, int64_t e, int64_t R) {
  fold_rows_body<T>(op, acc, lse, v, s, e, R);
}
#if defined(__x86_64__) || defined(__i386__)
template <class T>
__attribute__((target("avx2"))) void fold_rows_avx2(int32_t op, T* acc, LseRow* lse, const T* v, int64_t s,
                                                    int64_t e, int64_t R) {
  fold_rows_body<T>(op, acc, lse, v, s, e, R);
}
#endif
template <class T>
void fold_rows(int32_t op, T* acc, LseRow* lse, const T* v, int64_t s, int64_t e, int64_t R) {
#if defined(__x86_64__) || defined(__i386__)
  if (simd_avx2()) return fold_rows_avx2<T>(op, acc, lse, v, s, e, R);
#endif
  fold_rows_portable<T>(op, acc, lse, v, s, e, R);
}

// fn(s, e) over [r0 R, r1 R) in pieces of at most blk elements: whole rows when a row fits (the
// one-value-per-row loads need a block to start a row), else slices of one row.
template <class Fn>
void chunks(int64_t r0, int64_t r1, int64_t R, int64_t blk, const Fn& fn) {
  if (R <= blk) {
    const int64_t per = blk / R;
    for (int64_t r = r0; r < r1; r += per) fn(r * R, std::min(r1, r + per) * R);
    return;
  }
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < R; j += blk) fn(r * R + j, r * R + std::min(R, j + blk));
}

// Rows per task: the block's x stays in L2 between the parts' sweeps (docs/performance.md,
// "Row chains"), and there are a few tasks per thread.
int64_t rows_per_task(int64_t rows, int64_t R, int64_t elem_bytes) {
  // RAVEL_TBB_CHAIN_BYTES overrides the budget (measurements: docs/performance.md).
  static const int64_t budget = tuning_int("RAVEL_TBB_CHAIN_BYTES", 128 * 1024, 1, int64_t{1} << 40);
  int64_t per = std::max<int64_t>(1, budget / std::max<int64_t>(1, R * elem_bytes));
  const int64_t threads = std::max(1, tbb::this_task_arena::max_concurrency());
  per = std::min(per, std::max<int64_t>(1, rows / (4 * threads)));
  return per;
}

// Note [Several rows per block]
// Rows of 1,024 elements or fewer (layer norm at 8192 x 1024) were one block, so one evaluator
// call, one fold and one set of per-block costs per row and part. A part that runs as a fused
// loop (Note [Fused loops]) or is one LOAD (read in place) uses no scratch slot per instruction,
// so its blocks can be longer: 4,096 elements, several whole rows per evaluator call (the fused
// loop still runs row by row: Note [Fused loops in the evaluator]). Each row is still folded as
// one run, as before, so no value changes; longer rows keep their 1,024-element runs (a row's
// sum is the sum of its runs: longer runs would change its bits). Folding two rows in lockstep
// (independent add chains, the same bits per row) was tried and was slower here (4.7-6.5 ms
// against 3.1-3.3 ms at 8192 x 1024, with GCC's lanes as arrays or as vector types).
// Rows longer than 1,024 elements: the epilogue (whose values are not folded, so the runs'
// lengths change no bits) takes 4,096-element slices of a row, a quarter of the calls.
int64_t first_block(const std::vector<rvl_instruction>& code, int64_t rows, int64_t R, bool folded) {
  if ((R > 1024 && folded) || rows * R < fused_loop_min_elements()) return 0;
  const auto n = static_cast<int32_t>(code.size());
  const bool one_load = n == 1 && code[0].op == RVL_OP_LOAD;
  return one_load || (fused_loop_enabled() && fused_loop_fits(code.data(), n)) ? 4096 : 0;
}

// A dense 1-d view over the rows of a per-row buffer (the row-uniform programs' space).
View rows_1d(const View& full, int64_t rows) {
  View v;
  v.data = full.data;
  v.dtype = full.dtype;
  v.stride[0] = 1;
  v.hi[0] = rows;
  return v;
}

bool run_fused(const Program& p) {
  const std::vector<Part> parts = parts_of(p);
  if (!fusable(p, parts)) return false;
  if (p.inputs.size() + parts.size() > RVL_MAX_INPUTS) return false;
  int64_t R = 0;
  const int64_t rows = row_count(p, &R);
  // One row (every axis reduced): the per-row values are views with stride 0 everywhere, which
  // an Evaluator whose space stays of rank >= 2 (a permuted or flipped input that does not
  // collapse) takes for row-invariant loads and copies when its scratch is made, before the
  // stages have computed them (x.var() of a permuted tensor read its mean as 0). The passes make
  // each reduction's evaluator after the previous one ran, and split the one row across threads.
  if (rows <= 1 || R == 0) return false;
  const int32_t base = static_cast<int32_t>(p.inputs.size());
  const int32_t n_stages = static_cast<int32_t>(p.stages.size());
  const int32_t row_hi = base + static_cast<int32_t>(parts.size());
  RowBuffers b = make_row_buffers(p, parts, rows);
  const bool epilogue = p.n_epilogue > 0;

  // Each piece (the parts, then the epilogue) with its row-uniform values hoisted (Note
  // [Row-uniform hoisting]); without room for their input slots, none is.
  std::vector<std::vector<rvl_instruction>> raw;
  for (const Part& part : parts) raw.push_back(acc_as_loads(part.ins, part.n_ins, base, n_stages));
  if (epilogue) raw.push_back(acc_as_loads(p.epilogue, p.n_epilogue, base, n_stages));
  std::vector<RowUniform> pieces;
  int32_t next = row_hi;
  for (const auto& c : raw) {
    pieces.push_back(hoist_row_uniform(c, base, row_hi, next));
    next += static_cast<int32_t>(pieces.back().values.size());
  }
  if (next > RVL_MAX_INPUTS)
    for (size_t i = 0; i < raw.size(); ++i) pieces[i] = RowUniform{raw[i], {}};
  // The hoisted values' buffers, appended to the per-row inputs every piece may read.
  std::vector<View> extra = b.views;
  std::vector<std::vector<uint64_t>> value_slots;
  for (const RowUniform& pc : pieces)
    for (const auto& v : pc.values) {
      value_slots.emplace_back(static_cast<size_t>(rows) + 1);
      extra.push_back(row_values(p, v.back().dtype, reinterpret_cast<std::byte*>(value_slots.back().data())));
    }
  int64_t elem = 4;
  for (const View& v : p.inputs) elem = std::max<int64_t>(elem, rvl::dtype_size(v.dtype));
  const int64_t per = rows_per_task(rows, R, elem);
  if (epilogue && p.rank == 2 && R % kChainGroup == 0 &&
      std::all_of(parts.begin(), parts.end(), [](const Part& q) { return q.reduce_op == RVL_REDUCE_SUM; })) {
    RowsPlan rp;  // Note [Row chains in registers]
    rp.base = base, rp.rows = rows, rp.R = R, rp.per = per;
    for (const View& v : extra) rp.row_arrays.push_back(v.data), rp.row_dtypes.push_back(v.dtype);
    for (size_t k = 0; k < parts.size(); ++k) {
      rp.part_data.push_back(reinterpret_cast<const std::byte*>(b.slots[k].data()));
      rp.part_dtypes.push_back(parts[k].acc_dtype);
    }
    size_t value = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      RowsPiece pc{&pieces[i].code, i < parts.size() ? reinterpret_cast<float*>(b.slots[i].data()) : nullptr, {}, {}};
      for (const auto& v : pieces[i].values) pc.values.push_back(&v), pc.value_out.push_back(extra[b.views.size() + value++].data);
      rp.pieces.push_back(std::move(pc));
    }
    if (run_rows_in_registers(p, rp)) return true;
  }
  std::vector<View> part_rows;  // the parts' values over the rows, for the value programs
  for (int32_t k = 0; k < static_cast<int32_t>(parts.size()); ++k) part_rows.push_back(rows_1d(b.views[k], rows));

  // Evaluators: per piece its values' programs over the rows, then the piece over the space
  // (the parts' values are never stored: a null output; the epilogue writes p.out).
  struct Piece {
    size_t first_value, n_values, ev;
  };
  std::vector<Piece> plan;
  std::vector<std::unique_ptr<Evaluator>> evs;  // null: a value computed by run_row_values
  std::vector<const std::vector<rvl_instruction>*> value_code;  // per entry of evs
  std::vector<std::byte*> value_out;
  std::vector<const std::byte*> part_data;
  std::vector<int32_t> part_dtype;
  for (size_t k = 0; k < parts.size(); ++k) {
    part_data.push_back(reinterpret_cast<const std::byte*>(b.slots[k].data()));
    part_dtype.push_back(parts[k].acc_dtype);
  }
  int64_t work = 0;
  size_t value = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    Piece pc{evs.size(), pieces[i].values.size(), 0};
    for (const auto& v : pieces[i].values) {
      value_code.push_back(&v);
      value_out.push_back(extra[b.views.size() + value].data);
      if (row_values_fit(v.data(), static_cast<int32_t>(v.size()), part_dtype.data(),
                         static_cast<int32_t>(part_dtype.size()))) {  // Note [Row values without an evaluator]
        ++value;
        evs.push_back(nullptr);
        work += rows * static_cast<int64_t>(v.size());
        continue;
      }
      Program q;
      q.rank = 1;
      q.shape[0] = rows;
      q.inputs = part_rows;
      q.ins = v.data();
      q.n_ins = static_cast<int32_t>(v.size());
      q.out = rows_1d(extra[b.views.size() + value++], rows);
      evs.push_back(std::make_unique<Evaluator>(q, Evaluator::Order::Linear));
      work += rows * q.n_ins;
    }
    View out = p.out;
    if (i < parts.size()) {
      out = row_values(p, parts[i].acc_dtype, nullptr);
      int64_t st = 1;
      for (int d = p.rank - 1; d >= 0; --d) out.stride[d] = st, st *= p.shape[d];
    }
    pc.ev = evs.size();
    value_code.push_back(nullptr), value_out.push_back(nullptr);
    // Linear: fold_rows reads the parts' values row by row.
    evs.push_back(std::make_unique<Evaluator>(over_space(p, extra, pieces[i].code, RVL_REDUCE_NONE, out),
                                              Evaluator::Order::Linear, first_block(pieces[i].code, rows, R, i < parts.size())));
    work += rows * R * static_cast<int64_t>(pieces[i].code.size());
    plan.push_back(pc);
  }
  for (const auto& ev : evs)
    if (ev && ev->tiled()) return false;

  const int64_t tasks = (rows + per - 1) / per;
  auto body = [&](int64_t t0, int64_t t1, std::vector<Scratch>& sc, std::vector<LseRow>& lse) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t * per, r1 = std::min(rows, r0 + per);
      for (size_t i = 0; i < plan.size(); ++i) {
        // The row-uniform values this piece reads, for rows [r0, r1).
        for (size_t v = plan[i].first_value; v < plan[i].first_value + plan[i].n_values; ++v) {
          if (!evs[v]) {
            const std::vector<rvl_instruction>& c = *value_code[v];
            run_row_values(c.data(), static_cast<int32_t>(c.size()), part_data.data(), value_out[v], r0, r1);
            continue;
          }
          const Evaluator& ve = *evs[v];
          for (int64_t s = r0; s < r1; s += ve.block()) {
            const int64_t e = std::min(r1, s + ve.block());
            ve.store(s, e, ve.eval(s, e, sc[v], nullptr), sc[v]);
          }
        }
        const Evaluator& ev = *evs[plan[i].ev];
        Scratch& es = sc[plan[i].ev];
        if (i == parts.size()) {  // the epilogue
          chunks(r0, r1, R, ev.block(), [&](int64_t s, int64_t e) { ev.store(s, e, ev.eval(s, e, es, nullptr), es); });
          continue;
        }
        const Part& part = parts[i];
        const bool lse_op = part.reduce_op == RVL_REDUCE_LOGSUMEXP;
        if (lse_op) lse.assign(static_cast<size_t>(r1 - r0), LseRow{-std::numeric_limits<double>::infinity(), 0.0});
        auto run = [&](auto* acc) {
          using T = std::remove_pointer_t<decltype(acc)>;
          if (!lse_op)
            for (int64_t r = r0; r < r1; ++r)
              acc[r] = part.reduce_op == RVL_REDUCE_SUM ? T(0) : part.reduce_op == RVL_REDUCE_PROD ? T(1)
                                                                    : -std::numeric_limits<T>::infinity();
          chunks(r0, r1, R, ev.block(), [&](int64_t s, int64_t e) {
            const T* v = static_cast<const T*>(ev.eval(s, e, es, nullptr));
            // Relative to the task's first row, so lse is indexed from 0 and acc from r0.
            fold_rows<T>(part.reduce_op, acc + r0, lse.data(), v, s - r0 * R, e - r0 * R, R);
          });
          if (lse_op)
            for (int64_t r = r0; r < r1; ++r) acc[r] = lse_row_result<T>(lse[static_cast<size_t>(r - r0)]);
        };
        if (part.acc_dtype == RVL_DTYPE_F32) run(reinterpret_cast<float*>(b.slots[i].data()));
        else run(reinterpret_cast<double*>(b.slots[i].data()));
      }
    }
  };
  auto scratches = [&] {
    std::vector<Scratch> sc;
    for (const auto& ev : evs) sc.push_back(ev ? ev->make_scratch() : Scratch{});
    return sc;
  };
  if (tasks <= 1 || run_inline(work)) {
    std::vector<Scratch> sc = scratches();
    std::vector<LseRow> lse;
    body(0, tasks, sc, lse);
  } else {
    tbb::enumerable_thread_specific<std::vector<Scratch>> sc(scratches);
    tbb::enumerable_thread_specific<std::vector<LseRow>> lse;
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, tasks, 1), [&](const tbb::blocked_range<int64_t>& r) {
      body(r.begin(), r.end(), sc.local(), lse.local());
    });
  }
  if (epilogue) return true;
  // No epilogue: the last part's values are the output, stored through its (reduced) view by a
  // copy over the kept axes (the reduced ones of extent 1).
  Program store;
  store.rank = p.rank;
  store.inputs = {b.views.back()};
  store.out = p.out;
  for (int d = 0; d < p.rank; ++d) {
    const bool red = (p.reduce_axes >> d) & 1u;
    store.shape[d] = red ? 1 : p.shape[d];
    if (red) store.inputs[0].hi[d] = 1, store.out.hi[d] = 1;
  }
  const rvl_instruction load = {RVL_OP_LOAD, p.out.dtype, {-1, -1, -1}, 0, {0}};
  store.ins = &load;
  store.n_ins = 1;
  run_kernel(store);
  return true;
}

}  // namespace

void run_chain(const Program& p) {
  if (!run_fused(p)) run_passes(p);
}

}  // namespace tbbcpu
