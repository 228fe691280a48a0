// Array loops that widen bf16 operands and narrow to a bf16 result in the same pass
// (Note [Casts folded into their readers]).
#include "half_fused.hpp"

#include "array_ops.hpp"
#include "array_scalar.hpp"

#include <array>
#include <cstring>
#include <utility>

namespace tbbcpu {
namespace {

using array_detail::scalar;
using array_detail::supported;

// The same conversions as half_convert.cpp's bf16 loops (exact widening; round to nearest even
// with a NaN kept quiet), written per element so that they vectorise inside the op's loop.
[[gnu::always_inline]] inline float widen_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
[[gnu::always_inline]] inline uint16_t narrow_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : rounded);
}

template <bool W>
[[gnu::always_inline]] inline float operand(const void* p, int64_t i) {
  if constexpr (W) return widen_bf16(static_cast<const uint16_t*>(p)[i]);
  else return static_cast<const float*>(p)[i];
}

template <int OP, bool WA, bool WB, bool NARROW>
[[gnu::always_inline]] inline void fused_body(void* dst, const void* a, const void* b, int64_t n) {
  constexpr int DT = RVL_DTYPE_F32;
  if constexpr (NARROW) {
    auto* __restrict d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = narrow_bf16(scalar<OP, DT>(operand<WA>(a, i), rvl::op_info(OP).arity == 2 ? operand<WB>(b, i) : 0.0f));
  } else {
    auto* __restrict d = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = scalar<OP, DT>(operand<WA>(a, i), rvl::op_info(OP).arity == 2 ? operand<WB>(b, i) : 0.0f);
  }
}

template <int OP, bool WA, bool WB, bool NARROW>
void fused_loop(void* dst, const void* a, const void* b, int64_t n) {
  fused_body<OP, WA, WB, NARROW>(dst, a, b, n);
}
#if defined(__x86_64__) || defined(__i386__)
#define RVL_TBB_HAVE_FUSED_CLONES 1
template <int OP, bool WA, bool WB, bool NARROW>
__attribute__((target("avx2"))) void fused_loop_avx2(void* dst, const void* a, const void* b, int64_t n) {
  fused_body<OP, WA, WB, NARROW>(dst, a, b, n);
}
template <int OP, bool WA, bool WB, bool NARROW>
__attribute__((target(RVL_TBB_AVX512_TARGET))) void fused_loop_avx512(void* dst, const void* a, const void* b,
                                                                        int64_t n) {
  fused_body<OP, WA, WB, NARROW>(dst, a, b, n);
}
#endif

// f32 ops with one or two operands and an f32 result (not WHERE, not the comparisons).
constexpr bool fusable(int op) {
  return supported(op, RVL_DTYPE_F32) && rvl::op_info(op).result == rvl::OpResult::Same &&
         rvl::op_info(op).accepts != rvl::OpAccepts::Select &&
         (rvl::op_info(op).arity == 1 || rvl::op_info(op).arity == 2);
}

template <int TIER, int OP, int V>  // V: bit 0 widen a, bit 1 widen b, bit 2 narrow
constexpr HalfFusedFn pick() {
  constexpr bool WA = V & 1, WB = (V >> 1) & 1, NARROW = (V >> 2) & 1;
  if constexpr (!fusable(OP) || (WB && rvl::op_info(OP).arity < 2)) return nullptr;
#ifdef RVL_TBB_HAVE_FUSED_CLONES
  else if constexpr (TIER == kSimdAvx512) return &fused_loop_avx512<OP, WA, WB, NARROW>;
  else if constexpr (TIER == kSimdAvx2) return &fused_loop_avx2<OP, WA, WB, NARROW>;
#endif
  else return &fused_loop<OP, WA, WB, NARROW>;
}
using Variants = std::array<HalfFusedFn, 8>;
template <int TIER, int OP, size_t... V>
constexpr Variants variants(std::index_sequence<V...>) {
  return {pick<TIER, OP, static_cast<int>(V)>()...};
}
template <int TIER, size_t... O>
constexpr auto make_table(std::index_sequence<O...>) {
  return std::array<Variants, RVL_OP_COUNT_>{variants<TIER, static_cast<int>(O)>(std::make_index_sequence<8>{})...};
}
constexpr std::array<std::array<Variants, RVL_OP_COUNT_>, 3> kTable = {
    make_table<kSimdPortable>(std::make_index_sequence<RVL_OP_COUNT_>{}),
    make_table<kSimdAvx2>(std::make_index_sequence<RVL_OP_COUNT_>{}),
    make_table<kSimdAvx512>(std::make_index_sequence<RVL_OP_COUNT_>{})};

}  // namespace

HalfFusedFn bf16_fused_kernel_at(int tier, int32_t op, bool widen_a, bool widen_b, bool narrow) {
  if (op < 0 || op >= RVL_OP_COUNT_ || tier < kSimdPortable || tier > simd_tier_supported()) return nullptr;
  if (!widen_a && !widen_b && !narrow) return nullptr;  // the plain array loop
  return kTable[tier][op][(widen_a ? 1 : 0) | (widen_b ? 2 : 0) | (narrow ? 4 : 0)];
}

HalfFusedFn bf16_fused_kernel(int32_t op, bool widen_a, bool widen_b, bool narrow) {
  return bf16_fused_kernel_at(simd_tier(), op, widen_a, widen_b, narrow);
}

}  // namespace tbbcpu
