// Note [Fused loops]
// The block evaluator (evaluator.cpp) runs a program one instruction at a time over a block of
// 512-1024 elements: each instruction is one pass that reads its sources from L1 scratch slots
// (or an input) and writes its own slot. For `exp(a) * b + c` that is four passes per block, and
// the inputs arrive in bursts, one stream per pass; for layer norm's epilogue six. Against a
// hand-written loop that does everything per vector register (docs/performance.md, "The
// evaluator against the limit": 0.81x on `exp(a)*b+c`, 0.49-0.86x on layer norm) the
// difference is those passes.
//
// Here a program whose values are all f32 runs chunk by chunk: for each chunk of 32-128
// elements every computed instruction runs over the chunk (an inlined fixed-length loop of the
// tier's vectors), reading the inputs straight from memory at the chunk and earlier results from
// chunk registers (a chunk of floats each, on the stack, so always in L1); the last instruction
// writes the output (or the caller's block slot) directly. So every input is read as one stream
// and no block slot is written or read for the intermediate values. Instructions that depend on
// single values only (CONSTs, a row's mean and rstd: Note [One value per block]) are computed
// once per block and spread over one chunk register, which the chunk loops read.
//
// Bits: each element goes through the same element function as the array loop of its
// instruction (array_scalar.hpp), compiled with -ffp-contract=off like array_ops.cpp, so every
// tier and the block evaluator give the same bits (tests: tbb_array_tiers, suite fused_loops).
// A single value is computed by that same function once instead of once per element, which is
// the same value.
//
// The dispatch is a switch per instruction per chunk: with 64 elements it is paid once per four
// AVX-512 vectors, a few cycles against the chunk's work, and well predicted (the same sequence
// every chunk). The caller picks the chunk (32, 64 or 128 elements): measured, a plain
// elementwise kernel streaming from memory (`exp(a)*b+c` 16M) ran fastest with 32 (9.5-9.9 ms
// against 11.0 with 64 and 11.6 with 128), a row chain's sweeps over rows in L2 (layer norm)
// with 128 (2.96-3.0 ms at 8192 x 1024 against 3.5 with 64 and 3.9 with 32):
// docs/performance.md ("One loop per program").
//
// Note [Per-row operands in fused loops]
// A row chain's block of several short rows (layer norm at 8192 x 1024: four rows per block)
// was run one row per call, because the row's mean and rstd are single values that differ per
// row: the call's plan (the steps, the spread chunk registers) was made again for every row and
// part, 13-15% of the chain (perf, 2026-12-07). When the rows are a multiple of the chunk long,
// no chunk straddles two rows, so one call runs the block: such a value is a `rows` leaf, and
// the step reading it takes the row's value as a scalar operand for the chunk (chunk_body_scalar:
// the same element function with one operand held in a register, so the same bits). A value
// computed from single values alone with a per-row one among them would be per-row itself and is
// not planned here: the call returns false and the caller goes row by row (row_uniform.hpp hoists
// such values out of a chain's lists, so it does not happen there).
#include "fused_loop.hpp"

