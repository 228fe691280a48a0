// The oneTBB plugin's fused loops (Note [Fused loops], plugins/tbb_cpu/fused_loop.cpp): a random
// all-f32 program run chunk by chunk must give, in every instruction-set tier this CPU runs, the
// bits of the block evaluator's way (one baseline array loop per instruction over the whole
// block, single values spread first), over random bit patterns with NaN, infinities, subnormals
// and signed zeros, at lengths around the chunk. `exp(a) * b + c` and layer norm's epilogue are
// also checked against plain double arithmetic, and the programs fused_loop_fits must refuse.
// Register chains (Note [Register chains]): random chains of ADD/MUL/NEG/RECIP at lengths around
// the 64-element group, against the same bits. Per-row operands (Note [Per-row operands in
// fused loops]): a block of rows in one call against one call per row with the row's values as
// single values; a value of per-row values alone is refused with nothing written.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

#include "array_ops.hpp"
#include "fused_loop.hpp"

namespace {

uint64_t next(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return s >> 11;
}

float random_float(uint64_t& seed) {
  const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3.5f, 2.0f, 200.0f, -200.0f};
  const uint64_t r = next(seed) % 32;
  if (r < 10) return special[r];
  if (r < 14) {
    const uint32_t bits = static_cast<uint32_t>(next(seed));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return static_cast<float>(static_cast<int64_t>(next(seed) % 2001) - 1000) / 97.0f;
}

std::vector<float> random_floats(int64_t n, uint64_t& seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = random_float(seed);
  return v;
}

// Bit equality, any NaN equal to any NaN (which operand's payload an ADD returns is the
// compiler's choice of operand order, as in test_tbb_array_tiers.cpp).
bool same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0 && !(std::isnan(got[i]) && std::isnan(want[i]))) return false;
  return true;
}

rvl_instruction instr(int32_t op, int32_t a = -1, int32_t b = -1) {
  rvl_instruction I{};
  I.op = op, I.dtype = RVL_DTYPE_F32, I.src[0] = a, I.src[1] = b, I.src[2] = -1;
  return I;
}

// A leaf's data: a run of n values, or one value (a per-row value, a CONST).
struct Leaf {
  std::vector<float> values;
  bool one = false;
};

// The block evaluator's way: each computed instruction one baseline array loop over n elements,
// a single value spread over n first.
std::vector<float> reference(const std::vector<rvl_instruction>& ins, const std::vector<Leaf>& leaves, int64_t n) {
  std::vector<std::vector<float>> v(ins.size());
  for (size_t j = 0; j < ins.size(); ++j) {
    const rvl_instruction& I = ins[j];
    if (I.op == RVL_OP_LOAD || I.op == RVL_OP_CONST || I.op == RVL_OP_ACC) {
      const Leaf& l = leaves[j];
      v[j] = l.one ? std::vector<float>(static_cast<size_t>(n), l.values[0]) : l.values;
      continue;
    }
    v[j].resize(static_cast<size_t>(n));
    tbbcpu::ArrayFn fn = tbbcpu::array_kernel_at(tbbcpu::kSimdPortable, I.op, RVL_DTYPE_F32);
    BOOST_REQUIRE(fn != nullptr);
    const float* b = I.src[1] >= 0 ? v[I.src[1]].data() : nullptr;
    fn(v[j].data(), v[I.src[0]].data(), b, nullptr, n);
  }
  return v.back();
}

std::vector<float> fused(int tier, const std::vector<rvl_instruction>& ins, const std::vector<Leaf>& leaves, int64_t n,
                         int64_t chunk = 64) {
  std::vector<tbbcpu::FusedValue> val(ins.size());
  for (size_t j = 0; j < ins.size(); ++j)
    if (!leaves[j].values.empty()) val[j] = {leaves[j].values.data(), leaves[j].one, false, 0};
  std::vector<float> out(static_cast<size_t>(n) + 16, 12345.0f);
  tbbcpu::run_fused_loop(tier, chunk, ins.data(), static_cast<int32_t>(ins.size()), val.data(), out.data(), n);
  for (size_t i = static_cast<size_t>(n); i < out.size(); ++i)
    BOOST_REQUIRE_MESSAGE(out[i] == 12345.0f, "wrote past the block's end");
  out.resize(static_cast<size_t>(n));
  return out;
}

