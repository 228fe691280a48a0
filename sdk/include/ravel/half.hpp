// The 16-bit float formats (IEEE binary16 "f16" and bfloat16 "bf16"): their bit conversions to
// and from f32/f64, written once for the core, the reference interpreter and every plugin
// (Note [Half conversions]). Header-only, C++17, no dependencies beyond <cstdint>/<cstring>.
//
// Note [Half conversions]
// Narrowing (f32 or f64 -> f16 or bf16) rounds to nearest, ties to even, in one step from the
// source (f64 -> f16 never goes through f32, which would round twice: 1 + 2^-11 + 2^-40 would
// land on the tie and go to 1 instead of 1 + 2^-10). Values beyond the format's largest finite
// number by half an ulp or more become infinity, as IEEE-754 and every hardware converter do;
// infinities stay infinities; a NaN stays a NaN of the same sign, quiet, keeping the top bits of
// its payload (F16C's VCVTPS2PH and PyTorch's c10::BFloat16 do the same). Subnormals are kept in
// both directions (no flush to zero). Widening (f16 or bf16 -> f32) is exact.
// One generic routine (narrow_float_bits) covers all four narrowings so that there is one piece
// of rounding code to get right; tests/core/test_half.cpp checks it against an independent
// bit-by-bit rounding over every f16/bf16 neighbourhood and against values recorded from NumPy.
#pragma once

#include <cstdint>
#include <cstring>

namespace rvl {

namespace half_detail {

// The bits of an IEEE float with SE exponent and SM mantissa bits (in the low SE+SM+1 bits of
// `x`), rounded to nearest-even into one with DE exponent and DM mantissa bits (DM < SM).
template <int SE, int SM, int DE, int DM>
constexpr uint64_t narrow_float_bits(uint64_t x) noexcept {
  static_assert(DM < SM && DE <= SE, "narrowing only");
  constexpr int64_t kSrcBias = (int64_t{1} << (SE - 1)) - 1;
  constexpr int64_t kDstBias = (int64_t{1} << (DE - 1)) - 1;
  constexpr uint64_t kSrcExpMax = (uint64_t{1} << SE) - 1;
  constexpr uint64_t kDstExpMax = (uint64_t{1} << DE) - 1;
  constexpr uint64_t kSrcMant = (uint64_t{1} << SM) - 1;
  const uint64_t sign = ((x >> (SE + SM)) & 1u) << (DE + DM);
  const uint64_t e = (x >> SM) & kSrcExpMax;
  const uint64_t m = x & kSrcMant;
  const uint64_t inf = sign | (kDstExpMax << DM);
  if (e == kSrcExpMax)  // infinity, or NaN: quiet, with the payload's top bits
    return m == 0 ? inf : inf | (uint64_t{1} << (DM - 1)) | (m >> (SM - DM));
  if (e == 0 && m == 0) return sign;
  // value = sig * 2^(unbiased - SM); a source subnormal needs no normalising: it keeps e = 1's
  // scale with no implicit bit, and the composition below treats it the same way.
  const uint64_t sig = e == 0 ? m : (m | (uint64_t{1} << SM));
  const int64_t unbiased = (e == 0 ? 1 : static_cast<int64_t>(e)) - kSrcBias;
  const int64_t de = unbiased + kDstBias;  // the destination's biased exponent if normal
  const int64_t shift = (SM - DM) + (de < 1 ? 1 - de : 0);
  if (shift >= SM + 2) return sign;  // below half the smallest subnormal: +-0
  uint64_t q = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  // q carries the implicit bit for a normal result, so adding it to (de - 1) << DM yields the
  // exponent field; a rounding carry moves into the exponent (and up to infinity) by itself.
  const uint64_t mag = (de >= 1 ? static_cast<uint64_t>(de - 1) << DM : 0) + q;
  return mag >= (kDstExpMax << DM) ? inf : sign | mag;
}

inline uint32_t bits_of(float f) noexcept {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline uint64_t bits_of(double f) noexcept {
  uint64_t u;
  std::memcpy(&u, &f, 8);
  return u;
}
inline float float_of(uint32_t u) noexcept {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace half_detail

// f32/f64 -> f16 bits (round to nearest even, overflow to infinity, NaN kept).
inline uint16_t f16_bits_from(float f) noexcept {
  return static_cast<uint16_t>(half_detail::narrow_float_bits<8, 23, 5, 10>(half_detail::bits_of(f)));
}
inline uint16_t f16_bits_from(double f) noexcept {
  return static_cast<uint16_t>(half_detail::narrow_float_bits<11, 52, 5, 10>(half_detail::bits_of(f)));
}
// f32/f64 -> bf16 bits (the same rules).
inline uint16_t bf16_bits_from(float f) noexcept {
  return static_cast<uint16_t>(half_detail::narrow_float_bits<8, 23, 8, 7>(half_detail::bits_of(f)));
}
inline uint16_t bf16_bits_from(double f) noexcept {
  return static_cast<uint16_t>(half_detail::narrow_float_bits<11, 52, 8, 7>(half_detail::bits_of(f)));
}

// f16 bits -> f32 (exact).
inline float f32_from_f16_bits(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return half_detail::float_of(sign | 0x7f800000u | (m << 13));
  if (e != 0) return half_detail::float_of(sign | ((e + 112u) << 23) | (m << 13));
  // zero or subnormal: m * 2^-24, exact in f32
  const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}
// bf16 bits -> f32 (exact: bf16 is the top half of an f32).
inline float f32_from_bf16_bits(uint16_t b) noexcept { return half_detail::float_of(static_cast<uint32_t>(b) << 16); }

// Storage types for the element of an f16 / bf16 tensor: two bytes, converted explicitly.
// Arithmetic on them is done in float (Note [Half arithmetic] in docs/dtypes.md).
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f) noexcept : bits(f16_bits_from(f)) {}
  explicit Float16(double f) noexcept : bits(f16_bits_from(f)) {}
  static Float16 from_bits(uint16_t b) noexcept {
    Float16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const noexcept { return f32_from_f16_bits(bits); }
  explicit operator double() const noexcept { return f32_from_f16_bits(bits); }
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) noexcept : bits(bf16_bits_from(f)) {}
  explicit BFloat16(double f) noexcept : bits(bf16_bits_from(f)) {}
  static BFloat16 from_bits(uint16_t b) noexcept {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const noexcept { return f32_from_bf16_bits(bits); }
  explicit operator double() const noexcept { return f32_from_bf16_bits(bits); }
};
static_assert(sizeof(Float16) == 2 && sizeof(BFloat16) == 2, "16-bit storage");

}  // namespace rvl
