// Half programs as one fused loop (Note [Half programs as one fused loop],
// plugins/tbb_cpu/half_chunk.hpp): a random program over f16 or bf16 inputs (each widened by a
// CAST to f32, f32 ops, one CAST back to the half type at the end) run chunk by chunk must give,
// in every instruction-set tier this CPU runs and every chunk length, the bits of the passes
// (half_convert.cpp's conversions of the whole block, one baseline array loop per instruction,
// one rounding at the end), over inputs with NaN, infinities, subnormals, signed zeros and values
// that overflow the half type once computed, at odd lengths and misaligned starts; nothing is
// written past the block. `exp(a) * b + c` is also checked against double arithmetic within the
// format's rounding, and single values (a per-row half input) are widened and rounded once.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <ravel/backend.hpp>
#include <ravel/half.hpp>
#include <ravel/op_table.hpp>

#include "array_ops.hpp"
#include "fused_loop.hpp"
#include "half_convert.hpp"

namespace {

uint64_t next(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return s >> 11;
}

// Half bit patterns: specials (NaN, infinities, signed zeros, the largest finite value, the
// smallest subnormal), random patterns, and ordinary values.
uint16_t random_half(bool f16, uint64_t& seed) {
  const uint16_t f16_special[] = {0x7E00, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x7BFF, 0x0001, 0x83FF, 0x7D01};
  const uint16_t bf16_special[] = {0x7FC0, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x7F7F, 0x0001, 0x807F, 0x7F81};
  const uint64_t r = next(seed) % 32;
  if (r < 9) return f16 ? f16_special[r] : bf16_special[r];
  if (r < 13) return static_cast<uint16_t>(next(seed));
  const float x = static_cast<float>(static_cast<int64_t>(next(seed) % 2001) - 1000) / 97.0f;
  return f16 ? rvl::f16_bits_from(x) : rvl::bf16_bits_from(x);
}

rvl_instruction instr(int32_t op, int32_t dtype, int32_t a = -1, int32_t b = -1) {
  rvl_instruction I{};
  I.op = op, I.dtype = dtype, I.src[0] = a, I.src[1] = b, I.src[2] = -1;
  return I;
}

// A leaf: half values (a LOAD of the half type) or floats (an f32 CONST); one: a single value.
struct Leaf {
  std::vector<uint16_t> halves;
  std::vector<float> floats;
  bool one = false;
};

// The passes: every half LOAD widened by half_convert.cpp over the block, each computed
// instruction one baseline array loop, the final CAST rounded by half_convert.cpp.
std::vector<uint16_t> passes(const std::vector<rvl_instruction>& ins, const std::vector<Leaf>& leaves, int64_t n) {
  std::vector<std::vector<float>> v(ins.size());
  std::vector<uint16_t> out(static_cast<size_t>(n));
  for (size_t j = 0; j < ins.size(); ++j) {
    const rvl_instruction& I = ins[j];
    const size_t N = static_cast<size_t>(n);
    if (I.op == RVL_OP_LOAD) continue;  // its CAST widens it
    if (I.op == RVL_OP_CONST) {
      v[j].assign(N, leaves[j].floats[0]);
      continue;
    }
    if (I.op == RVL_OP_CAST && I.dtype == RVL_DTYPE_F32) {
      const Leaf& l = leaves[I.src[0]];
      std::vector<uint16_t> h = l.one ? std::vector<uint16_t>(N, l.halves[0]) : l.halves;
      v[j].resize(N);
      ins[I.src[0]].dtype == RVL_DTYPE_F16 ? tbbcpu::f16_to_f32(v[j].data(), h.data(), n)
                                           : tbbcpu::bf16_to_f32(v[j].data(), h.data(), n);
      continue;
    }
    if (I.op == RVL_OP_CAST) {
      I.dtype == RVL_DTYPE_F16 ? tbbcpu::f32_to_f16(out.data(), v[I.src[0]].data(), n)
                               : tbbcpu::f32_to_bf16(out.data(), v[I.src[0]].data(), n);
      continue;
    }
    v[j].resize(N);
    tbbcpu::ArrayFn fn = tbbcpu::array_kernel_at(tbbcpu::kSimdPortable, I.op, RVL_DTYPE_F32);
    BOOST_REQUIRE(fn != nullptr);
    fn(v[j].data(), v[I.src[0]].data(), I.src[1] >= 0 ? v[I.src[1]].data() : nullptr, nullptr, n);
  }
  return out;
}

// The fused loop over the leaves' values starting at element `skew` of a copy (misaligned).
std::vector<uint16_t> fused(int tier, int64_t chunk, const std::vector<rvl_instruction>& ins,
                            const std::vector<Leaf>& leaves, int64_t n, int64_t skew) {
  std::vector<std::vector<uint16_t>> copies(ins.size());
  std::vector<tbbcpu::FusedValue> val(ins.size());
  for (size_t j = 0; j < ins.size(); ++j) {
    const Leaf& l = leaves[j];
    if (!l.floats.empty()) val[j] = {l.floats.data(), l.one, false, 0};
    if (l.halves.empty()) continue;
    copies[j].assign(static_cast<size_t>(skew), 0xDEAD);
    copies[j].insert(copies[j].end(), l.halves.begin(), l.halves.end());
    val[j] = {reinterpret_cast<const float*>(copies[j].data() + skew), l.one, false, 0};
  }
  std::vector<uint16_t> out(static_cast<size_t>(n + skew + 16), 0xBEEF);
  BOOST_REQUIRE(tbbcpu::run_fused_loop(tier, chunk, ins.data(), static_cast<int32_t>(ins.size()), val.data(),
                                       out.data() + skew, n));
  for (size_t i = 0; i < out.size(); ++i)
    if (i < static_cast<size_t>(skew) || i >= static_cast<size_t>(n + skew))
      BOOST_REQUIRE_MESSAGE(out[i] == 0xBEEF, "wrote outside the block");
  return {out.begin() + skew, out.begin() + skew + n};
}

bool is_nan(bool f16, uint16_t h) { return f16 ? (h & 0x7FFF) > 0x7C00 : (h & 0x7FFF) > 0x7F80; }

// Bit equality, any NaN equal to any NaN (which operand's payload an ADD of two NaNs returns is
// the compiler's choice of operand order, as in test_tbb_fused_loops.cpp).
int64_t mismatches(bool f16, const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i] && !(is_nan(f16, got[i]) && is_nan(f16, want[i]));
  return bad;
}