const int32_t kOps[] = {RVL_OP_NEG, RVL_OP_RECIP, RVL_OP_SQRT, RVL_OP_EXP2, RVL_OP_LOG2, RVL_OP_SIN,
                        RVL_OP_TRUNC, RVL_OP_ADD, RVL_OP_MUL, RVL_OP_MAX, RVL_OP_MOD, RVL_OP_IDIV};

}  // namespace

BOOST_AUTO_TEST_SUITE(fused_loops)

BOOST_AUTO_TEST_CASE(random_programs_give_the_block_evaluators_bits_in_every_tier) {
  uint64_t seed = 2026;
  int checked = 0;
  for (int prog = 0; prog < 300; ++prog) {
    const int64_t n = std::vector<int64_t>{1, 5, 31, 63, 64, 65, 127, 130, 257, 512, 1000}[prog % 11];
    std::vector<rvl_instruction> ins;
    std::vector<Leaf> leaves;
    const int n_ins = 3 + static_cast<int>(next(seed) % 14);
    for (int j = 0; j < n_ins; ++j) {
      // Leaves first and now and then; the last instruction is computed.
      const bool leaf = j < 2 || (j + 1 < n_ins && next(seed) % 3 == 0);
      if (leaf) {
        const uint64_t kind = next(seed) % 4;  // a run (LOAD), one value (per-row LOAD, CONST), ACC
        const int32_t op = kind == 3 ? RVL_OP_ACC : kind == 2 ? RVL_OP_CONST : RVL_OP_LOAD;
        ins.push_back(instr(op));
        Leaf l;
        l.one = kind == 1 || kind == 2;
        l.values = random_floats(l.one ? 1 : n, seed);
        leaves.push_back(l);
        continue;
      }
      const int32_t op = kOps[next(seed) % (sizeof kOps / sizeof kOps[0])];
      const int32_t a = static_cast<int32_t>(next(seed) % j), b = static_cast<int32_t>(next(seed) % j);
      ins.push_back(rvl::op_info(op).arity == 2 ? instr(op, a, b) : instr(op, a));
      leaves.emplace_back();
    }
    BOOST_REQUIRE(static_cast<int>(ins.size()) == n_ins);
    if (!tbbcpu::fused_loop_fits(ins.data(), n_ins)) continue;  // fewer than two computed
    const std::vector<float> want = reference(ins, leaves, n);
    for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier) {
      for (int64_t chunk : {32, 64, 128}) {
        if (!same_bits(fused(tier, ins, leaves, n, chunk), want))
          BOOST_ERROR("program " << prog << " (" << n_ins << " instructions, n " << n << ") tier " << tier
                                 << " chunk " << chunk << ": bits differ from the block evaluator's");
        ++checked;
      }
    }
  }
  BOOST_CHECK_GT(checked, 200);
}

// exp(a) * b + c as the core lowers it (exp(x) = exp2(x * log2 e)) against double arithmetic.
BOOST_AUTO_TEST_CASE(exp_times_b_plus_c_against_double) {
  const int64_t n = 1000;
  std::vector<rvl_instruction> ins = {instr(RVL_OP_LOAD), instr(RVL_OP_CONST), instr(RVL_OP_MUL, 0, 1),
                                      instr(RVL_OP_EXP2, 2), instr(RVL_OP_LOAD), instr(RVL_OP_MUL, 3, 4),
                                      instr(RVL_OP_LOAD), instr(RVL_OP_ADD, 5, 6)};
  std::vector<Leaf> leaves(ins.size());
  for (int j : {0, 4, 6}) leaves[j].values.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    leaves[0].values[i] = static_cast<float>(i % 200 - 100) / 17.0f;
    leaves[4].values[i] = static_cast<float>(i % 7) - 3.0f;
    leaves[6].values[i] = static_cast<float>(i % 11) * 0.25f;
  }
  leaves[1] = {{static_cast<float>(1.0 / std::log(2.0))}, true};
  BOOST_REQUIRE(tbbcpu::fused_loop_fits(ins.data(), static_cast<int32_t>(ins.size())));
  for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier) {
    const std::vector<float> got = fused(tier, ins, leaves, n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(double(leaves[0].values[i])) * leaves[4].values[i] + leaves[6].values[i];
      BOOST_REQUIRE_MESSAGE(std::fabs(got[i] - want) <= 1e-5 * (1.0 + std::fabs(want)),
                            "tier " << tier << " element " << i << ": " << got[i] << " against " << want);
    }
  }
}

