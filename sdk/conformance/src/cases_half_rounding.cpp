// f16 and bf16 rounding checked exactly (threshold 0): the tolerance-based cases elsewhere
// (docs/dtypes.md, "Tolerances") would let a converter that rounds a tie the wrong way, flushes
// subnormals or overflows one ulp late pass, since each is one unit in the last place of a few
// elements. Every device must round as <ravel/half.hpp> does (decision 40), so these compare
// values, not errors (NaN only as NaN: the harness does not compare payloads):
//  - f32 -> half and f64 -> half at the tie between neighbouring halves, one source ulp either
//    side of it, and in the subnormal and overflow ranges (65504, 65519.99..., 65520, bf16's
//    largest plus half an ulp), with infinities, NaN and -0;
//  - every one of the 65,536 patterns of each half widened to f32 (exact);
//  - a fused chain on halves, (x + 1) * x * 3, whose single rounding differs from rounding
//    after each op on many of its elements (no multiply feeds an add: a device compiler that
//    contracts a * b + c into an FMA could not change it).
// Element counts are odd (no vector loop covers them exactly).
#include "kernel_case.hpp"

#include <ravel/half.hpp>

#include <cmath>
#include <cstring>
#include <limits>

namespace rvl::conformance {
namespace {

using ref::fval;
using ref::Value;

double half_value(int32_t dt, uint16_t bits) {
  return dt == RVL_DTYPE_F16 ? rvl::f32_from_f16_bits(bits) : rvl::f32_from_bf16_bits(bits);
}

// Values around the ties of `half` (sampled over the whole range), in the source precision
// `src` (f32 or f64), plus the format's edges.
std::vector<Value> tie_values(int32_t half, int32_t src) {
  std::vector<Value> v;
  auto near = [&](double x) {
    if (src == RVL_DTYPE_F32) {
      const float f = static_cast<float>(x);
      v.push_back(fval(std::nextafter(f, -INFINITY)));
      v.push_back(fval(f));
      v.push_back(fval(std::nextafter(f, INFINITY)));
    } else {
      v.push_back(fval(std::nextafter(x, -INFINITY)));
      v.push_back(fval(x));
      v.push_back(fval(std::nextafter(x, INFINITY)));
    }
  };
  for (uint32_t b = 0; b < 0x7c00u; b += (b < 0x500u ? 13u : 97u)) {  // subnormals densely
    const uint32_t bits = half == RVL_DTYPE_F16 ? b : (b << 1) | (b & 1u);  // bf16: all exponents
    for (uint32_t sign : {0u, 0x8000u}) {
      const double lo = half_value(half, uint16_t(bits | sign)), hi = half_value(half, uint16_t((bits + 1) | sign));
      if (std::isfinite(lo) && std::isfinite(hi)) near((lo + hi) / 2);  // exact in f32 and f64
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  const double max = half == RVL_DTYPE_F16 ? 65504.0 : std::ldexp(255.0 / 128.0, 127);
  const double overflow = half == RVL_DTYPE_F16 ? 65520.0 : std::ldexp(511.0 / 256.0, 127);
  for (double x : {max, overflow, -overflow, 1e-45, -1e-45, 0.0, -0.0, 1.0, -2.5})
    near(x);
  if (src == RVL_DTYPE_F64) near(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40));  // not via f32
  for (double x : {inf, -inf, std::nan(""), -std::nan("")}) v.push_back(fval(x));
  if (v.size() % 2 == 0) v.push_back(fval(0.75));  // odd
  return v;
}

void register_ties() {
  for (int32_t src : {RVL_DTYPE_F32, RVL_DTYPE_F64})
    for (int32_t half : {RVL_DTYPE_F16, RVL_DTYPE_BF16})
      add_case("half_rounding", "CAST/" + dtype_str(src) + "->" + dtype_str(half) + "/ties",
               [=](Measure& m) {
        const std::vector<Value> vals = tie_values(half, src);
        const int64_t n = static_cast<int64_t>(vals.size());
        simple_program({n}, {{make_values(src, vals), contiguous({n})}},
                       {load(src, 0), ins(RVL_OP_CAST, half, 0)}, 0.0).run(m);
      });
}

void register_widening() {
  for (int32_t half : {RVL_DTYPE_F16, RVL_DTYPE_BF16})
    add_case("half_rounding", "CAST/" + dtype_str(half) + "->f32/every_pattern", [=](Measure& m) {
      const int64_t n = 65536 + 1;  // every pattern, and one more +0
      ref::HostBuffer in(half, n);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t bits = static_cast<uint16_t>(i);
        std::memcpy(in.bytes.data() + 2 * i, &bits, 2);
      }
      simple_program({n}, {{std::move(in), contiguous({n})}},
                     {load(half, 0), ins(RVL_OP_CAST, RVL_DTYPE_F32, 0)}, 0.0).run(m);
    });
}

void register_chain() {
  for (int32_t half : {RVL_DTYPE_F16, RVL_DTYPE_BF16})
    add_case("half_rounding", "fused/" + dtype_str(half) + "/rounds_once", [=](Measure& m) {
      const int64_t n = 4099;
      simple_program({n}, {{make_data(half, n, 25, Data::Mixed), contiguous({n})}},
                     {load(half, 0), const_f(half, 1.0), ins(RVL_OP_ADD, half, 0, 1), ins(RVL_OP_MUL, half, 2, 0),
                      const_f(half, 3.0), ins(RVL_OP_MUL, half, 3, 4)},
                     0.0).run(m);
    });
}

}  // namespace

void register_half_rounding_cases() {
  register_ties();
  register_widening();
  register_chain();
}

}  // namespace rvl::conformance