const int32_t kOps[] = {RVL_OP_NEG, RVL_OP_RECIP, RVL_OP_SQRT, RVL_OP_EXP2, RVL_OP_LOG2, RVL_OP_SIN,
                        RVL_OP_TRUNC, RVL_OP_ADD, RVL_OP_MUL, RVL_OP_MAX, RVL_OP_MOD, RVL_OP_IDIV};

}  // namespace

BOOST_AUTO_TEST_SUITE(half_fused_loops)

BOOST_AUTO_TEST_CASE(random_half_programs_give_the_passes_bits_in_every_tier) {
  uint64_t seed = 25;
  int checked = 0;
  for (int prog = 0; prog < 240; ++prog) {
    const bool f16 = prog % 2 == 0;
    const int32_t hdt = f16 ? RVL_DTYPE_F16 : RVL_DTYPE_BF16;
    const int64_t n = std::vector<int64_t>{1, 7, 31, 33, 64, 65, 127, 129, 255, 1000, 4097}[prog % 11];
    std::vector<rvl_instruction> ins;
    std::vector<Leaf> leaves;
    std::vector<int32_t> f32_values;  // the instructions an f32 op may read
    const int n_ops = 1 + static_cast<int>(next(seed) % 8);
    auto add_input = [&](bool one) {  // a half LOAD (a run or a single value) and its widening CAST
      Leaf l;
      l.one = one;
      for (int64_t i = 0; i < (one ? 1 : n); ++i) l.halves.push_back(random_half(f16, seed));
      ins.push_back(instr(RVL_OP_LOAD, hdt));
      leaves.push_back(l);
      ins.push_back(instr(RVL_OP_CAST, RVL_DTYPE_F32, static_cast<int32_t>(ins.size()) - 1));
      leaves.emplace_back();
      f32_values.push_back(static_cast<int32_t>(ins.size()) - 1);
    };
    add_input(false);
    for (int k = 0; k < n_ops; ++k) {
      const uint64_t r = next(seed) % 8;
      if (r == 0) add_input(false);
      if (r == 1) add_input(true);
      if (r == 2) {  // an f32 CONST
        ins.push_back(instr(RVL_OP_CONST, RVL_DTYPE_F32));
        leaves.push_back({{}, {static_cast<float>(static_cast<int64_t>(next(seed) % 41) - 20) / 8.0f}, true});
        f32_values.push_back(static_cast<int32_t>(ins.size()) - 1);
      }
      const int32_t op = kOps[next(seed) % (sizeof kOps / sizeof kOps[0])];
      const int32_t a = f32_values[next(seed) % f32_values.size()], b = f32_values[next(seed) % f32_values.size()];
      ins.push_back(rvl::op_info(op).arity == 2 ? instr(op, RVL_DTYPE_F32, a, b) : instr(op, RVL_DTYPE_F32, a));
      leaves.emplace_back();
      f32_values.push_back(static_cast<int32_t>(ins.size()) - 1);
    }
    ins.push_back(instr(RVL_OP_CAST, hdt, static_cast<int32_t>(ins.size()) - 1));
    leaves.emplace_back();
    const auto n_ins = static_cast<int32_t>(ins.size());
    BOOST_REQUIRE(!tbbcpu::fused_loop_fits(ins.data(), n_ins));  // f32 programs only, by default
    BOOST_REQUIRE(tbbcpu::fused_loop_fits(ins.data(), n_ins, true));
    const std::vector<uint16_t> want = passes(ins, leaves, n);
    for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier)
      for (int64_t chunk : {32, 64, 128}) {
        const int64_t bad = mismatches(f16, fused(tier, chunk, ins, leaves, n, prog % 3), want);
        BOOST_CHECK_MESSAGE(bad == 0, "program " << prog << (f16 ? " f16" : " bf16") << " (" << n_ins
                                                 << " instructions, n " << n << ") tier " << tier << " chunk "
                                                 << chunk << ": " << bad << " elements differ from the passes");
        ++checked;
      }
  }
  BOOST_CHECK_GT(checked, 600);
}

