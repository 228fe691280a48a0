// Note [Register chains]
// A fused loop (Note [Fused loops]) runs each computed instruction over a chunk before the next,
// through chunk registers on the stack: every step is a store and two loads per vector, in L1.
// Layer norm's epilogue after hoisting, ((x + u) * r) * g + b, is four such steps, where the
// hand loop keeps the value in a register (8 loads and 4 stores per vector against 3 and 1);
// with the sum of squares' (x + u) * (x + u) that was most of the chain's arithmetic at 8192 x
// 1024 (perf, 2026-12-07: run_steps 50% of the samples, in cache).
// When the steps form one chain (each step after the first reads the previous step's value,
// and otherwise only inputs: runs, single values, per-row values), a group of 64 elements (four
// 64-byte vectors: four AVX-512 registers, eight AVX2 ones) goes through every step in registers
// and is stored once. The dispatch is a switch per step per group, as the chunk loop's.
// Bits: only ops whose element function is one IEEE operation are chained (ADD, MUL, NEG,
// RECIP: a + b, a * b, -a, 1 / a; the file is compiled with -ffp-contract=off like fused_loop.cpp),
// and each lane computes exactly that operation on the same operands in the same order, so the
// values are the chunk loop's (tests: tbb_array_tiers, suite fused_loops, both ways).
// The group's tail (n not a multiple of 64) is left to the chunk loop.
#include "register_chain.hpp"

#include "array_ops.hpp"
#include "tuning_env.hpp"

#include <ravel/backend.h>

#include <cstring>

