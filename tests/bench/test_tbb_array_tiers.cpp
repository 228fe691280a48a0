// The oneTBB plugin's array loops in every instruction-set tier this CPU runs (Note [Array loops
// per ISA], plugins/tbb_cpu/array_ops.cpp): each (op, dtype) loop of the AVX2 and AVX-512 tables
// must give the same bits as the baseline (SSE2) loop (a NaN may differ in its payload), over random bit patterns (NaN, infinities,
// subnormals and signed zeros among them), at lengths that leave every vector tail and at
// misaligned starts. The baseline loop itself is checked against plain C++ for the f32 rows
// whose result IEEE fixes exactly (and end to end by ravel-conformance). A tier the CPU lacks is
// skipped (and said so); CI machines without AVX-512 still check the AVX2 tier.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

#include "array_ops.hpp"
#include "dtype_ops.hpp"
#include "half_convert.hpp"
#include "half_fused.hpp"

namespace {

uint64_t next(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return s >> 11;
}

// Random bytes for n values of `size` bytes; floats get a share of special values.
std::vector<uint8_t> random_values(int32_t dt, int64_t n, uint64_t& seed) {
  const size_t size = rvl::dtype_size(dt);
  std::vector<uint8_t> v(static_cast<size_t>(n) * size + 64);
  for (auto& b : v) b = static_cast<uint8_t>(next(seed));
  if (dt == RVL_DTYPE_BOOL)
    for (auto& b : v) b &= 1;  // the evaluator hands loops 0/1 bytes
  if (dt == RVL_DTYPE_F32) {
    const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3.5f, 2.0f, 200.0f, -200.0f};
    auto* f = reinterpret_cast<float*>(v.data());
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t r = next(seed) % 16;
      if (r < 11) f[i] = special[r];
      else if (r < 14) f[i] = static_cast<float>(static_cast<int64_t>(next(seed) % 2001) - 1000) / 37.0f;
    }
  }
  if (dt == RVL_DTYPE_F64) {
    auto* f = reinterpret_cast<double*>(v.data());
    for (int64_t i = 0; i < n; ++i)
      if (next(seed) % 2) f[i] = static_cast<double>(static_cast<int64_t>(next(seed) % 2001) - 1000) / 37.0;
  }
  return v;
}

