#include "tensor/host_convert.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace ravel::detail {

namespace host_convert_detail {

// A tag carrying a dtype's storage type; bool is stored as a uint8_t 0/1.
template <class T, bool IsBool = false> struct Elem {
  using type = T;
  static constexpr bool is_bool = IsBool;
};

template <class F> void with_elem(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(Elem<uint8_t, true>{});
    case DType::U8: return f(Elem<uint8_t>{});
    case DType::I8: return f(Elem<int8_t>{});
    case DType::I16: return f(Elem<int16_t>{});
    case DType::U16: return f(Elem<uint16_t>{});
    case DType::I32: return f(Elem<int32_t>{});
    case DType::U32: return f(Elem<uint32_t>{});
    case DType::I64: return f(Elem<int64_t>{});
    case DType::U64: return f(Elem<uint64_t>{});
    case DType::F16: return f(Elem<Float16>{});
    case DType::BF16: return f(Elem<BFloat16>{});
    case DType::F32: return f(Elem<float>{});
    case DType::F64: return f(Elem<double>{});
  }
}

template <class T> constexpr bool is_half_v = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
template <class T> constexpr bool is_fp_v = std::is_floating_point_v<T> || is_half_v<T>;

// A float value widened without loss (halves are exact in float, float in double).
template <class T> double wide(T x) {
  if constexpr (is_half_v<T>) return static_cast<double>(static_cast<float>(x));
  else return static_cast<double>(x);
}

// float -> integer: truncate toward zero, saturate at the range, NaN -> 0 (the ABI's CAST).
template <class To> To saturate(double d) {
  if (d != d) return 0;
  const double hi = std::ldexp(1.0, std::numeric_limits<To>::digits);  // exclusive, exact
  const double lo = static_cast<double>(std::numeric_limits<To>::min());
  if (d >= hi) return std::numeric_limits<To>::max();
  if (d <= lo) return std::numeric_limits<To>::min();
  return static_cast<To>(d);
}

template <class To, bool ToBool, class From> To convert_one(From x) {
  if constexpr (ToBool) {
    if constexpr (is_fp_v<From>) return wide(x) != 0 ? 1 : 0;  // NaN -> true
    else return x != 0 ? 1 : 0;
  } else if constexpr (is_half_v<To>) {
    // One rounding from f32/f64; an integer beyond 2^53 is rounded to f64 first (any integer
    // that large is infinity in f16, and a tie in bf16 needs 2^53 < |x| with the 9th..53rd
    // bits exactly 10...0 after the first rounding).
    if constexpr (std::is_same_v<From, float>) return To(x);
    else if constexpr (is_fp_v<From>) return To(wide(x));
    else return To(static_cast<double>(x));
  } else if constexpr (std::is_floating_point_v<To>) {
    if constexpr (is_half_v<From>) return static_cast<To>(static_cast<float>(x));
    else return static_cast<To>(x);  // rounds to nearest (IEEE), +-inf on overflow
  } else if constexpr (is_fp_v<From>) {
    return saturate<To>(wide(x));
  } else {
    return static_cast<To>(x);  // integer -> integer: modular (C++20)
  }
}

}  // namespace host_convert_detail

void host_convert(const void* src, DType from, void* dst, DType to, int64_t n) {
  using namespace host_convert_detail;
  if (from == to) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(from));
    return;
  }
  with_elem(from, [&](auto fe) {
    using From = typename decltype(fe)::type;
    with_elem(to, [&](auto te) {
      using To = typename decltype(te)::type;
      const auto* s = static_cast<const From*>(src);
      auto* d = static_cast<To*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = convert_one<To, decltype(te)::is_bool>(s[i]);
    });
  });
}

std::vector<unsigned char> host_convert_doubles(const std::vector<double>& v, DType to) {
  std::vector<unsigned char> out(v.size() * static_cast<size_t>(dtype_size(to)));
  host_convert(v.data(), DType::F64, out.data(), to, static_cast<int64_t>(v.size()));
  return out;
}

}  // namespace ravel::detail
