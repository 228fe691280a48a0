// Per-dtype scalar semantics of every instruction, as plain inline functions.
//
// Invariants (docs/abi.md, "Arithmetic"):
//  - No operation here has undefined behaviour for any input: integer add/mul/neg are computed
//    in the unsigned type of the same width (wrap-around), x/0 == x%0 == 0, MIN/-1 == MIN,
//    MIN%-1 == 0, float->int casts saturate and map NaN to 0.
//  - BOOL values are stored as uint8_t holding exactly 0 or 1; every op producing BOOL yields 0/1.
//  - The typed array loops (apply_*) are written so GCC can vectorise the simple ones.
#pragma once

#include <ravel/backend.h>
#include <ravel/half.hpp>
#include <ravel/lowering/plan.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tbbcpu {

// The dtypes with typed array loops: every dtype but the 16-bit floats, whose kernels are
// rewritten to compute in f32 (Note [Halves in f32] in half_kernels.cpp) and which only appear
// here as LOADs, stores and CASTs. The tables below are indexed by every dtype; the half rows
// of the op tables are null, their cast entries are not.
inline constexpr int kTbbDTypeCount = RVL_DTYPE_COUNT_;
inline constexpr uint32_t kTbbDTypes = RVL_DTYPES_ALL & ~((1u << RVL_DTYPE_F16) | (1u << RVL_DTYPE_BF16));
constexpr bool tbb_runs(int dt) noexcept { return dt >= 0 && dt < kTbbDTypeCount && ((kTbbDTypes >> dt) & 1u); }

// C++ storage type of each dtype. BOOL and U8 share uint8_t, so dispatch is by dtype value (DT).
template <int DT> struct dtype_traits;
template <> struct dtype_traits<RVL_DTYPE_BOOL> { using type = uint8_t; };
template <> struct dtype_traits<RVL_DTYPE_U8> { using type = uint8_t; };
template <> struct dtype_traits<RVL_DTYPE_I32> { using type = int32_t; };
template <> struct dtype_traits<RVL_DTYPE_I64> { using type = int64_t; };
template <> struct dtype_traits<RVL_DTYPE_F32> { using type = float; };
template <> struct dtype_traits<RVL_DTYPE_F64> { using type = double; };
template <> struct dtype_traits<RVL_DTYPE_I8> { using type = int8_t; };
template <> struct dtype_traits<RVL_DTYPE_I16> { using type = int16_t; };
template <> struct dtype_traits<RVL_DTYPE_U16> { using type = uint16_t; };
template <> struct dtype_traits<RVL_DTYPE_U32> { using type = uint32_t; };
template <> struct dtype_traits<RVL_DTYPE_U64> { using type = uint64_t; };
template <> struct dtype_traits<RVL_DTYPE_F16> { using type = rvl::Float16; };
template <> struct dtype_traits<RVL_DTYPE_BF16> { using type = rvl::BFloat16; };
template <int DT> using ctype = typename dtype_traits<DT>::type;

template <int DT> inline constexpr bool is_bool_v = DT == RVL_DTYPE_BOOL;
template <int DT> inline constexpr bool is_float_v = DT == RVL_DTYPE_F32 || DT == RVL_DTYPE_F64;
template <int DT> inline constexpr bool is_half_v = DT == RVL_DTYPE_F16 || DT == RVL_DTYPE_BF16;
template <int DT> inline constexpr bool is_int_v = !is_bool_v<DT> && !is_float_v<DT> && !is_half_v<DT>;

// Calls f(std::integral_constant<int, DT>{}) for the runtime dtype `dt` (already validated).
template <class F>
inline decltype(auto) dispatch_dtype(int dt, F&& f) {
  switch (dt) {
    case RVL_DTYPE_BOOL: return f(std::integral_constant<int, RVL_DTYPE_BOOL>{});
    case RVL_DTYPE_U8: return f(std::integral_constant<int, RVL_DTYPE_U8>{});
    case RVL_DTYPE_I32: return f(std::integral_constant<int, RVL_DTYPE_I32>{});
    case RVL_DTYPE_I64: return f(std::integral_constant<int, RVL_DTYPE_I64>{});
    case RVL_DTYPE_F32: return f(std::integral_constant<int, RVL_DTYPE_F32>{});
    case RVL_DTYPE_I8: return f(std::integral_constant<int, RVL_DTYPE_I8>{});
    case RVL_DTYPE_I16: return f(std::integral_constant<int, RVL_DTYPE_I16>{});
    case RVL_DTYPE_U16: return f(std::integral_constant<int, RVL_DTYPE_U16>{});
    case RVL_DTYPE_U32: return f(std::integral_constant<int, RVL_DTYPE_U32>{});
    case RVL_DTYPE_U64: return f(std::integral_constant<int, RVL_DTYPE_U64>{});
    default: return f(std::integral_constant<int, RVL_DTYPE_F64>{});  // F64 (halves never get here)
  }
}

// ---- wrap-around integer helpers ------------------------------------------------------------
// Unsigned arithmetic never overflows; converting back to the signed type is modular in C++20.
template <class T> inline T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T> inline T wrap_mul(T a, T b) {
  // Types narrower than int promote to (signed) int, where 65535 * 65535 would overflow: they
  // multiply as unsigned int instead. Wider types stay unsigned.
  using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}
