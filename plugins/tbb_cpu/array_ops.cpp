// Compile-time generated tables of typed array loops (see array_ops.hpp).
#include "array_ops.hpp"

#include "dtype_ops.hpp"
#include "fast_math.hpp"

#include <ravel/op_table.hpp>

#include <array>
#include <cmath>
#include <utility>

namespace tbbcpu {
namespace {

// Which (op, source dtype) pairs get an array loop: every arithmetic row of the op table on the
// dtypes it accepts. LOAD, CONST, ACC and CAST are handled by the evaluator itself.
constexpr bool supported(int op, int dt) {
  return rvl::op_is_arithmetic(op) && op != RVL_OP_CAST && rvl::op_accepts(op, dt);
}
template <int OP> inline constexpr bool kNoFunctor = false;

template <int OP, int DT>
inline ctype<DT> scalar(ctype<DT> a, ctype<DT> b) {
  using T = ctype<DT>;
  if constexpr (OP == RVL_OP_NEG) return s_neg<DT>(a);
  else if constexpr (OP == RVL_OP_RECIP) return T(1) / a;
  else if constexpr (OP == RVL_OP_SQRT) return std::sqrt(a);
  else if constexpr (OP == RVL_OP_EXP2 && DT == RVL_DTYPE_F32) return fast_exp2f(a);  // vectorises
  else if constexpr (OP == RVL_OP_EXP2) return std::exp2(a);
  else if constexpr (OP == RVL_OP_LOG2) return std::log2(a);
  else if constexpr (OP == RVL_OP_SIN) return std::sin(a);
  else if constexpr (OP == RVL_OP_TRUNC) return s_trunc<DT>(a);
  else if constexpr (OP == RVL_OP_ADD) return s_add<DT>(a, b);
  else if constexpr (OP == RVL_OP_MUL) return s_mul<DT>(a, b);
  else if constexpr (OP == RVL_OP_MAX) return s_max<DT>(a, b);
  else if constexpr (OP == RVL_OP_MOD) return s_mod<DT>(a, b);
  else if constexpr (OP == RVL_OP_IDIV) return s_idiv<DT>(a, b);
  else if constexpr (OP == RVL_OP_AND) return static_cast<T>(a & b);
  else if constexpr (OP == RVL_OP_OR) return static_cast<T>(a | b);
  else if constexpr (OP == RVL_OP_XOR) return static_cast<T>(a ^ b);
  // A row added to the op table lands here (supported() instantiates every arithmetic row):
  // the build fails until the op has a CPU functor.
  else static_assert(kNoFunctor<OP>, "op table row without a tbb_cpu functor");
}

template <int OP, int DT>
void array_loop(void* dst, const void* a, const void* b, const void* c, int64_t n) {
  using T = ctype<DT>;
  if constexpr (rvl::op_info(OP).result == rvl::OpResult::Bool) {
    auto* __restrict d = static_cast<uint8_t*>(dst);
    auto* __restrict x = static_cast<const T*>(a);
    auto* __restrict y = static_cast<const T*>(b);
    for (int64_t i = 0; i < n; ++i)
      d[i] = OP == RVL_OP_CMPLT ? (x[i] < y[i]) : (x[i] != y[i]);
  } else if constexpr (rvl::op_info(OP).accepts == rvl::OpAccepts::Select) {
    auto* __restrict d = static_cast<T*>(dst);
    auto* __restrict cond = static_cast<const uint8_t*>(a);
    auto* __restrict x = static_cast<const T*>(b);
    auto* __restrict y = static_cast<const T*>(c);
    for (int64_t i = 0; i < n; ++i) d[i] = cond[i] ? x[i] : y[i];
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

template <int OP, int DT>
constexpr ArrayFn pick() {
  if constexpr (supported(OP, DT)) return &array_loop<OP, DT>;
  else return nullptr;
}
template <int OP, size_t... D>
constexpr std::array<ArrayFn, RVL_DTYPE_COUNT_> op_row(std::index_sequence<D...>) {
  return {pick<OP, static_cast<int>(D)>()...};
}
template <size_t... O>
constexpr auto make_op_table(std::index_sequence<O...>) {
  return std::array<std::array<ArrayFn, RVL_DTYPE_COUNT_>, RVL_OP_COUNT_>{
      op_row<static_cast<int>(O)>(std::make_index_sequence<RVL_DTYPE_COUNT_>{})...};
}
constexpr auto kOpTable = make_op_table(std::make_index_sequence<RVL_OP_COUNT_>{});

template <int FROM, int TO>
void cast_loop(void* dst, const void* src, int64_t n) {
  auto* __restrict d = static_cast<ctype<TO>*>(dst);
  auto* __restrict s = static_cast<const ctype<FROM>*>(src);
  for (int64_t i = 0; i < n; ++i) d[i] = s_cast<TO, FROM>(s[i]);
}
template <int FROM, size_t... T>
constexpr std::array<CastFn, RVL_DTYPE_COUNT_> cast_row(std::index_sequence<T...>) {
  return {&cast_loop<FROM, static_cast<int>(T)>...};
}
template <size_t... F>
constexpr auto make_cast_table(std::index_sequence<F...>) {
  return std::array<std::array<CastFn, RVL_DTYPE_COUNT_>, RVL_DTYPE_COUNT_>{
      cast_row<static_cast<int>(F)>(std::make_index_sequence<RVL_DTYPE_COUNT_>{})...};
}
constexpr auto kCastTable = make_cast_table(std::make_index_sequence<RVL_DTYPE_COUNT_>{});

}  // namespace

ArrayFn array_kernel(int32_t op, int32_t dt) {
  if (op < 0 || op >= RVL_OP_COUNT_ || dt < 0 || dt >= RVL_DTYPE_COUNT_) return nullptr;
  return kOpTable[op][dt];
}

CastFn cast_kernel(int32_t from, int32_t to) {
  if (from < 0 || from >= RVL_DTYPE_COUNT_ || to < 0 || to >= RVL_DTYPE_COUNT_) return nullptr;
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

}  // namespace tbbcpu
