// Compile-time generated tables of typed array loops (see array_ops.hpp).
#include "array_ops.hpp"
#include "array_scalar.hpp"

#include "dtype_ops.hpp"
#include "fast_math.hpp"
#include "half_convert.hpp"

#include <ravel/op_table.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tbbcpu {
namespace {

using array_detail::scalar;
using array_detail::supported;

// The loop body, inlined into each ISA's version below (Note [Array loops per ISA]).
template <int OP, int DT>
[[gnu::always_inline]] inline void loop_body(void* dst, const void* a, const void* b,
                                             const void* c, int64_t n) {
  using T = ctype<DT>;
  if constexpr (rvl::op_info(OP).result == rvl::OpResult::Bool) {
    auto* __restrict d = static_cast<uint8_t*>(dst);
    auto* __restrict x = static_cast<const T*>(a);
    auto* __restrict y = static_cast<const T*>(b);
    for (int64_t i = 0; i < n; ++i)
      d[i] = OP == RVL_OP_CMPLT ? (x[i] < y[i]) : (x[i] != y[i]);
  } else if constexpr (rvl::op_info(OP).accepts == rvl::OpAccepts::Select) {
    auto* __restrict cond = static_cast<const uint8_t*>(a);
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
      // A bit-mask blend on the values' bits: GCC does not vectorise `cond ? x : y` with a byte
      // condition and float values (it was the step's hottest array loop), but it does vectorise
      // this. m is all ones where the condition holds, 0 elsewhere.
      using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
      typedef U __attribute__((may_alias)) UA;
      auto* __restrict d = static_cast<UA*>(dst);
      auto* __restrict x = static_cast<const UA*>(b);
      auto* __restrict y = static_cast<const UA*>(c);
      for (int64_t i = 0; i < n; ++i) {
        const U m = U(0) - static_cast<U>(cond[i] != 0);
        d[i] = (x[i] & m) | (y[i] & ~m);
      }
    } else {
      auto* __restrict d = static_cast<T*>(dst);
      auto* __restrict x = static_cast<const T*>(b);
      auto* __restrict y = static_cast<const T*>(c);
      for (int64_t i = 0; i < n; ++i) d[i] = cond[i] ? x[i] : y[i];
    }
  } else {
    (void)c;
    auto* __restrict d = static_cast<T*>(dst);
    auto* __restrict x = static_cast<const T*>(a);
    auto* __restrict y = static_cast<const T*>(b);
    if constexpr (rvl::op_info(OP).arity == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = scalar<OP, DT>(x[i], T{});
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = scalar<OP, DT>(x[i], y[i]);
    }
  }
}

// Note [Array loops per ISA]
// The library is built for baseline x86-64 (SSE2: 4 floats per vector). Every array loop is also
// compiled for AVX2 (8 floats) and for AVX-512 (F, BW, DQ, VL: 16 floats; byte results and
// conditions need BW), the same body inlined into a target("...") function, and the widest the
// CPU has is chosen at run time (simd_tier). RAVEL_TBB_SIMD=portable forces the baseline loops,
// RAVEL_TBB_SIMD=avx2 caps the tier at AVX2 (ctest: sdk_conformance_tbb_cpu_portable_simd and
// _avx2_simd; tbb_array_tiers runs every tier the CPU has against the scalar reference bit for
// bit). No FMA and no reassociation: each element is the same IEEE operation in every tier
// (fast_exp2f is straight-line arithmetic), so all give bitwise the same results. GCC 12's
// avx512f implies FMA, and GCC contracts a*b+c by default (-ffp-contract=fast), so this file is
// compiled with -ffp-contract=off (CMakeLists.txt): Horner's steps stay two roundings each, as
// in the SSE2 build.
template <int OP, int DT>
void array_loop(void* dst, const void* a, const void* b, const void* c, int64_t n) {
  loop_body<OP, DT>(dst, a, b, c, n);
}
#if defined(__x86_64__) || defined(__i386__)
#define RVL_TBB_HAVE_AVX2_LOOPS 1
template <int OP, int DT>
__attribute__((target("avx2"))) void array_loop_avx2(void* dst, const void* a, const void* b,
                                                     const void* c, int64_t n) {
  loop_body<OP, DT>(dst, a, b, c, n);
}
template <int OP, int DT>
__attribute__((target(RVL_TBB_AVX512_TARGET))) void array_loop_avx512(
    void* dst, const void* a, const void* b, const void* c, int64_t n) {
  loop_body<OP, DT>(dst, a, b, c, n);
}
#endif