// exp(a) * b + c as the core lowers it, in f16 and bf16, against double arithmetic: within half
// an ulp of the format plus the f32 arithmetic's error (relative 2^-11 for f16, 2^-8 for bf16).
BOOST_AUTO_TEST_CASE(exp_times_b_plus_c_against_double) {
  const int64_t n = 1001;
  for (const bool f16 : {true, false}) {
    const int32_t h = f16 ? RVL_DTYPE_F16 : RVL_DTYPE_BF16, F = RVL_DTYPE_F32;
    const std::vector<rvl_instruction> ins = {
        instr(RVL_OP_LOAD, h), instr(RVL_OP_CAST, F, 0), instr(RVL_OP_CONST, F), instr(RVL_OP_MUL, F, 1, 2),
        instr(RVL_OP_EXP2, F, 3), instr(RVL_OP_LOAD, h), instr(RVL_OP_CAST, F, 5), instr(RVL_OP_MUL, F, 4, 6),
        instr(RVL_OP_LOAD, h), instr(RVL_OP_CAST, F, 8), instr(RVL_OP_ADD, F, 7, 9), instr(RVL_OP_CAST, h, 10)};
    std::vector<Leaf> leaves(ins.size());
    auto bits = [&](float x) { return f16 ? rvl::f16_bits_from(x) : rvl::bf16_bits_from(x); };
    auto value = [&](uint16_t b) { return f16 ? rvl::f32_from_f16_bits(b) : rvl::f32_from_bf16_bits(b); };
    for (int64_t i = 0; i < n; ++i) {
      leaves[0].halves.push_back(bits(static_cast<float>(i % 200 - 100) / 17.0f));
      leaves[5].halves.push_back(bits(static_cast<float>(i % 7) - 3.0f));
      leaves[8].halves.push_back(bits(static_cast<float>(i % 11) * 0.25f));
    }
    leaves[2] = {{}, {static_cast<float>(1.0 / std::log(2.0))}, true};
    BOOST_REQUIRE(tbbcpu::fused_loop_fits(ins.data(), static_cast<int32_t>(ins.size()), true));
    const double rel = f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier) {
      const std::vector<uint16_t> got = fused(tier, 32, ins, leaves, n, 1);
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = static_cast<size_t>(i);
        const double want = std::exp(double(value(leaves[0].halves[k]))) * value(leaves[5].halves[k]) + value(leaves[8].halves[k]);
        const double g = value(got[k]);
        if (f16 && std::fabs(want) > 65504.0) {  // overflows f16: rounds to infinity of its sign
          BOOST_REQUIRE_MESSAGE(std::isinf(g) && (g > 0) == (want > 0), "tier " << tier << " element " << i);
          continue;
        }
        BOOST_REQUIRE_MESSAGE(std::fabs(g - want) <= rel * std::fabs(want) + 1e-6,
                              (f16 ? "f16" : "bf16") << " tier " << tier << " element " << i << ": " << g
                                                     << " against " << want);
      }
    }
  }
}

