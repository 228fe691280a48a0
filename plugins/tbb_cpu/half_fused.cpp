// Array loops that widen bf16 operands and narrow to a bf16 result in the same pass, and the
// evaluator's plan of which casts they replace (Note [Casts folded into their readers]).
#include "half_fused.hpp"

#include "array_ops.hpp"
#include "array_scalar.hpp"
#include "evaluator.hpp"
#include "slot_plan.hpp"

#include <ravel/backend.hpp>

#include <algorithm>
#include <cstdlib>
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

// Note [Casts folded into their readers] (half_fused.hpp): which bf16 -> f32 CASTs hand their
// readers the bf16 values, and which op writes the final CAST's bf16 values. Only for programs
// of at most kFnCache instructions and without one-value-per-row inputs (Note [One value per
// block] keeps its own scalars); nothing is set, and nothing zeroed, for programs without bf16.
// RAVEL_TBB_NO_HALF_FOLD=1 keeps every cast its own pass (the comparison in docs/performance.md).
void Evaluator::plan_half_folds() {
  static const bool off = [] {
    const char* e = std::getenv("RAVEL_TBB_NO_HALF_FOLD");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  if (off || any_per_row_ || n_ins_ > kFnCache) return;
  auto widening = [&](const rvl_instruction& I) {
    return I.op == RVL_OP_CAST && I.dtype == RVL_DTYPE_F32 && ins_[I.src[0]].dtype == RVL_DTYPE_BF16;
  };
  bool any = false;
  for (int j = 0; j < n_ins_ && !any; ++j) any = widening(ins_[j]) || (ins_[j].op == RVL_OP_CAST && ins_[j].dtype == RVL_DTYPE_BF16);
  if (!any) return;
  // An f32 op with a fused loop (the predicate bf16_fused_kernel answers).
  auto fusable = [](const rvl_instruction& I) {
    return I.dtype == RVL_DTYPE_F32 && bf16_fused_kernel(I.op, true, false, false) != nullptr;
  };
  int16_t readers[kFnCache] = {};
  bool all_fusable[kFnCache];
  std::fill(all_fusable, all_fusable + n_ins_, true);
  for (int j = 0; j < n_ins_; ++j)
    for (int k = 0; k < 3; ++k)
      if (const int32_t q = ins_[j].src[k]; q >= 0) ++readers[q], all_fusable[q] = all_fusable[q] && fusable(ins_[j]);
  const int last = n_ins_ - 1;
  for (int j = 0; j < n_ins_; ++j) folded_[j] = j != last && widening(ins_[j]) && readers[j] > 0 && all_fusable[j];
  const rvl_instruction& L = ins_[last];
  if (reduce_op_ == RVL_REDUCE_NONE && L.op == RVL_OP_CAST && L.dtype == RVL_DTYPE_BF16 && fusable(ins_[L.src[0]]) &&
      readers[L.src[0]] == 1)
    narrow_src_ = L.src[0];
  for (int j = 0; j < n_ins_; ++j) {
    hfn_[j] = nullptr;
    if (!fusable(ins_[j])) continue;
    const int32_t a = ins_[j].src[0], b = rvl::op_info(ins_[j].op).arity == 2 ? ins_[j].src[1] : -1;
    const bool wa = folded_[a], wb = b >= 0 && folded_[b];
    if (wa || wb || j == narrow_src_) hfn_[j] = bf16_fused_kernel(ins_[j].op, wa, wb, j == narrow_src_);
    if (hfn_[j] == nullptr && (wa || wb || j == narrow_src_)) rvl::fail(RVL_STATUS_INTERNAL, "no fused bf16 loop");
  }
  // A folded CAST's readers read its source: the slots are planned again with the sources
  // redirected so that the source's slot lives until its last reader (Note [Slot plan]). If that
  // needs more slots than the block was sized for, nothing is folded.
  rvl_instruction code[kFnCache];
  for (int j = 0; j < n_ins_; ++j) {
    code[j] = ins_[j];
    for (int k = 0; k < 3; ++k)
      if (const int32_t q = code[j].src[k]; q >= 0 && folded_[q]) code[j].src[k] = ins_[q].src[0];
  }
  uint16_t slot[kFnCache];
  bool owner[kFnCache];
  const int32_t n = plan_slots(code, n_ins_, slot, owner);
  if (n > n_slots_) {
    narrow_src_ = -1;
    return;
  }
  n_slots_ = n;
  for (int j = 0; j < n_ins_; ++j) slot_[j] = slot[j], const_owner_[j] = owner[j];
  half_folds_ = true;
}

}  // namespace tbbcpu