// Layer norm's epilogue (x - mean) * rstd * g + b with mean and rstd single values of the row.
BOOST_AUTO_TEST_CASE(layer_norm_epilogue_with_row_values_against_double) {
  const int64_t n = 777;
  std::vector<rvl_instruction> ins = {instr(RVL_OP_LOAD), instr(RVL_OP_LOAD), instr(RVL_OP_NEG, 1),
                                      instr(RVL_OP_ADD, 0, 2), instr(RVL_OP_LOAD), instr(RVL_OP_MUL, 3, 4),
                                      instr(RVL_OP_LOAD), instr(RVL_OP_MUL, 5, 6), instr(RVL_OP_LOAD),
                                      instr(RVL_OP_ADD, 7, 8)};
  std::vector<Leaf> leaves(ins.size());
  uint64_t seed = 99;
  for (int j : {0, 6, 8}) {
    leaves[j].values.resize(n);
    for (float& x : leaves[j].values) x = static_cast<float>(static_cast<int64_t>(next(seed) % 2001) - 1000) / 300.0f;
  }
  leaves[1] = {{0.375f}, true};
  leaves[4] = {{1.75f}, true};
  BOOST_REQUIRE(tbbcpu::fused_loop_fits(ins.data(), static_cast<int32_t>(ins.size())));
  const std::vector<float> want_bits = reference(ins, leaves, n);
  for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier) {
    const std::vector<float> got = fused(tier, ins, leaves, n);
    BOOST_CHECK(same_bits(got, want_bits));
    for (int64_t i = 0; i < n; ++i) {
      const double want = (double(leaves[0].values[i]) - 0.375) * 1.75 * leaves[6].values[i] + leaves[8].values[i];
      BOOST_REQUIRE_MESSAGE(std::fabs(got[i] - want) <= 1e-5 * (1.0 + std::fabs(want)),
                            "tier " << tier << " element " << i);
    }
  }
}

// A program whose last value depends on single values only: every element is that value.
BOOST_AUTO_TEST_CASE(single_values_only_fill_the_block) {
  std::vector<rvl_instruction> ins = {instr(RVL_OP_CONST), instr(RVL_OP_SQRT, 0), instr(RVL_OP_ADD, 1, 0)};
  std::vector<Leaf> leaves(ins.size());
  leaves[0] = {{2.0f}, true};
  const std::vector<float> got = fused(tbbcpu::simd_tier_supported(), ins, leaves, 70);
  for (float x : got) BOOST_CHECK_EQUAL(x, std::sqrt(2.0f) + 2.0f);
}

BOOST_AUTO_TEST_CASE(what_does_not_fit) {
  auto fits = [](std::vector<rvl_instruction> ins) {
    return tbbcpu::fused_loop_fits(ins.data(), static_cast<int32_t>(ins.size()));
  };
  const rvl_instruction ld = instr(RVL_OP_LOAD);
  BOOST_CHECK(fits({ld, ld, instr(RVL_OP_ADD, 0, 1), instr(RVL_OP_MUL, 2, 2)}));
  BOOST_CHECK(!fits({ld, ld, instr(RVL_OP_ADD, 0, 1)}));                             // one computed
  BOOST_CHECK(!fits({ld, instr(RVL_OP_NEG, 0), instr(RVL_OP_NEG, 1), ld}));          // last a LOAD
  rvl_instruction cast = instr(RVL_OP_CAST, 1);
  BOOST_CHECK(!fits({ld, instr(RVL_OP_NEG, 0), cast, instr(RVL_OP_NEG, 2)}));        // a CAST
  rvl_instruction lt = instr(RVL_OP_CMPLT, 0, 0);
  lt.dtype = RVL_DTYPE_BOOL;
  BOOST_CHECK(!fits({ld, instr(RVL_OP_NEG, 0), lt, instr(RVL_OP_NEG, 1)}));          // a bool value
  rvl_instruction ld64 = ld;
  ld64.dtype = RVL_DTYPE_F64;
  BOOST_CHECK(!fits({ld64, ld64, instr(RVL_OP_ADD, 0, 1), instr(RVL_OP_MUL, 2, 2)}));  // f64
  std::vector<rvl_instruction> many = {ld};
  for (int j = 1; j <= tbbcpu::kFusedMaxIns; ++j) many.push_back(instr(RVL_OP_NEG, j - 1));
  BOOST_CHECK(!fits(many));                                                          // too long
  many.resize(tbbcpu::kFusedMaxIns);
  BOOST_CHECK(fits(many));
}