template <int TIER, int OP, int DT>
constexpr ArrayFn pick() {
  if constexpr (!supported(OP, DT)) return nullptr;
#ifdef RVL_TBB_HAVE_AVX2_LOOPS
  else if constexpr (TIER == kSimdAvx512) return &array_loop_avx512<OP, DT>;
  else if constexpr (TIER == kSimdAvx2) return &array_loop_avx2<OP, DT>;
#endif
  else return &array_loop<OP, DT>;
}
template <int TIER, int OP, size_t... D>
constexpr std::array<ArrayFn, kTbbDTypeCount> op_row(std::index_sequence<D...>) {
  return {pick<TIER, OP, static_cast<int>(D)>()...};
}
template <int TIER, size_t... O>
constexpr auto make_op_table(std::index_sequence<O...>) {
  return std::array<std::array<ArrayFn, kTbbDTypeCount>, RVL_OP_COUNT_>{
      op_row<TIER, static_cast<int>(O)>(std::make_index_sequence<kTbbDTypeCount>{})...};
}
constexpr auto kOpTable = make_op_table<kSimdPortable>(std::make_index_sequence<RVL_OP_COUNT_>{});
constexpr auto kOpTableAvx2 = make_op_table<kSimdAvx2>(std::make_index_sequence<RVL_OP_COUNT_>{});
constexpr auto kOpTableAvx512 = make_op_table<kSimdAvx512>(std::make_index_sequence<RVL_OP_COUNT_>{});

// Note [Array loops with a per-row scalar]
// A row chain's pieces (row_chain.cpp) read per-row values (layer norm's mean and rsqrt) as
// one-value-per-row LOADs. Filled out to a block per LOAD (the evaluator's fill_per_row) they
// were 16-27% of the chain's samples in perf, and each is one more pass through L1. A block
// inside one row sees one value, so the binary ops on floats also come with one operand a
// scalar (SA: the first, else the second): dst[i] = op(a[i], *b). The scalar is the same
// function on the same two values as the array loop with a filled operand, so the result is
// the same bits (tests: tbb_array_tiers).
template <int OP, int DT, bool SA>
[[gnu::always_inline]] inline void scalar_body(void* dst, const void* a, const void* b, int64_t n) {
  using T = ctype<DT>;
  auto* __restrict d = static_cast<T*>(dst);
  const T k = *static_cast<const T*>(SA ? a : b);
  auto* __restrict x = static_cast<const T*>(SA ? b : a);
  if constexpr (SA) {
    for (int64_t i = 0; i < n; ++i) d[i] = scalar<OP, DT>(k, x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = scalar<OP, DT>(x[i], k);
  }
}
template <int OP, int DT, bool SA>
void scalar_loop(void* dst, const void* a, const void* b, int64_t n) {
  scalar_body<OP, DT, SA>(dst, a, b, n);
}
#ifdef RVL_TBB_HAVE_AVX2_LOOPS
template <int OP, int DT, bool SA>
__attribute__((target("avx2"))) void scalar_loop_avx2(void* dst, const void* a, const void* b, int64_t n) {
  scalar_body<OP, DT, SA>(dst, a, b, n);
}
template <int OP, int DT, bool SA>
__attribute__((target(RVL_TBB_AVX512_TARGET))) void scalar_loop_avx512(void* dst, const void* a, const void* b,
                                                                          int64_t n) {
  scalar_body<OP, DT, SA>(dst, a, b, n);
}
#endif
constexpr bool scalar_supported(int op, int dt) {
  return supported(op, dt) && (dt == RVL_DTYPE_F32 || dt == RVL_DTYPE_F64) && rvl::op_info(op).arity == 2 &&
         rvl::op_info(op).result == rvl::OpResult::Same && rvl::op_info(op).accepts != rvl::OpAccepts::Select;
}
template <int TIER, int OP, int DT, bool SA>
constexpr ScalarFn pick_scalar() {
  if constexpr (!scalar_supported(OP, DT)) return nullptr;
#ifdef RVL_TBB_HAVE_AVX2_LOOPS
  else if constexpr (TIER == kSimdAvx512) return &scalar_loop_avx512<OP, DT, SA>;
  else if constexpr (TIER == kSimdAvx2) return &scalar_loop_avx2<OP, DT, SA>;
#endif
  else return &scalar_loop<OP, DT, SA>;
}
// [tier][op][0: f32, 1: f64][0: scalar b, 1: scalar a]
using ScalarRow = std::array<std::array<ScalarFn, 2>, 2>;
template <int TIER, size_t... O>
constexpr auto make_scalar_table(std::index_sequence<O...>) {
  return std::array<ScalarRow, RVL_OP_COUNT_>{ScalarRow{
      std::array<ScalarFn, 2>{pick_scalar<TIER, static_cast<int>(O), RVL_DTYPE_F32, false>(),
                              pick_scalar<TIER, static_cast<int>(O), RVL_DTYPE_F32, true>()},
      std::array<ScalarFn, 2>{pick_scalar<TIER, static_cast<int>(O), RVL_DTYPE_F64, false>(),
                              pick_scalar<TIER, static_cast<int>(O), RVL_DTYPE_F64, true>()}}...};
}
constexpr std::array<std::array<ScalarRow, RVL_OP_COUNT_>, 3> kScalarTable = {
    make_scalar_table<kSimdPortable>(std::make_index_sequence<RVL_OP_COUNT_>{}),
    make_scalar_table<kSimdAvx2>(std::make_index_sequence<RVL_OP_COUNT_>{}),
    make_scalar_table<kSimdAvx512>(std::make_index_sequence<RVL_OP_COUNT_>{})};

template <int FROM, int TO>
void cast_loop(void* dst, const void* src, int64_t n) {
  // f32 <-> f16/bf16, the casts every half kernel is made of (Note [Halves in f32]): vector loops
  if constexpr (FROM == RVL_DTYPE_F32 && TO == RVL_DTYPE_F16)
    return f32_to_f16(static_cast<uint16_t*>(dst), static_cast<const float*>(src), n);
  if constexpr (FROM == RVL_DTYPE_F16 && TO == RVL_DTYPE_F32)
    return f16_to_f32(static_cast<float*>(dst), static_cast<const uint16_t*>(src), n);
  if constexpr (FROM == RVL_DTYPE_F32 && TO == RVL_DTYPE_BF16)
    return f32_to_bf16(static_cast<uint16_t*>(dst), static_cast<const float*>(src), n);
  if constexpr (FROM == RVL_DTYPE_BF16 && TO == RVL_DTYPE_F32)
    return bf16_to_f32(static_cast<float*>(dst), static_cast<const uint16_t*>(src), n);
  auto* __restrict d = static_cast<ctype<TO>*>(dst);
  auto* __restrict s = static_cast<const ctype<FROM>*>(src);
  for (int64_t i = 0; i < n; ++i) d[i] = s_cast<TO, FROM>(s[i]);
}
template <int FROM, int TO>
constexpr CastFn cast_entry() {
  return &cast_loop<FROM, TO>;  // every pair, the halves included (Note [Halves in f32])
}
template <int FROM, size_t... T>
constexpr std::array<CastFn, kTbbDTypeCount> cast_row(std::index_sequence<T...>) {
  return {cast_entry<FROM, static_cast<int>(T)>()...};
}
template <size_t... F>
constexpr auto make_cast_table(std::index_sequence<F...>) {
  return std::array<std::array<CastFn, kTbbDTypeCount>, kTbbDTypeCount>{
      cast_row<static_cast<int>(F)>(std::make_index_sequence<kTbbDTypeCount>{})...};
}
constexpr auto kCastTable = make_cast_table(std::make_index_sequence<kTbbDTypeCount>{});

}  // namespace