#include "array_ops.hpp"
#include "array_scalar.hpp"
#include "half_chunk.hpp"
#include "register_chain.hpp"
#include "tuning_env.hpp"

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tbbcpu {
namespace {

using array_detail::scalar;
using array_detail::supported;
constexpr int kF = RVL_DTYPE_F32;
constexpr int64_t kMaxChunk = 128;

// The ops a fused loop runs: the f32 rows of the op table with a result of their sources' dtype.
#define RVL_FUSED_OPS(X) X(NEG) X(RECIP) X(SQRT) X(EXP2) X(LOG2) X(SIN) X(TRUNC) X(ADD) X(MUL) X(MAX) X(MOD) X(IDIV)
#define RVL_FUSED_CHECK_(name)                                                                      \
  static_assert(supported(RVL_OP_##name, kF) && rvl::op_info(RVL_OP_##name).result == rvl::OpResult::Same && \
                rvl::op_info(RVL_OP_##name).arity <= 2);
RVL_FUSED_OPS(RVL_FUSED_CHECK_)

bool fused_op(int32_t op) {
  switch (op) {
#define RVL_FUSED_CASE_(name) case RVL_OP_##name:
    RVL_FUSED_OPS(RVL_FUSED_CASE_)
    return true;
#undef RVL_FUSED_CASE_
    default: return false;
  }
}

// d[i] = op(a[i], b[i]), the array loop's element function (b unused for one source, which the
// array loop passes as T{}).
template <int OP>
[[gnu::always_inline]] inline void chunk_body(float* __restrict d, const float* __restrict a,
                                              const float* __restrict b, int64_t n) {
  if constexpr (rvl::op_info(OP).arity == 1) {
    (void)b;
    for (int64_t i = 0; i < n; ++i) d[i] = scalar<OP, kF>(a[i], 0.0f);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = scalar<OP, kF>(a[i], b[i]);
  }
}

// d[i] = op(a, b[i]) (K == 1) or op(a[i], b) (K == 2): one source a per-row value, held in a
// register (Note [Per-row operands in fused loops]). Binary ops only (a unary op of a per-row
// value is itself per-row, which run_fused_loop does not run).
template <int OP, int K>
[[gnu::always_inline]] inline void chunk_body_scalar(float* __restrict d, const float* __restrict a,
                                                     const float* __restrict b, int64_t n) {
  if constexpr (rvl::op_info(OP).arity == 2) {
    if constexpr (K == 1) {
      const float av = *a;
      for (int64_t i = 0; i < n; ++i) d[i] = scalar<OP, kF>(av, b[i]);
    } else {
      const float bv = *b;
      for (int64_t i = 0; i < n; ++i) d[i] = scalar<OP, kF>(a[i], bv);
    }
  } else {
    (void)d, (void)a, (void)b, (void)n;
  }
}

// n == C is the loop the compiler unrolls over the tier's vectors; the rest is the tail. K: which
// source is a single per-row value (0: none).
template <int64_t C, int K = 0>
[[gnu::always_inline]] inline void apply(int32_t op, float* d, const float* a, const float* b, int64_t n) {
  switch (op) {
#define RVL_FUSED_APPLY_(name)                                                 \
  case RVL_OP_##name:                                                          \
    if constexpr (K == 0) {                                                    \
      if (n == C) chunk_body<RVL_OP_##name>(d, a, b, C);                       \
      else chunk_body<RVL_OP_##name>(d, a, b, n);                              \
    } else {                                                                   \
      if (n == C) chunk_body_scalar<RVL_OP_##name, K>(d, a, b, C);             \
      else chunk_body_scalar<RVL_OP_##name, K>(d, a, b, n);                    \
    }                                                                          \
    break;
    RVL_FUSED_OPS(RVL_FUSED_APPLY_)
#undef RVL_FUSED_APPLY_
    default: break;  // fused_loop_fits admits no other op
  }
}

// One computed instruction of the chunk loop: the chunk at offset i0 of a source is a + i0 * as
// (as: 1 for a run of values, 0 for a chunk register), or, when rows says so (1: a, 2: b), the
// source is the per-row value a[(i0 / row_len) * as] (as: the rows' stride).
struct Step {
  int32_t op;
  int32_t rows;
  float* d;
  int64_t ds;
  const float* a;
  int64_t as;
  const float* b;
  int64_t bs;
};

// ROWS: some step reads a per-row value (row_len > 0). A separate loop, so that the plain one
// stays as it was (with the per-row tests in it, `exp(a)*b+c` 16M measured ~6% slower).
// TIER: the clone's SimdTier (the f16 conversions' instructions).
template <int64_t C, bool ROWS, int TIER>
[[gnu::always_inline]] inline void run_steps(const Step* st, int32_t n_steps, int64_t n, int64_t row_len) {
  for (int64_t i0 = 0; i0 < n; i0 += C) {
    const int64_t len = std::min(C, n - i0);
    if constexpr (!ROWS) {
      (void)row_len;
      for (int32_t k = 0; k < n_steps; ++k) {
        const Step& s = st[k];
        if (s.op < 0) convert_step<C, TIER>(s.op, s.d, s.ds, s.a, s.as, i0, len);
        else apply<C>(s.op, s.d + i0 * s.ds, s.a + i0 * s.as, s.b + i0 * s.bs, len);
      }
    } else {
      const int64_t row = i0 / row_len;
      for (int32_t k = 0; k < n_steps; ++k) {
        const Step& s = st[k];
        if (s.op < 0) convert_step<C, TIER>(s.op, s.d, s.ds, s.a, s.as, i0, len);
        else if (s.rows == 0) apply<C>(s.op, s.d + i0 * s.ds, s.a + i0 * s.as, s.b + i0 * s.bs, len);
        else if (s.rows == 1) apply<C, 1>(s.op, s.d + i0 * s.ds, s.a + row * s.as, s.b + i0 * s.bs, len);
        else apply<C, 2>(s.op, s.d + i0 * s.ds, s.a + i0 * s.as, s.b + row * s.bs, len);
      }
    }
  }
}
// The chunk lengths a caller may ask for (fused_loop.hpp).
#define RVL_FUSED_BY_CHUNK_(call, t) \
  switch (chunk) {                   \
    case 32: call(32, t); break;     \
    case 128: call(128, t); break;   \
    default: call(64, t); break;     \
  }
#define RVL_FUSED_RUN_(c, t)                                        \
  if (row_len > 0) run_steps<c, true, t>(st, n_steps, n, row_len); \
  else run_steps<c, false, t>(st, n_steps, n, row_len)
void run_steps_portable(int64_t chunk, const Step* st, int32_t n_steps, int64_t n,
                                                  int64_t row_len) {
  RVL_FUSED_BY_CHUNK_(RVL_FUSED_RUN_, kSimdPortable)
}
#if defined(__x86_64__) || defined(__i386__)
// f16c: the f16 conversion steps (run_fused_loop picks this clone for them only with F16C).
__attribute__((target("avx2,f16c"))) void run_steps_avx2(int64_t chunk, const Step* st, int32_t n_steps, int64_t n,
                                                        int64_t row_len) {
  RVL_FUSED_BY_CHUNK_(RVL_FUSED_RUN_, kSimdAvx2)
}
__attribute__((target(RVL_TBB_AVX512_TARGET))) void run_steps_avx512(int64_t chunk, const Step* st, int32_t n_steps,
                                                                     int64_t n, int64_t row_len) {
  RVL_FUSED_BY_CHUNK_(RVL_FUSED_RUN_, kSimdAvx512)
}
#endif
#undef RVL_FUSED_RUN_
#undef RVL_FUSED_BY_CHUNK_

void apply_one(int32_t op, float* d, const float* a, const float* b) { apply<1>(op, d, a, b, 1); }

// The CAST at ins[j] of a half program (fused_loop_fits): sets `st`'s op and, for a widening
// step, its source (a half input's run) and returns true for a step to run; or, for a single
// value, converts it once (a widened value into one[j]; a rounded output value written over
// out[0, n)) and returns false.
bool plan_conversion(const rvl_instruction* ins, int32_t j, FusedValue* val, float* one, void* out, int64_t n,
                     Step& st) {
  const rvl_instruction& I = ins[j];
  const int32_t a = I.src[0];
  if (I.dtype == kF) {  // widening: exact
    const bool f16 = ins[a].dtype == RVL_DTYPE_F16;
    if (val[a].one) {
      const uint16_t h = *reinterpret_cast<const uint16_t*>(val[a].p);
      one[j] = f16 ? rvl::f32_from_f16_bits(h) : rvl::f32_from_bf16_bits(h);
      val[j] = {&one[j], true, false, 0};
      return false;
    }
    st = Step{f16 ? kWidenF16 : kWidenBf16, 0, nullptr, 0, val[a].p, 1, nullptr, 0};
    return true;
  }
  const bool f16 = I.dtype == RVL_DTYPE_F16;  // narrowing, the last instruction
  if (val[a].one) {
    uint16_t h;
    f16 ? narrow_f16_plain(&h, val[a].p, 1) : narrow_bf16_chunk(&h, val[a].p, 1);
    std::fill(static_cast<uint16_t*>(out), static_cast<uint16_t*>(out) + n, h);
    return false;
  }
  st = Step{f16 ? kNarrowF16 : kNarrowBf16, 0, nullptr, 0, nullptr, 0, nullptr, 0};
  return true;
}

}  // namespace

bool fused_loop_fits(const rvl_instruction* ins, int32_t n_ins, bool halves) {
  if (n_ins < 1 || n_ins > kFusedMaxIns) return false;
  int32_t computed = 0;
  for (int32_t j = 0; j < n_ins; ++j) {
    const rvl_instruction& I = ins[j];
    if (halves && I.op == RVL_OP_LOAD && rvl::dtype_is_half(I.dtype)) continue;
    if (halves && I.op == RVL_OP_CAST && I.src[0] >= 0 && I.src[0] < j) {  // Note [Half programs as one fused loop]
      const rvl_instruction& S = ins[I.src[0]];
      const bool widen = I.dtype == kF && S.op == RVL_OP_LOAD && rvl::dtype_is_half(S.dtype);
      const bool narrow = rvl::dtype_is_half(I.dtype) && S.dtype == kF && j == n_ins - 1;
      if (!widen && !narrow) return false;
      ++computed;
      continue;
    }
    if (I.dtype != kF) return false;
    if (I.op == RVL_OP_LOAD || I.op == RVL_OP_CONST || I.op == RVL_OP_ACC) continue;
    if (!fused_op(I.op)) return false;
    for (int k = 0; k < rvl::op_info(I.op).arity; ++k)
      if (I.src[k] < 0 || I.src[k] >= j || ins[I.src[k]].dtype != kF) return false;
    ++computed;
  }
  const int32_t last = ins[n_ins - 1].op;
  return computed >= 2 && last != RVL_OP_LOAD && last != RVL_OP_CONST && last != RVL_OP_ACC;
}

bool run_fused_loop(int tier, int64_t chunk, const rvl_instruction* ins, int32_t n_ins, FusedValue* val, void* out,
                    int64_t n, int64_t row_len) {
  chunk = chunk == 32 || chunk == 128 ? chunk : 64;
#if defined(__x86_64__) || defined(__i386__)
  static const bool f16c = __builtin_cpu_supports("f16c");
  if (tier == kSimdAvx2 && !f16c)  // the AVX2 clone converts f16 with F16C
    for (int32_t j = 0; j < n_ins; ++j)
      if (ins[j].dtype == RVL_DTYPE_F16) tier = kSimdPortable;
#endif
  if (row_len > 0) {  // a value computed from single values alone, one of them per-row: not here
    bool single[kFusedMaxIns];
    for (int32_t j = 0; j < n_ins; ++j) {
      const rvl_instruction& I = ins[j];
      if (I.op == RVL_OP_LOAD || I.op == RVL_OP_CONST || I.op == RVL_OP_ACC) {
        single[j] = val[j].one || val[j].rows;
        continue;
      }
      const int arity = rvl::op_info(I.op).arity;
      const int32_t a = I.src[0], b = arity == 2 ? I.src[1] : I.src[0];
      single[j] = single[a] && single[b];
      if (single[j] && (val[a].rows || val[b].rows)) return false;
      val[j].rows = false;  // computed values are runs, chunk registers or (of `one`s) one
    }
  }
  // Chunk register k is regs + k * chunk: packed, so a short chunk touches few cache lines.
  alignas(64) float regs_mem[kFusedMaxIns * kMaxChunk];
  const auto regs = [&](int32_t k) { return regs_mem + static_cast<int64_t>(k) * chunk; };
  float one[kFusedMaxIns];
  Step steps[kFusedMaxIns];
  int32_t n_steps = 0, n_regs = 0;
  // A chunk register holding a single value spread, made on first use.
  int32_t spread[kFusedMaxIns];
  bool in_reg[kFusedMaxIns];  // a computed value's chunk register (read at offset 0 every chunk)
  for (int32_t j = 0; j < n_ins; ++j) spread[j] = -1, in_reg[j] = false;
  // Note [Register chains]: the same steps as a chain, when they form one.
  ChainStep chain[kFusedMaxIns];
  int32_t step_of[kFusedMaxIns];
  bool chain_ok = register_chain_enabled() && n >= kChainGroup && (row_len == 0 || row_len % kChainGroup == 0);
  auto chain_operand = [&](int32_t q, ChainOperand* o) {
    if (row_len > 0 && val[q].rows) *o = {ChainOperand::Rows, val[q].p, val[q].rstride};
    else if (val[q].one) *o = {ChainOperand::One, val[q].p, 0};
    else if (!in_reg[q]) *o = {ChainOperand::Run, val[q].p, 0};
    else {
      chain_ok = chain_ok && step_of[q] == n_steps - 2;  // only the previous step's value
      *o = {ChainOperand::Prev, nullptr, 0};
    }
  };
  auto source = [&](int32_t q, const float** p, int64_t* step) {
    if (row_len > 0 && val[q].rows) {
      *p = val[q].p, *step = val[q].rstride;
      return;
    }
    if (!val[q].one) {
      *p = val[q].p, *step = in_reg[q] ? 0 : 1;
      return;
    }
    if (spread[q] < 0) {
      spread[q] = n_regs++;
      std::fill(regs(spread[q]), regs(spread[q]) + chunk, *val[q].p);
    }
    *p = regs(spread[q]), *step = 0;
  };
  // A step's destination: the output for the program's last instruction, else a chunk register.
  auto destination = [&](Step& s, int32_t j) {
    if (j == n_ins - 1) {
      s.d = static_cast<float*>(out), s.ds = 1;
    } else {
      s.d = regs(n_regs++), s.ds = 0;
      val[j] = {s.d, false, false, 0};
      in_reg[j] = true;
    }
  };
  for (int32_t j = 0; j < n_ins; ++j) {
    const rvl_instruction& I = ins[j];
    if (I.op == RVL_OP_LOAD || I.op == RVL_OP_CONST || I.op == RVL_OP_ACC) continue;
    if (I.op == RVL_OP_CAST) {  // Note [Half programs as one fused loop]
      chain_ok = false;
      if (!plan_conversion(ins, j, val, one, out, n, steps[n_steps])) continue;
      Step& s = steps[n_steps++];
      if (I.dtype != kF) source(I.src[0], &s.a, &s.as);  // the f32 value a narrowing step rounds
      destination(s, j);
      step_of[j] = n_steps - 1;
      continue;
    }
    const int arity = rvl::op_info(I.op).arity;
    const int32_t a = I.src[0], b = arity == 2 ? I.src[1] : I.src[0];
    if (val[a].one && val[b].one) {  // computed once (Note [One value per block])
      apply_one(I.op, &one[j], val[a].p, val[b].p);
      val[j] = {&one[j], true, false, 0};
      continue;
    }
    Step& s = steps[n_steps++];
    s.op = I.op;
    if (chain_ok) {
      chain_ok = chain_op(I.op);
      chain[n_steps - 1].op = I.op;
      chain_operand(a, &chain[n_steps - 1].a);
      chain_operand(b, &chain[n_steps - 1].b);
    }
    step_of[j] = n_steps - 1;
    s.rows = row_len > 0 && val[a].rows ? 1 : row_len > 0 && val[b].rows ? 2 : 0;
    source(a, &s.a, &s.as);
    source(b, &s.b, &s.bs);
    destination(s, j);
  }
  if (n_steps == 0 || steps[n_steps - 1].d != out) {  // the last value is a single value
    if (ins[n_ins - 1].dtype == kF) std::fill(static_cast<float*>(out), static_cast<float*>(out) + n, *val[n_ins - 1].p);
    return true;  // (a rounded single value: plan_conversion wrote it)
  }
  if (chain_ok) {  // the whole groups in registers, the tail (within one row) in chunks
    const int64_t done = run_register_chain(tier, chain, n_steps, static_cast<float*>(out), n, row_len);
    if (done == n) return true;
    for (int32_t k = 0; k < n_steps; ++k) {
      Step& t = steps[k];
      const int64_t rows_done = row_len > 0 ? done / row_len : 0;
      t.a += t.rows == 1 ? rows_done * t.as : done * t.as;
      t.b += t.rows == 2 ? rows_done * t.bs : done * t.bs;
      t.d += done * t.ds;
    }
    n -= done;
  }
  (void)tier;
#if defined(__x86_64__) || defined(__i386__)
  if (tier >= kSimdAvx512) return run_steps_avx512(chunk, steps, n_steps, n, row_len), true;
  if (tier >= kSimdAvx2) return run_steps_avx2(chunk, steps, n_steps, n, row_len), true;
#endif
  run_steps_portable(chunk, steps, n_steps, n, row_len);
  return true;
}

int64_t fused_loop_min_elements() {
  // Small kernels (the makemore step's) keep the passes: their blocks are in L1 either way, and
  // there the chunks' dispatch measured a few % slower (docs/performance.md, "One loop per
  // program"). Tests set 0, so that small programs take the fused loops too.
  static const int64_t n = tuning_int("RAVEL_TBB_FUSED_MIN", 32768, 0, int64_t{1} << 62);
  return n;
}

bool fused_loop_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("RAVEL_TBB_NO_FUSED_LOOP");
    return !(e && std::strcmp(e, "1") == 0);
  }();
  return on;
}

bool half_fused_loop_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("RAVEL_TBB_NO_HALF_FUSED_LOOP");
    return fused_loop_enabled() && !(e && std::strcmp(e, "1") == 0);
  }();
  return on;
}

}  // namespace tbbcpu
