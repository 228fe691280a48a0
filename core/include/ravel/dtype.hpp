// Element types and the type-promotion rules (docs/dtypes.md).
#pragma once

#include <cstdint>
#include <string>

#include <ravel/half.hpp>

namespace ravel {

// Values equal the C ABI's rvl_dtype, so a DType crosses the ABI unchanged. The values after F64
// came with ABI 1.7 and are only appended; the enum order is therefore not a promotion order
// (promote() has the lattice).
enum class DType : uint8_t {
  Bool = 0,
  U8 = 1,
  I32 = 2,
  I64 = 3,
  F32 = 4,
  F64 = 5,
  F16 = 6,   // IEEE binary16
  BF16 = 7,  // bfloat16
  I8 = 8,
  I16 = 9,
  U16 = 10,
  U32 = 11,
  U64 = 12,
};
inline constexpr int kDTypeCount = 13;

// The element types of f16 and bf16 tensors (to_vector/from_vector): two bytes each, converted
// to and from float explicitly with round-to-nearest-even (<ravel/half.hpp>).
using Float16 = rvl::Float16;
using BFloat16 = rvl::BFloat16;

// Bytes per element.
int dtype_size(DType t);
// "bool", "u8", "i8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64".
const char* dtype_name(DType t);
bool is_float(DType t);     // f16, bf16, f32, f64
bool is_integer(DType t);   // u8, i8, i16, u16, i32, u32, i64, u64 (not bool)
bool is_signed(DType t);    // the signed integers and the floats
bool is_half(DType t);      // f16, bf16: stored in 16 bits, computed in f32
// The dtype both operands of a binary op are cast to, as PyTorch's promote_types: a float wins
// over any integer or bool; two floats give the wider (f16 with bf16 gives f32, where both are
// exact); two integers give the smallest type that holds both ranges: the wider of two of the
// same signedness, and for an unsigned u with a signed s the signed type wider than u when s is
// not (u8+i8 -> i16, u16+i16 -> i32, u32+i32 -> i64); u64 with any signed type -> f32, as
// PyTorch does (docs/dtypes.md, "Promotion").
DType promote(DType a, DType b);

// The DType of a C++ element type; to_vector<T>/from_vector<T> use it.
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::I8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::I16; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::U16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::U32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::U64; };
template <> struct dtype_of<Float16> { static constexpr DType value = DType::F16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace ravel
