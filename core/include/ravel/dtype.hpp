// Element types and the type-promotion rules (docs/dtypes.md).
#pragma once

#include <cstdint>
#include <string>

namespace ravel {

// Values equal the C ABI's rvl_dtype, so a DType crosses the ABI unchanged.
enum class DType : uint8_t { Bool = 0, U8 = 1, I32 = 2, I64 = 3, F32 = 4, F64 = 5 };
inline constexpr int kDTypeCount = 6;

// Bytes per element.
int dtype_size(DType t);
// "bool", "u8", "i32", "i64", "f32", "f64".
const char* dtype_name(DType t);
bool is_float(DType t);
bool is_integer(DType t);  // u8, i32, i64 (not bool)
// The dtype both operands of a binary op are cast to: the later of bool < u8 < i32 < i64 < f32
// < f64, except that u8 with a signed integer gives the wider signed type (as NumPy does).
DType promote(DType a, DType b);

// The DType of a C++ element type; to_vector<T>/from_vector<T> use it.
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace ravel