// Equal bytes, except that two NaNs of a float result are equal whatever their bits: a
// signalling NaN input comes out of the baseline f64 TRUNC (a libm call) as it went in, and out
// of ROUNDPD quieted (found by this test; the tiers differed so before the AVX-512 one), and
// which of two NaN operands an ADD or MUL returns depends on the operand order the compiler
// gives the commutative instruction (found for the fused bf16 loops, whose narrowing keeps the
// payload's top bits). Every other value, -0.0 and the infinities included, must match bit for
// bit.
bool same_bits(int32_t dt, bool bool_out, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (got.size() != want.size()) return false;
  if (dt == RVL_DTYPE_BF16) {  // the same rule on bf16 bits
    for (size_t i = 0; i + 2 <= got.size(); i += 2) {
      uint16_t g, w;
      std::memcpy(&g, &got[i], 2), std::memcpy(&w, &want[i], 2);
      const bool both_nan = (g & 0x7FFF) > 0x7F80 && (w & 0x7FFF) > 0x7F80;
      if (g != w && !both_nan) return false;
    }
    return true;
  }
  if (bool_out || (dt != RVL_DTYPE_F32 && dt != RVL_DTYPE_F64)) return got == want;
  const size_t size = rvl::dtype_size(dt);
  for (size_t i = 0; i + size <= got.size(); i += size) {
    if (std::memcmp(&got[i], &want[i], size) == 0) continue;
    double g, w;
    if (dt == RVL_DTYPE_F32) {
      float gf, wf;
      std::memcpy(&gf, &got[i], 4), std::memcpy(&wf, &want[i], 4);
      g = gf, w = wf;
    } else {
      std::memcpy(&g, &got[i], 8), std::memcpy(&w, &want[i], 8);
    }
    if (!(std::isnan(g) && std::isnan(w))) return false;
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_tier_gives_the_baseline_bits) {
  const int top = tbbcpu::simd_tier_supported();
  if (top < tbbcpu::kSimdAvx512) std::printf("note: no AVX-512 on this CPU; its tier is not checked here\n");
  if (top < tbbcpu::kSimdAvx2) std::printf("note: no AVX2 on this CPU; only the baseline loops exist\n");
  BOOST_CHECK(tbbcpu::array_kernel_at(top + 1, RVL_OP_ADD, RVL_DTYPE_F32) == nullptr);
  uint64_t seed = 12345;
  int checked = 0;
  for (int op = 0; op < RVL_OP_COUNT_; ++op) {
    for (int dt = 0; dt < tbbcpu::kTbbDTypeCount; ++dt) {
      tbbcpu::ArrayFn base = tbbcpu::array_kernel_at(tbbcpu::kSimdPortable, op, dt);
      if (base == nullptr) continue;
      const bool bool_out = rvl::op_info(op).result == rvl::OpResult::Bool;
      const bool select = rvl::op_info(op).accepts == rvl::OpAccepts::Select;
      const size_t out_size = bool_out ? 1 : rvl::dtype_size(dt);
      for (int64_t n : {1, 7, 16, 33, 1023}) {
        for (int64_t skew : {0, 1, 3}) {  // elements from the start: misaligned loads and stores
          std::vector<uint8_t> a = random_values(select ? int32_t{RVL_DTYPE_BOOL} : dt, n + skew, seed);
          std::vector<uint8_t> b = random_values(dt, n + skew, seed);
          std::vector<uint8_t> c = random_values(dt, n + skew, seed);
          const size_t sa = select ? 1 : rvl::dtype_size(dt), sv = rvl::dtype_size(dt);
          std::vector<uint8_t> want(static_cast<size_t>(n + skew) * out_size, 0xAB);
          base(want.data() + skew * out_size, a.data() + skew * sa, b.data() + skew * sv, c.data() + skew * sv, n);
          for (int tier = tbbcpu::kSimdAvx2; tier <= top; ++tier) {
            tbbcpu::ArrayFn fn = tbbcpu::array_kernel_at(tier, op, dt);
            BOOST_REQUIRE(fn != nullptr);
            std::vector<uint8_t> got(want.size(), 0xAB);
            fn(got.data() + skew * out_size, a.data() + skew * sa, b.data() + skew * sv, c.data() + skew * sv, n);
            if (!same_bits(dt, bool_out, got, want))
              BOOST_ERROR("op " << rvl::op_info(op).name << " dtype " << dt << " tier " << tier << " n " << n
                                << " skew " << skew << ": bits differ from the baseline loop");
            ++checked;
          }
        }
      }
    }
  }
  if (top >= tbbcpu::kSimdAvx2) BOOST_CHECK_GT(checked, 100);
}

// The baseline loops against plain C++ where IEEE fixes the f32 result (NaN compared as NaN).
BOOST_AUTO_TEST_CASE(baseline_f32_loops_against_plain_cpp) {
  uint64_t seed = 99;
  const int64_t n = 1001;
  std::vector<uint8_t> a = random_values(RVL_DTYPE_F32, n, seed), b = random_values(RVL_DTYPE_F32, n, seed);
  const auto* x = reinterpret_cast<const float*>(a.data());
  const auto* y = reinterpret_cast<const float*>(b.data());
  struct Case {
    int op;
    float (*f)(float, float);
  };
  const Case cases[] = {
      {RVL_OP_ADD, [](float p, float q) { return p + q; }},
      {RVL_OP_MUL, [](float p, float q) { return p * q; }},
      {RVL_OP_NEG, [](float p, float) { return -p; }},
      {RVL_OP_RECIP, [](float p, float) { return 1.0f / p; }},
      {RVL_OP_SQRT, [](float p, float) { return std::sqrt(p); }},
  };
  for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier) {
    for (const Case& k : cases) {
      std::vector<float> got(n);
      tbbcpu::array_kernel_at(tier, k.op, RVL_DTYPE_F32)(got.data(), x, y, nullptr, n);
      for (int64_t i = 0; i < n; ++i) {
        const float want = k.f(x[i], y[i]);
        const bool same = std::isnan(want) ? std::isnan(got[i]) : std::memcmp(&want, &got[i], 4) == 0;
        if (!same) {
          BOOST_ERROR("op " << rvl::op_info(k.op).name << " tier " << tier << " element " << i << ": " << got[i]
                            << " != " << want);
          break;
        }
      }
    }
  }
}

