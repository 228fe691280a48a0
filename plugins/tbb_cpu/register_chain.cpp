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

[[gnu::always_inline]] inline int64_t chain_body(const ChainStep* st, int32_t n_steps, float* out, int64_t n,
                                                 int64_t row_len) {
  const int64_t whole = n / kChainGroup * kChainGroup;
  const V one = splat(1.0f);
  for (int64_t i0 = 0; i0 < whole; i0 += kChainGroup) {
    const int64_t row = row_len > 0 ? i0 / row_len : 0;
    V r0 = one, r1 = one, r2 = one, r3 = one;
    for (int32_t k = 0; k < n_steps; ++k) {
      const ChainStep& s = st[k];
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
    std::memcpy(out + i0, &r0, sizeof r0);
    std::memcpy(out + i0 + kW, &r1, sizeof r1);
    std::memcpy(out + i0 + 2 * kW, &r2, sizeof r2);
    std::memcpy(out + i0 + 3 * kW, &r3, sizeof r3);
  }
  return whole;
}
#undef RVL_CHAIN_OPERAND_

int64_t chain_portable(const ChainStep* st, int32_t n_steps, float* out, int64_t n, int64_t row_len) {
  return chain_body(st, n_steps, out, n, row_len);
}
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) int64_t chain_avx2(const ChainStep* st, int32_t n_steps, float* out, int64_t n,
                                                   int64_t row_len) {
  return chain_body(st, n_steps, out, n, row_len);
}
__attribute__((target(RVL_TBB_AVX512_TARGET))) int64_t chain_avx512(const ChainStep* st, int32_t n_steps, float* out,
                                                                    int64_t n, int64_t row_len) {
  return chain_body(st, n_steps, out, n, row_len);
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

bool register_chain_enabled() {
  static const bool on = tuning_int("RAVEL_TBB_NO_REGISTER_CHAIN", 0, 0, 1) == 0;
  return on;
}

}  // namespace tbbcpu