// Linear chains (each step reads the previous value, and runs or single values), so that every
// program takes the register chain for its whole groups and the chunk loop for the tail.
BOOST_AUTO_TEST_CASE(register_chains_give_the_block_evaluators_bits_in_every_tier) {
  const int32_t chain_ops[] = {RVL_OP_ADD, RVL_OP_MUL, RVL_OP_NEG, RVL_OP_RECIP};
  uint64_t seed = 65;
  int checked = 0;
  for (int prog = 0; prog < 120; ++prog) {
    const int64_t n = std::vector<int64_t>{64, 65, 100, 128, 191, 256, 1000, 1024}[prog % 8];
    std::vector<rvl_instruction> ins;
    std::vector<Leaf> leaves;
    const int n_leaves = 2 + static_cast<int>(next(seed) % 3);
    for (int j = 0; j < n_leaves; ++j) {
      Leaf l;
      l.one = j > 0 && next(seed) % 2 == 0;  // leaf 0 a run: the first step reads it
      l.values = random_floats(l.one ? 1 : n, seed);
      ins.push_back(instr(j % 2 ? RVL_OP_CONST : RVL_OP_LOAD));
      leaves.push_back(l);
    }
    const int n_steps = 2 + static_cast<int>(next(seed) % 6);
    for (int k = 0; k < n_steps; ++k) {
      const int32_t op = chain_ops[next(seed) % 4];
      const int32_t prev = static_cast<int32_t>(ins.size()) - 1;
      const int32_t leaf = static_cast<int32_t>(next(seed) % static_cast<uint64_t>(n_leaves));
      const int32_t first = k == 0 ? 0 : prev;
      const uint64_t shape = next(seed) % 3;  // op(prev, leaf), op(leaf, prev), op(prev, prev)
      if (rvl::op_info(op).arity == 1) ins.push_back(instr(op, first));
      else if (k == 0 || shape == 0) ins.push_back(instr(op, first, leaf));
      else if (shape == 1) ins.push_back(instr(op, leaf, prev));
      else ins.push_back(instr(op, prev, prev));
      leaves.emplace_back();
    }
    const auto n_ins = static_cast<int32_t>(ins.size());
    BOOST_REQUIRE(tbbcpu::fused_loop_fits(ins.data(), n_ins));
    const std::vector<float> want = reference(ins, leaves, n);
    for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier)
      for (int64_t chunk : {32, 64, 128}) {
        if (!same_bits(fused(tier, ins, leaves, n, chunk), want))
          BOOST_ERROR("chain " << prog << " (" << n_steps << " steps, n " << n << ") tier " << tier << " chunk "
                               << chunk << ": bits differ from the block evaluator's");
        ++checked;
      }
  }
  BOOST_CHECK_GT(checked, 300);
}