// The 64-byte vector helpers are always inlined into their tiers' clones; GCC warns that such a
// vector would be passed differently in the portable one, where nothing passes it.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tbbcpu {
namespace {

typedef float V __attribute__((vector_size(64)));
constexpr int kW = 16;  // floats per V

[[gnu::always_inline]] inline V loadu(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// A broadcast (not 0 + x, which would turn -0 into +0; a lane-by-lane loop or a brace list of 16
// x compiled to 16 masked broadcasts).
[[gnu::always_inline]] inline V splat(float x) {
  const V v = {x};
  return __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
}

// The operand's four vectors into x0..x3; the running value r0..r3 for Prev. A macro, so that
// every V stays a plain local (in a register), which GCC did not manage through a struct.
#define RVL_CHAIN_OPERAND_(o, x0, x1, x2, x3)                                        \
  do {                                                                               \
    if ((o).kind == ChainOperand::Prev) {                                            \
      x0 = r0, x1 = r1, x2 = r2, x3 = r3;                                            \
    } else if ((o).kind == ChainOperand::Run) {                                      \
      const float* p_ = (o).p + i0;                                                  \
      x0 = loadu(p_), x1 = loadu(p_ + kW), x2 = loadu(p_ + 2 * kW), x3 = loadu(p_ + 3 * kW); \
    } else {                                                                         \
      x0 = splat((o).kind == ChainOperand::One ? *(o).p : (o).p[row * (o).stride]);  \
      x1 = x0, x2 = x0, x3 = x0;                                                     \
    }                                                                                \
  } while (0)

// Note [Decoded chain steps]
// Every step after the first reads the previous value, so it is one of a few forms: ADD or MUL
// of the value with a run, with a broadcast value (a single or per-row value: p[row * stride],
// stride 0 for a single one) or with itself, or NEG or RECIP of it. Decoded once per call into
// one code per step, a group's step is one switch on a dense code with the running value updated
// in place: perf showed the generic step (two operand-kind tests and a copy of the four
// registers for each Prev operand) at about twice the vector work's uops (2026-12-07).
// ADD and MUL are commutative in IEEE arithmetic, so op(x, prev) is op(prev, x): the same bits.
struct Decoded {
  enum Code : int32_t { AddRun, AddBcast, AddSelf, MulRun, MulBcast, MulSelf, Neg, Recip } code;
  const float* p;
  int64_t stride;
};

[[gnu::always_inline]] inline Decoded decode(const ChainStep& s) {
  const bool a_prev = s.a.kind == ChainOperand::Prev;
  const ChainOperand& x = a_prev ? s.b : s.a;  // the operand that is not the running value
  const bool add = s.op == RVL_OP_ADD;
  if (s.op == RVL_OP_NEG) return {Decoded::Neg, nullptr, 0};
  if (s.op != RVL_OP_ADD && s.op != RVL_OP_MUL) return {Decoded::Recip, nullptr, 0};
  if (x.kind == ChainOperand::Prev) return {add ? Decoded::AddSelf : Decoded::MulSelf, nullptr, 0};
  if (x.kind == ChainOperand::Run) return {add ? Decoded::AddRun : Decoded::MulRun, x.p, 0};
  return {add ? Decoded::AddBcast : Decoded::MulBcast, x.p, x.kind == ChainOperand::Rows ? x.stride : 0};
}

constexpr int32_t kMaxDecoded = 64;  // fused_loop.hpp's kFusedMaxIns: at most that many steps

// FOLD: the values are not stored but summed into *acc in chain_sum.hpp's order (Note [Chain
// sums in registers]); n is then a multiple of kChainGroup, at least one group.
template <bool FOLD>
[[gnu::always_inline]] inline int64_t chain_body(const ChainStep* st, int32_t n_steps, float* out, int64_t n,
                                                 int64_t row_len, float* acc = nullptr) {
  const int64_t whole = n / kChainGroup * kChainGroup;
  const V one = splat(1.0f);
  if (n_steps > kMaxDecoded) return 0;  // not planned by fused_loop.cpp; all left to the chunk loop
  Decoded code[kMaxDecoded];
  const int32_t n_code = n_steps;
  for (int32_t k = 1; k < n_code; ++k) code[k] = decode(st[k]);
  // The row of the group, counted rather than divided (a 64-bit division per group).
  int64_t row = 0, row_end = row_len > 0 ? row_len : whole;
  V s0 = one, s1 = one, s2 = one, s3 = one;  // FOLD: the 64 lanes
  for (int64_t i0 = 0; i0 < whole; i0 += kChainGroup) {
    if (i0 == row_end) ++row, row_end += row_len;
    V r0 = one, r1 = one, r2 = one, r3 = one;
    {  // the first step: two operands, neither the running value
      const ChainStep& s = st[0];
      V a0, a1, a2, a3, b0, b1, b2, b3;
      RVL_CHAIN_OPERAND_(s.a, a0, a1, a2, a3);
      switch (s.op) {
        case RVL_OP_ADD:
          RVL_CHAIN_OPERAND_(s.b, b0, b1, b2, b3);
          r0 = a0 + b0, r1 = a1 + b1, r2 = a2 + b2, r3 = a3 + b3;
          break;
        case RVL_OP_MUL:
          RVL_CHAIN_OPERAND_(s.b, b0, b1, b2, b3);
          r0 = a0 * b0, r1 = a1 * b1, r2 = a2 * b2, r3 = a3 * b3;
          break;
        case RVL_OP_NEG: r0 = -a0, r1 = -a1, r2 = -a2, r3 = -a3; break;
        default:  // RECIP (chain_op admits no other)
          r0 = one / a0, r1 = one / a1, r2 = one / a2, r3 = one / a3;
          break;
      }
    }
    for (int32_t k = 1; k < n_code; ++k) {
      const Decoded& d = code[k];
      switch (d.code) {
        case Decoded::AddRun: {
          const float* p = d.p + i0;
          r0 += loadu(p), r1 += loadu(p + kW), r2 += loadu(p + 2 * kW), r3 += loadu(p + 3 * kW);
          break;
        }
        case Decoded::AddBcast: {
          const V b = splat(d.p[row * d.stride]);
          r0 += b, r1 += b, r2 += b, r3 += b;
          break;
        }
        case Decoded::AddSelf: r0 += r0, r1 += r1, r2 += r2, r3 += r3; break;
        case Decoded::MulRun: {
          const float* p = d.p + i0;
          r0 *= loadu(p), r1 *= loadu(p + kW), r2 *= loadu(p + 2 * kW), r3 *= loadu(p + 3 * kW);
          break;
        }
        case Decoded::MulBcast: {
          const V b = splat(d.p[row * d.stride]);
          r0 *= b, r1 *= b, r2 *= b, r3 *= b;
          break;
        }
        case Decoded::MulSelf: r0 *= r0, r1 *= r1, r2 *= r2, r3 *= r3; break;
        case Decoded::Neg: r0 = -r0, r1 = -r1, r2 = -r2, r3 = -r3; break;
        default: r0 = one / r0, r1 = one / r1, r2 = one / r2, r3 = one / r3; break;
      }
    }
    if constexpr (FOLD) {
      if (i0 == 0) s0 = r0, s1 = r1, s2 = r2, s3 = r3;  // the first 64 values are the lanes
      else s0 += r0, s1 += r1, s2 += r2, s3 += r3;
      continue;
    }
    std::memcpy(out + i0, &r0, sizeof r0);
    std::memcpy(out + i0 + kW, &r1, sizeof r1);
    std::memcpy(out + i0 + 2 * kW, &r2, sizeof r2);
    std::memcpy(out + i0 + 3 * kW, &r3, sizeof r3);
  }
  if constexpr (FOLD) {
    // sum_wide_lanes' tree: its 8-float accumulators a0..a7 are the halves of s0..s3, so
    // a0 += a4, a1 += a5 is s0 += s2; a2 += a6, a3 += a7 is s1 += s3; a0 += a2, a1 += a3 is
    // s0 += s1; then a0 += a1 and the halving of its eight lanes.
    s0 += s2, s1 += s3;
    s0 += s1;
    float lane[kW];
    std::memcpy(lane, &s0, sizeof lane);
    for (int j = 0; j < 8; ++j) lane[j] += lane[j + 8];
    for (int w = 4; w >= 1; w /= 2)
      for (int j = 0; j < w; ++j) lane[j] += lane[j + w];
    *acc += lane[0];
  }
  return whole;
}
#undef RVL_CHAIN_OPERAND_

int64_t chain_portable(const ChainStep* st, int32_t n_steps, float* out, int64_t n, int64_t row_len) {
  return chain_body<false>(st, n_steps, out, n, row_len);
}
void chain_sum_portable(const ChainStep* st, int32_t n_steps, int64_t n, float* acc) {
  chain_body<true>(st, n_steps, nullptr, n, 0, acc);
}
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) int64_t chain_avx2(const ChainStep* st, int32_t n_steps, float* out, int64_t n,
                                                   int64_t row_len) {
  return chain_body<false>(st, n_steps, out, n, row_len);
}
__attribute__((target("avx2"))) void chain_sum_avx2(const ChainStep* st, int32_t n_steps, int64_t n, float* acc) {
  chain_body<true>(st, n_steps, nullptr, n, 0, acc);
}
__attribute__((target(RVL_TBB_AVX512_TARGET))) int64_t chain_avx512(const ChainStep* st, int32_t n_steps, float* out,
                                                                    int64_t n, int64_t row_len) {
  return chain_body<false>(st, n_steps, out, n, row_len);
}
__attribute__((target(RVL_TBB_AVX512_TARGET))) void chain_sum_avx512(const ChainStep* st, int32_t n_steps, int64_t n,
                                                                     float* acc) {
  chain_body<true>(st, n_steps, nullptr, n, 0, acc);
}
#endif

}  // namespace