// A single value widened and the output of single values rounded once, filled over the block.
BOOST_AUTO_TEST_CASE(single_values_are_converted_once) {
  const int32_t F = RVL_DTYPE_F32, H = RVL_DTYPE_BF16;
  const std::vector<rvl_instruction> ins = {instr(RVL_OP_LOAD, H), instr(RVL_OP_CAST, F, 0), instr(RVL_OP_CONST, F),
                                            instr(RVL_OP_MUL, F, 1, 2), instr(RVL_OP_CAST, H, 3)};
  std::vector<Leaf> leaves(ins.size());
  leaves[0] = {{rvl::bf16_bits_from(3.0f)}, {}, true};
  leaves[2] = {{}, {1.0f / 3.0f}, true};
  BOOST_REQUIRE(tbbcpu::fused_loop_fits(ins.data(), 5, true));
  const std::vector<uint16_t> got = fused(tbbcpu::simd_tier_supported(), 64, ins, leaves, 77, 0);
  const uint16_t want = rvl::bf16_bits_from(3.0f * (1.0f / 3.0f));
  for (uint16_t b : got) BOOST_REQUIRE_EQUAL(b, want);
}

// What the half form still refuses: a half value read by an f32 op, a rounding in the middle,
// a CAST between two half types.
BOOST_AUTO_TEST_CASE(programs_the_half_form_refuses) {
  const int32_t F = RVL_DTYPE_F32, H = RVL_DTYPE_F16;
  const std::vector<rvl_instruction> mid = {instr(RVL_OP_LOAD, H), instr(RVL_OP_CAST, F, 0), instr(RVL_OP_NEG, F, 1),
                                            instr(RVL_OP_CAST, H, 2), instr(RVL_OP_CAST, F, 3), instr(RVL_OP_NEG, F, 4)};
  BOOST_CHECK(!tbbcpu::fused_loop_fits(mid.data(), 6, true));
  const std::vector<rvl_instruction> raw = {instr(RVL_OP_LOAD, H), instr(RVL_OP_LOAD, F), instr(RVL_OP_ADD, F, 0, 1),
                                            instr(RVL_OP_NEG, F, 2)};
  BOOST_CHECK(!tbbcpu::fused_loop_fits(raw.data(), 4, true));
  const std::vector<rvl_instruction> two = {instr(RVL_OP_LOAD, H), instr(RVL_OP_CAST, RVL_DTYPE_BF16, 0),
                                            instr(RVL_OP_CAST, F, 1), instr(RVL_OP_NEG, F, 2)};
  BOOST_CHECK(!tbbcpu::fused_loop_fits(two.data(), 4, true));
}

BOOST_AUTO_TEST_SUITE_END()