// Note [Array loops with a per-row scalar]: op(a[i], k) and op(k, b[i]) give the bits of the
// baseline array loop over the scalar spread into an array, in every tier, f32 and f64, with
// special values as the scalar too.
BOOST_AUTO_TEST_CASE(scalar_operand_loops_give_the_filled_array_bits) {
  uint64_t seed = 777;
  int checked = 0;
  for (int op = 0; op < RVL_OP_COUNT_; ++op) {
    for (int32_t dt : {int32_t{RVL_DTYPE_F32}, int32_t{RVL_DTYPE_F64}}) {
      tbbcpu::ArrayFn base = tbbcpu::array_kernel_at(tbbcpu::kSimdPortable, op, dt);
      const bool binary = base && rvl::op_info(op).arity == 2 && rvl::op_info(op).result == rvl::OpResult::Same;
      for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier) {
        for (bool scalar_a : {false, true}) {
          tbbcpu::ScalarFn fn = tbbcpu::scalar_kernel_at(tier, op, dt, scalar_a);
          if (!binary) {
            BOOST_CHECK(fn == nullptr);
            continue;
          }
          BOOST_REQUIRE(fn != nullptr);
          const size_t size = rvl::dtype_size(dt);
          for (int64_t n : {1, 15, 17, 1023}) {
            std::vector<uint8_t> full = random_values(dt, n, seed), k = random_values(dt, 1, seed);
            std::vector<uint8_t> spread(static_cast<size_t>(n) * size);
            for (int64_t i = 0; i < n; ++i) std::memcpy(&spread[static_cast<size_t>(i) * size], k.data(), size);
            std::vector<uint8_t> want(static_cast<size_t>(n) * size), got(want.size());
            if (scalar_a) base(want.data(), spread.data(), full.data(), nullptr, n);
            else base(want.data(), full.data(), spread.data(), nullptr, n);
            fn(got.data(), scalar_a ? k.data() : full.data(), scalar_a ? full.data() : k.data(), n);
            if (!same_bits(dt, false, got, want))
              BOOST_ERROR("op " << rvl::op_info(op).name << " dtype " << dt << " tier " << tier << " scalar "
                                << (scalar_a ? "a" : "b") << " n " << n << ": bits differ");
            ++checked;
          }
        }
      }
    }
  }
  BOOST_CHECK_GT(checked, 50);
}

// Note [Casts folded into their readers]: every fused bf16 loop (operands widened, result
// narrowed, in each combination) against the unfused passes: the vector conversions of
// half_convert.cpp around the baseline array loop, bit for bit, in every tier, over random bf16
// patterns (NaN, infinities and subnormals among them) and odd lengths.
BOOST_AUTO_TEST_CASE(fused_bf16_loops_give_the_unfused_bits) {
  uint64_t seed = 4242;
  int checked = 0;
  for (int op = 0; op < RVL_OP_COUNT_; ++op) {
    tbbcpu::ArrayFn base = tbbcpu::array_kernel_at(tbbcpu::kSimdPortable, op, RVL_DTYPE_F32);
    const int arity = rvl::op_info(op).arity;
    const bool fusable = base && (arity == 1 || arity == 2) && rvl::op_info(op).result == rvl::OpResult::Same &&
                         rvl::op_info(op).accepts != rvl::OpAccepts::Select;
    for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier) {
      for (int v = 1; v < 8; ++v) {
        const bool wa = v & 1, wb = (v >> 1) & 1, narrow = (v >> 2) & 1;
        tbbcpu::HalfFusedFn fn = tbbcpu::bf16_fused_kernel_at(tier, op, wa, wb, narrow);
        if (!fusable || (wb && arity < 2)) {
          BOOST_CHECK(fn == nullptr);
          continue;
        }
        BOOST_REQUIRE(fn != nullptr);
        for (int64_t n : {1, 15, 33, 1023}) {
          std::vector<uint8_t> ha = random_values(RVL_DTYPE_U16, n, seed), hb = random_values(RVL_DTYPE_U16, n, seed);
          std::vector<uint8_t> fa = random_values(RVL_DTYPE_F32, n, seed), fb = random_values(RVL_DTYPE_F32, n, seed);
          // The unfused passes: widen, the array loop, narrow.
          std::vector<float> xa(static_cast<size_t>(n)), xb(static_cast<size_t>(n)), r(static_cast<size_t>(n));
          if (wa) tbbcpu::bf16_to_f32(xa.data(), reinterpret_cast<const uint16_t*>(ha.data()), n);
          else std::memcpy(xa.data(), fa.data(), static_cast<size_t>(n) * 4);
          if (wb) tbbcpu::bf16_to_f32(xb.data(), reinterpret_cast<const uint16_t*>(hb.data()), n);
          else std::memcpy(xb.data(), fb.data(), static_cast<size_t>(n) * 4);
          base(r.data(), xa.data(), xb.data(), nullptr, n);
          std::vector<uint8_t> want(static_cast<size_t>(n) * (narrow ? 2 : 4));
          if (narrow) tbbcpu::f32_to_bf16(reinterpret_cast<uint16_t*>(want.data()), r.data(), n);
          else std::memcpy(want.data(), r.data(), want.size());
          std::vector<uint8_t> got(want.size());
          fn(got.data(), wa ? ha.data() : fa.data(), wb ? hb.data() : fb.data(), n);
          if (!same_bits(narrow ? int32_t{RVL_DTYPE_BF16} : int32_t{RVL_DTYPE_F32}, false, got, want))
            BOOST_ERROR("op " << rvl::op_info(op).name << " tier " << tier << " widen a " << wa << " widen b " << wb
                              << " narrow " << narrow << " n " << n << ": bits differ from the unfused passes");
          ++checked;
        }
      }
    }
  }
  BOOST_CHECK_GT(checked, 100);
}