template <class T> inline T wrap_neg(T a) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(U(0) - static_cast<U>(a)));
}

// ---- scalar ops -----------------------------------------------------------------------------
template <int DT> inline ctype<DT> s_add(ctype<DT> a, ctype<DT> b) {
  if constexpr (is_bool_v<DT>) return a | b;
  else if constexpr (is_int_v<DT>) return wrap_add(a, b);
  else return a + b;
}
template <int DT> inline ctype<DT> s_mul(ctype<DT> a, ctype<DT> b) {
  if constexpr (is_bool_v<DT>) return a & b;
  else if constexpr (is_int_v<DT>) return wrap_mul(a, b);
  else return a * b;
}
template <int DT> inline ctype<DT> s_max(ctype<DT> a, ctype<DT> b) {
  if constexpr (is_float_v<DT>) {
    // NaN propagates: if either operand is NaN the result is NaN (a's NaN first).
    if (a != a) return a;
    if (b != b) return b;
    return a < b ? b : a;
  } else {
    return a < b ? b : a;
  }
}
template <int DT> inline ctype<DT> s_neg(ctype<DT> a) {
  if constexpr (is_float_v<DT>) return -a;
  else return wrap_neg(a);
}
template <int DT> inline ctype<DT> s_idiv(ctype<DT> a, ctype<DT> b) {
  using T = ctype<DT>;
  if constexpr (is_float_v<DT>) {
    return std::trunc(a / b);
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return wrap_neg(a);  // MIN / -1 == MIN, no trap
    }
    return static_cast<T>(a / b);
  }
}
template <int DT> inline ctype<DT> s_mod(ctype<DT> a, ctype<DT> b) {
  using T = ctype<DT>;
  if constexpr (is_float_v<DT>) {
    return std::fmod(a, b);
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return 0;  // MIN % -1 would trap on x86
    }
    return static_cast<T>(a % b);
  }
}
template <int DT> inline ctype<DT> s_trunc(ctype<DT> a) {
  if constexpr (is_float_v<DT>) return std::trunc(a);
  else return a;
}

// ---- casts --------------------------------------------------------------------------------
constexpr double pow2(int n) {
  double r = 1.0;
  for (int i = 0; i < n; ++i) r *= 2.0;
  return r;
}

// float -> integer: truncate toward zero, saturate to the target range, NaN -> 0.
template <class To, class From> inline To float_to_int(From x) {
  if (x != x) return 0;
  // Exclusive upper bound 2^digits (exact in double); inclusive lower bound min (exact, -2^k or 0).
  constexpr double hi = pow2(std::numeric_limits<To>::digits);
  constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
  const double d = static_cast<double>(x);
  if (d >= hi) return std::numeric_limits<To>::max();
  if (d <= lo) return std::numeric_limits<To>::min();  // (lo-1, lo] truncates to lo anyway
  return static_cast<To>(d);  // in range: truncation is exact and defined
}

template <int TO, int FROM> inline ctype<TO> s_cast(ctype<FROM> x) {
  using T = ctype<TO>;
  if constexpr (is_half_v<FROM>) {
    return s_cast<TO, RVL_DTYPE_F32>(static_cast<float>(x));  // exact widening, then as from f32
  } else if constexpr (is_half_v<TO>) {
    // One rounding to nearest even from f32/f64 (<ravel/half.hpp>); integers via f64, as the
    // reference does.
    if constexpr (is_float_v<FROM>) return T(x);
    else return T(static_cast<double>(x));
  } else if constexpr (is_bool_v<TO>) {
    return x != 0 ? 1 : 0;  // NaN != 0, so NaN -> true
  } else if constexpr (is_float_v<TO>) {
    return static_cast<T>(x);  // int->float rounds to nearest; f64->f32 rounds (IEEE: +-inf)
  } else if constexpr (is_float_v<FROM>) {
    return float_to_int<T>(x);
  } else {
    return static_cast<T>(x);  // int/bool -> int: modular (C++20), bool is already 0/1
  }
}

// CONST: the rvl_scalar member for the dtype class, converted like CAST from f64 / i64.
template <int DT> inline ctype<DT> const_value(const rvl_scalar& v) {
  if constexpr (is_float_v<DT>) return static_cast<ctype<DT>>(v.f);
  else return s_cast<DT, RVL_DTYPE_I64>(v.i);
}

// Reduction identity in the output dtype: the SDK's one table (rvl::lower::reduce_identity),
// read once per launch. Only SUM, MAX and PROD reach it (LOGSUMEXP has its own state).
template <int DT> inline ctype<DT> reduce_identity(int reduce_op) {
  return const_value<DT>(rvl::lower::reduce_identity(reduce_op, DT));
}
template <int DT> inline ctype<DT> reduce_combine(int reduce_op, ctype<DT> a, ctype<DT> b) {
  switch (reduce_op) {
    case RVL_REDUCE_MAX: return s_max<DT>(a, b);
    case RVL_REDUCE_PROD: return s_mul<DT>(a, b);
    default: return s_add<DT>(a, b);
  }
}

}  // namespace tbbcpu
