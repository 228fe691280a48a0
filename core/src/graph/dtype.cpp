#include "ravel/dtype.hpp"

#include <algorithm>

namespace ravel {

int dtype_size(DType t) {
  switch (t) {
    case DType::Bool: case DType::U8: return 1;
    case DType::I32: case DType::F32: return 4;
    case DType::I64: case DType::F64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::U8: return "u8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
  }
  return "?";
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F64; }
bool is_integer(DType t) { return t == DType::U8 || t == DType::I32 || t == DType::I64; }

DType promote(DType a, DType b) {
  // The enum order is the promotion lattice; u8 is the only unsigned type and every signed
  // integer type is wider than it, so the maximum is also right for u8 with i32/i64.
  return std::max(a, b);
}

}  // namespace ravel