int simd_tier_supported() {
#ifdef RVL_TBB_HAVE_AVX2_LOOPS
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return kSimdAvx512;
  if (__builtin_cpu_supports("avx2")) return kSimdAvx2;
#endif
  return kSimdPortable;
}

int simd_tier() {
  static const int tier = [] {
    const int hw = simd_tier_supported();
    const char* env = std::getenv("RAVEL_TBB_SIMD");
    if (env && std::strcmp(env, "portable") == 0) return int{kSimdPortable};
    if (env && std::strcmp(env, "avx2") == 0) return std::min(hw, int{kSimdAvx2});
    return hw;  // "avx512", unset or anything else: the widest the CPU has
  }();
  return tier;
}

ArrayFn array_kernel_at(int tier, int32_t op, int32_t dt) {
  if (op < 0 || op >= RVL_OP_COUNT_ || dt < 0 || dt >= kTbbDTypeCount) return nullptr;
  if (tier < kSimdPortable || tier > simd_tier_supported()) return nullptr;
  if (tier == kSimdAvx512) return kOpTableAvx512[op][dt];
  return tier == kSimdAvx2 ? kOpTableAvx2[op][dt] : kOpTable[op][dt];
}

ArrayFn array_kernel(int32_t op, int32_t dt) { return array_kernel_at(simd_tier(), op, dt); }

ScalarFn scalar_kernel_at(int tier, int32_t op, int32_t dt, bool scalar_a) {
  if (op < 0 || op >= RVL_OP_COUNT_ || (dt != RVL_DTYPE_F32 && dt != RVL_DTYPE_F64)) return nullptr;
  if (tier < kSimdPortable || tier > simd_tier_supported()) return nullptr;
  return kScalarTable[tier][op][dt == RVL_DTYPE_F64][scalar_a];
}

ScalarFn scalar_kernel(int32_t op, int32_t dt, bool scalar_a) { return scalar_kernel_at(simd_tier(), op, dt, scalar_a); }

CastFn cast_kernel(int32_t from, int32_t to) {
  if (from < 0 || from >= kTbbDTypeCount || to < 0 || to >= kTbbDTypeCount) return nullptr;
  return kCastTable[from][to];
}

void fill_const(void* dst, int32_t dt, const rvl_scalar& v, int64_t n) {
  dispatch_dtype(dt, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    const ctype<DT> x = const_value<DT>(v);
    auto* d = static_cast<ctype<DT>*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = x;
  });
}

bool simd_avx2() { return simd_tier() >= kSimdAvx2; }

}  // namespace tbbcpu