bool chain_op(int32_t op) { return op == RVL_OP_ADD || op == RVL_OP_MUL || op == RVL_OP_NEG || op == RVL_OP_RECIP; }

int64_t run_register_chain(int tier, const ChainStep* st, int32_t n_steps, float* out, int64_t n, int64_t row_len) {
  (void)tier;
#if defined(__x86_64__) || defined(__i386__)
  if (tier >= kSimdAvx512) return chain_avx512(st, n_steps, out, n, row_len);
  if (tier >= kSimdAvx2) return chain_avx2(st, n_steps, out, n, row_len);
#endif
  return chain_portable(st, n_steps, out, n, row_len);
}

float run_register_chain_sum(int tier, const ChainStep* st, int32_t n_steps, int64_t n, float acc) {
  (void)tier;
#if defined(__x86_64__) || defined(__i386__)
  if (tier >= kSimdAvx512) return chain_sum_avx512(st, n_steps, n, &acc), acc;
  if (tier >= kSimdAvx2) return chain_sum_avx2(st, n_steps, n, &acc), acc;
#endif
  chain_sum_portable(st, n_steps, n, &acc);
  return acc;
}

bool register_chain_enabled() {
  static const bool on = tuning_int("RAVEL_TBB_NO_REGISTER_CHAIN", 0, 0, 1) == 0;
  return on;
}

}  // namespace tbbcpu
