// A fused loop whose steps form one chain, run with the running value in vector registers
// (Note [Register chains]; fused_loop.cpp plans it).
#pragma once

#include <cstdint>

namespace tbbcpu {

// One operand of a chain step.
struct ChainOperand {
  enum Kind : int8_t { Run, One, Rows, Prev } kind;
  const float* p;   // Run: element i at p[i]; One: *p; Rows: p[(i / row_len) * stride]
  int64_t stride;   // Rows only
};

// One step: op(a, b) (b unused by a unary op); at least one operand of every step but the first
// is Prev (the previous step's value), none of the first's is.
struct ChainStep {
  int32_t op;
  ChainOperand a, b;
};

constexpr int64_t kChainGroup = 64;  // elements per group of vector registers

// Whether a step of op `op` may be part of a chain (the ops whose element function is one IEEE
// operation, so a vector lane gives the array loop's bits: ADD, MUL, NEG, RECIP).
bool chain_op(int32_t op);

// Computes the whole groups of kChainGroup elements of [0, n) into out, on SIMD tier `tier`;
// returns how many elements it computed (n rounded down to the group). row_len > 0: a multiple
// of kChainGroup (no group straddles two rows).
int64_t run_register_chain(int tier, const ChainStep* st, int32_t n_steps, float* out, int64_t n, int64_t row_len);

// Note [Chain sums in registers] (row_chain_rows.cpp): acc plus the sum of the chain's values over
// [0, n), n a positive multiple of kChainGroup, folded from the registers in chain_sum.hpp's order,
// so the bits of sum_wide_lanes(acc, values, n) without storing the values. No per-row operands.
float run_register_chain_sum(int tier, const ChainStep* st, int32_t n_steps, int64_t n, float acc);

// Whether the chains run (false under RAVEL_TBB_NO_REGISTER_CHAIN=1: measurements, tests).
bool register_chain_enabled();

}  // namespace tbbcpu