// A block of rows with per-row values (read with a stride of 3) in one call, against one call
// per row with the row's values as single values; a chain and a program that is none.
BOOST_AUTO_TEST_CASE(per_row_operands_give_the_row_by_row_bits) {
  const rvl_instruction ld = instr(RVL_OP_LOAD);
  // 0 x, 1 u (per row), 2 g, 3 c (CONST), then the computed ones.
  const std::vector<std::vector<rvl_instruction>> programs = {
      {ld, ld, ld, instr(RVL_OP_CONST), instr(RVL_OP_ADD, 0, 1), instr(RVL_OP_MUL, 4, 3), instr(RVL_OP_MUL, 5, 2),
       instr(RVL_OP_ADD, 6, 2)},                                                  // a chain
      {ld, ld, ld, instr(RVL_OP_CONST), instr(RVL_OP_MUL, 1, 0), instr(RVL_OP_EXP2, 4), instr(RVL_OP_MUL, 0, 2),
       instr(RVL_OP_ADD, 5, 6), instr(RVL_OP_MAX, 7, 1)},                         // none
      {ld, ld, ld, instr(RVL_OP_CONST), instr(RVL_OP_ADD, 0, 1), instr(RVL_OP_MUL, 4, 4)}};  // (x + u)^2
  uint64_t seed = 7;
  for (const auto& ins : programs)
    for (int64_t R : {128, 256})
      for (int64_t rows : {1, 3, 5})
        for (int64_t cut : {0, 37}) {  // the last row cut short (a block may end inside a row)
          const int64_t n = rows * R - cut;
          std::vector<Leaf> leaves(ins.size());
          leaves[0].values = random_floats(n, seed);
          const std::vector<float> u = random_floats(rows * 3, seed);
          leaves[2].values = random_floats(n, seed);
          leaves[3] = {{1.5f}, true};
          for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier)
            for (int64_t chunk : {32, 64, 128}) {
              std::vector<float> want;
              for (int64_t r = 0; r < rows; ++r) {
                const int64_t len = std::min(R, n - r * R);
                std::vector<Leaf> row_leaves = leaves;
                row_leaves[0].values.assign(leaves[0].values.begin() + r * R, leaves[0].values.begin() + r * R + len);
                row_leaves[2].values.assign(leaves[2].values.begin() + r * R, leaves[2].values.begin() + r * R + len);
                row_leaves[1] = {{u[static_cast<size_t>(r * 3)]}, true};
                const std::vector<float> part = reference(ins, row_leaves, len);
                want.insert(want.end(), part.begin(), part.end());
              }
              std::vector<tbbcpu::FusedValue> val(ins.size());
              val[0] = {leaves[0].values.data(), false, false, 0};
              val[1] = {u.data(), false, true, 3};
              val[2] = {leaves[2].values.data(), false, false, 0};
              val[3] = {leaves[3].values.data(), true, false, 0};
              std::vector<float> got(static_cast<size_t>(n) + 16, 12345.0f);
              BOOST_REQUIRE(tbbcpu::run_fused_loop(tier, chunk, ins.data(), static_cast<int32_t>(ins.size()), val.data(),
                                                   got.data(), n, R));
              for (size_t i = static_cast<size_t>(n); i < got.size(); ++i) BOOST_REQUIRE(got[i] == 12345.0f);
              got.resize(static_cast<size_t>(n));
              BOOST_CHECK_MESSAGE(same_bits(got, want), ins.size() << " instructions, rows of " << R << " x " << rows
                                                                    << " less " << cut << ", tier " << tier
                                                                    << ", chunk " << chunk);
            }
        }
}

BOOST_AUTO_TEST_CASE(a_value_of_per_row_values_alone_is_refused) {
  // -u is per-row: the caller must go row by row; nothing may be written.
  const std::vector<rvl_instruction> ins = {instr(RVL_OP_LOAD), instr(RVL_OP_LOAD), instr(RVL_OP_NEG, 1),
                                            instr(RVL_OP_ADD, 0, 2), instr(RVL_OP_MUL, 3, 3)};
  std::vector<float> x(256, 1.0f), u = {2.0f, 3.0f}, out(256, 7.0f);
  std::vector<tbbcpu::FusedValue> val(ins.size());
  val[0] = {x.data(), false, false, 0};
  val[1] = {u.data(), false, true, 1};
  BOOST_CHECK(!tbbcpu::run_fused_loop(tbbcpu::simd_tier_supported(), 128, ins.data(), 5, val.data(), out.data(), 256,
                                      128));
  for (float o : out) BOOST_REQUIRE(o == 7.0f);
  // The same values as single values (row by row) are computed once.
  val[1] = {u.data(), true, false, 0};
  BOOST_CHECK(tbbcpu::run_fused_loop(tbbcpu::simd_tier_supported(), 128, ins.data(), 5, val.data(), out.data(), 128));
  BOOST_CHECK_EQUAL(out[0], 1.0f);  // (1 - 2)^2
}

BOOST_AUTO_TEST_SUITE_END()
