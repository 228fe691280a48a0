#include "ravel/dtype.hpp"

namespace ravel {

int dtype_size(DType t) {
  switch (t) {
    case DType::Bool: case DType::U8: case DType::I8: return 1;
    case DType::I16: case DType::U16: case DType::F16: case DType::BF16: return 2;
    case DType::I32: case DType::U32: case DType::F32: return 4;
    case DType::I64: case DType::U64: case DType::F64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::U8: return "u8";
    case DType::I8: return "i8";
    case DType::I16: return "i16";
    case DType::U16: return "u16";
    case DType::I32: return "i32";
    case DType::U32: return "u32";
    case DType::I64: return "i64";
    case DType::U64: return "u64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
  }
  return "?";
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }
bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }
bool is_integer(DType t) { return t != DType::Bool && !is_float(t); }
bool is_signed(DType t) {
  return is_float(t) || t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}

namespace {

DType signed_int_of_bytes(int bytes) {
  switch (bytes) {
    case 1: return DType::I8;
    case 2: return DType::I16;
    case 4: return DType::I32;
    default: return DType::I64;
  }
}

}  // namespace

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  const bool fa = is_float(a), fb = is_float(b);
  if (fa && fb) {
    // f16 and bf16 each hold values the other cannot (range vs precision): f32 holds both.
    if (is_half(a) && is_half(b)) return DType::F32;
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  if (fa) return a;  // integer with a float -> the float, even a half one (PyTorch)
  if (fb) return b;
  const bool sa = is_signed(a), sb = is_signed(b);
  if (sa == sb) return dtype_size(a) >= dtype_size(b) ? a : b;
  const DType u = sa ? b : a, s = sa ? a : b;
  if (dtype_size(s) > dtype_size(u)) return s;
  // The signed type twice as wide as the unsigned one holds both; none does for u64, and
  // NumPy's answer, f64, is taken (PyTorch refuses; docs/dtypes.md, "Promotion").
  if (u == DType::U64) return DType::F64;
  return signed_int_of_bytes(2 * dtype_size(u));
}

}  // namespace ravel
