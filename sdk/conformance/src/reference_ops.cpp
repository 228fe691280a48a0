// Reference scalar semantics: one value at a time, every rule from docs/abi.md sections 5-7.
#include <ravel/conformance/reference.hpp>

#include <ravel/half.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace rvl::ref {
namespace {

uint64_t U(int64_t x) { return static_cast<uint64_t>(x); }
int64_t imin(int32_t dt) {
  switch (dt) {
    case RVL_DTYPE_I8: return INT8_MIN;
    case RVL_DTYPE_I16: return INT16_MIN;
    case RVL_DTYPE_I32: return INT32_MIN;
    case RVL_DTYPE_I64: return INT64_MIN;
    default: return 0;  // bool and the unsigned types
  }
}
// Signed reading of the low `bits` bits of x (two's complement).
int64_t sign_extend(int64_t x, int bits) {
  const uint64_t m = (uint64_t{1} << bits) - 1, y = U(x) & m;
  return y >= (uint64_t{1} << (bits - 1)) ? static_cast<int64_t>(y) - static_cast<int64_t>(m) - 1 : static_cast<int64_t>(y);
}
// Reduces an int64 to the value range of dt modulo 2^bits (two's complement).
int64_t wrap(int32_t dt, int64_t x) {
  switch (dt) {
    case RVL_DTYPE_BOOL: return x != 0;
    case RVL_DTYPE_U8: return x & 0xff;
    case RVL_DTYPE_U16: return x & 0xffff;
    case RVL_DTYPE_U32: return x & 0xffffffffLL;
    case RVL_DTYPE_I8: return sign_extend(x, 8);
    case RVL_DTYPE_I16: return sign_extend(x, 16);
    case RVL_DTYPE_I32: return sign_extend(x, 32);
    default: return x;  // i64, and u64 held as its two's complement bits
  }
}
// A value rounded to dt: f32 as float, the halves once from double (<ravel/half.hpp>).
double round_to(int32_t dt, double x) {
  switch (dt) {
    case RVL_DTYPE_F32: return double(float(x));
    case RVL_DTYPE_F16: return double(rvl::f32_from_f16_bits(rvl::f16_bits_from(x)));
    case RVL_DTYPE_BF16: return double(rvl::f32_from_bf16_bits(rvl::bf16_bits_from(x)));
    default: return x;
  }
}
// The precision float math of dt is evaluated in: f32 for f32 and the halves, which compute in
// f32 and round once, when a value is stored or cast (docs/dtypes.md, "Half arithmetic").
bool computes_in_f32(int32_t dt) { return dt == RVL_DTYPE_F32 || dt == RVL_DTYPE_F16 || dt == RVL_DTYPE_BF16; }

// Float math evaluated in the dtype's compute precision (f32 ops use the float overloads).
template <class Fn>
Value fl1(int32_t dt, Value a, Fn fn) {
  if (computes_in_f32(dt)) return fval(double(fn(float(a.f))));
  return fval(fn(a.f));
}
template <class Fn>
Value fl2(int32_t dt, Value a, Value b, Fn fn) {
  if (computes_in_f32(dt)) return fval(double(fn(float(a.f), float(b.f))));
  return fval(fn(a.f, b.f));
}
// For u64 (held as int64 bits), comparisons and division are unsigned.
bool int_less(int32_t dt, int64_t a, int64_t b) { return dt == RVL_DTYPE_U64 ? U(a) < U(b) : a < b; }

}  // namespace

bool is_float(int32_t dt) {
  return dt == RVL_DTYPE_F32 || dt == RVL_DTYPE_F64 || dt == RVL_DTYPE_F16 || dt == RVL_DTYPE_BF16;
}

size_t element_size(int32_t dt) {
  switch (dt) {
    case RVL_DTYPE_BOOL: case RVL_DTYPE_U8: case RVL_DTYPE_I8: return 1;
    case RVL_DTYPE_I16: case RVL_DTYPE_U16: case RVL_DTYPE_F16: case RVL_DTYPE_BF16: return 2;
    case RVL_DTYPE_I32: case RVL_DTYPE_U32: case RVL_DTYPE_F32: return 4;
    case RVL_DTYPE_I64: case RVL_DTYPE_U64: case RVL_DTYPE_F64: return 8;
    default: throw std::invalid_argument("unknown dtype " + std::to_string(dt));
  }
}

HostBuffer::HostBuffer(int32_t dt, int64_t n)
    : dtype(dt), bytes(static_cast<size_t>(n) * element_size(dt), 0) {}

int64_t HostBuffer::elements() const {
  return static_cast<int64_t>(bytes.size() / element_size(dtype));
}

Value HostBuffer::get(int64_t idx) const {
  if (idx < 0 || idx >= elements())
    throw std::out_of_range("reference: read of element " + std::to_string(idx) +
                            " outside a buffer of " + std::to_string(elements()));
  const uint8_t* p = bytes.data() + idx * element_size(dtype);
  switch (dtype) {
    case RVL_DTYPE_BOOL: return ival(*p != 0);
    case RVL_DTYPE_U8: return ival(*p);
    case RVL_DTYPE_I32: { int32_t v; std::memcpy(&v, p, 4); return ival(v); }
    case RVL_DTYPE_I64: { int64_t v; std::memcpy(&v, p, 8); return ival(v); }
    case RVL_DTYPE_F32: { float v; std::memcpy(&v, p, 4); return fval(v); }
    case RVL_DTYPE_I8: return ival(static_cast<int8_t>(*p));
    case RVL_DTYPE_I16: { int16_t v; std::memcpy(&v, p, 2); return ival(v); }
    case RVL_DTYPE_U16: { uint16_t v; std::memcpy(&v, p, 2); return ival(v); }
    case RVL_DTYPE_U32: { uint32_t v; std::memcpy(&v, p, 4); return ival(v); }
    case RVL_DTYPE_U64: { int64_t v; std::memcpy(&v, p, 8); return ival(v); }  // the bits
    case RVL_DTYPE_F16: { uint16_t v; std::memcpy(&v, p, 2); return fval(rvl::f32_from_f16_bits(v)); }
    case RVL_DTYPE_BF16: { uint16_t v; std::memcpy(&v, p, 2); return fval(rvl::f32_from_bf16_bits(v)); }
    default: { double v; std::memcpy(&v, p, 8); return fval(v); }
  }
}

void HostBuffer::set(int64_t idx, Value x) {
  if (idx < 0 || idx >= elements())
    throw std::out_of_range("reference: write of element " + std::to_string(idx) +
                            " outside a buffer of " + std::to_string(elements()));
  uint8_t* p = bytes.data() + idx * element_size(dtype);
  x = normalize(dtype, x);
  switch (dtype) {
    case RVL_DTYPE_BOOL: case RVL_DTYPE_U8: *p = static_cast<uint8_t>(x.i); break;
    case RVL_DTYPE_I32: { const int32_t v = static_cast<int32_t>(x.i); std::memcpy(p, &v, 4); break; }
    case RVL_DTYPE_I64: std::memcpy(p, &x.i, 8); break;
    case RVL_DTYPE_F32: { const float v = static_cast<float>(x.f); std::memcpy(p, &v, 4); break; }
    case RVL_DTYPE_I8: *p = static_cast<uint8_t>(x.i); break;
    case RVL_DTYPE_I16: case RVL_DTYPE_U16: { const uint16_t v = static_cast<uint16_t>(x.i); std::memcpy(p, &v, 2); break; }
    case RVL_DTYPE_U32: { const uint32_t v = static_cast<uint32_t>(x.i); std::memcpy(p, &v, 4); break; }
    case RVL_DTYPE_U64: std::memcpy(p, &x.i, 8); break;
    case RVL_DTYPE_F16: { const uint16_t v = rvl::f16_bits_from(x.f); std::memcpy(p, &v, 2); break; }
    case RVL_DTYPE_BF16: { const uint16_t v = rvl::bf16_bits_from(x.f); std::memcpy(p, &v, 2); break; }
    default: std::memcpy(p, &x.f, 8); break;
  }
}

Value normalize(int32_t dt, Value v) {
  return is_float(dt) ? fval(round_to(dt, v.f)) : ival(wrap(dt, v.i));
}

Value cast(int32_t to, int32_t from, Value x) {
  if (to == RVL_DTYPE_BOOL) return ival(is_float(from) ? (x.f != 0) : (x.i != 0));  // NaN -> 1
  if (is_float(to)) {
    if (is_float(from)) return fval(round_to(to, x.f));
    // u64 -> f32 rounds once, from the integer itself (as a static_cast does)
    if (from == RVL_DTYPE_U64 && to == RVL_DTYPE_F32) return fval(double(static_cast<float>(U(x.i))));
    return fval(round_to(to, from == RVL_DTYPE_U64 ? static_cast<double>(U(x.i)) : static_cast<double>(x.i)));
  }
  if (!is_float(from)) return ival(wrap(to, x.i));
  if (std::isnan(x.f)) return ival(0);
  const double t = std::trunc(x.f);  // toward zero, then saturate
  switch (to) {
    case RVL_DTYPE_U8: return ival(t <= 0 ? 0 : t >= 255 ? 255 : int64_t(t));
    case RVL_DTYPE_I8: return ival(t <= -128 ? -128 : t >= 127 ? 127 : int64_t(t));
    case RVL_DTYPE_I16: return ival(t <= -32768 ? -32768 : t >= 32767 ? 32767 : int64_t(t));
    case RVL_DTYPE_U16: return ival(t <= 0 ? 0 : t >= 65535 ? 65535 : int64_t(t));
    case RVL_DTYPE_U32: return ival(t <= 0 ? 0 : t >= 4294967295.0 ? 4294967295LL : int64_t(t));
    case RVL_DTYPE_U64:
      return ival(t <= 0 ? 0 : t >= 18446744073709551616.0 ? -1 : static_cast<int64_t>(static_cast<uint64_t>(t)));
    case RVL_DTYPE_I32:
      return ival(t <= -2147483648.0 ? INT32_MIN : t >= 2147483647.0 ? INT32_MAX : int64_t(t));
    default:
      return ival(t <= -9223372036854775808.0 ? INT64_MIN
                  : t >= 9223372036854775808.0 ? INT64_MAX : int64_t(t));
  }
}

Value constant(int32_t dt, const rvl_scalar& s) {
  return is_float(dt) ? fval(round_to(dt, s.f)) : cast(dt, RVL_DTYPE_I64, ival(s.i));
}

Value apply(int32_t op, int32_t dt, int32_t sdt, Value a, Value b, Value c) {
  const bool fp = is_float(sdt);
  // Exhaustive over rvl_op with no default: -Werror=switch flags an op added to the table
  // without reference semantics.
  switch (static_cast<rvl_op>(op)) {
    case RVL_OP_LOAD: case RVL_OP_CONST: case RVL_OP_ACC: case RVL_OP_COUNT_:
      break;
    case RVL_OP_CAST: return cast(dt, sdt, a);
    case RVL_OP_NEG:
      return fp ? fl1(dt, a, [](auto x) { return -x; }) : ival(wrap(dt, int64_t(0 - U(a.i))));
    case RVL_OP_RECIP: return fl1(dt, a, [](auto x) { return decltype(x)(1) / x; });
    case RVL_OP_SQRT: return fl1(dt, a, [](auto x) { return std::sqrt(x); });
    case RVL_OP_EXP2: return fl1(dt, a, [](auto x) { return std::exp2(x); });
    case RVL_OP_LOG2: return fl1(dt, a, [](auto x) { return std::log2(x); });
    case RVL_OP_SIN: return fl1(dt, a, [](auto x) { return std::sin(x); });
    case RVL_OP_TRUNC: return fp ? fl1(dt, a, [](auto x) { return std::trunc(x); }) : a;
    case RVL_OP_ADD:
      if (dt == RVL_DTYPE_BOOL) return ival(a.i || b.i);
      return fp ? fl2(dt, a, b, [](auto x, auto y) { return x + y; })
                : ival(wrap(dt, int64_t(U(a.i) + U(b.i))));
    case RVL_OP_MUL:
      if (dt == RVL_DTYPE_BOOL) return ival(a.i && b.i);
      return fp ? fl2(dt, a, b, [](auto x, auto y) { return x * y; })
                : ival(wrap(dt, int64_t(U(a.i) * U(b.i))));
    case RVL_OP_MAX:
      if (!fp) return ival(int_less(dt, b.i, a.i) ? a.i : b.i);
      if (std::isnan(a.f)) return a;  // NaN propagates
      if (std::isnan(b.f)) return b;
      return fval(a.f < b.f ? b.f : a.f);
    case RVL_OP_MOD:
    case RVL_OP_IDIV:
      if (fp) {
        if (op == RVL_OP_MOD) return fl2(dt, a, b, [](auto x, auto y) { return std::fmod(x, y); });
        return fl2(dt, a, b, [](auto x, auto y) { return std::trunc(x / y); });
      }
      if (b.i == 0) return ival(0);                                   // x/0 == x%0 == 0
      if (dt == RVL_DTYPE_U64)
        return ival(static_cast<int64_t>(op == RVL_OP_MOD ? U(a.i) % U(b.i) : U(a.i) / U(b.i)));
      if (b.i == -1 && a.i == imin(dt)) return ival(op == RVL_OP_MOD ? 0 : a.i);  // MIN/-1 == MIN
      return ival(wrap(dt, op == RVL_OP_MOD ? a.i % b.i : a.i / b.i));
    case RVL_OP_CMPLT: return ival(fp ? a.f < b.f : int_less(sdt, a.i, b.i));
    case RVL_OP_CMPNE: return ival(fp ? a.f != b.f : a.i != b.i);
    case RVL_OP_AND: return ival(wrap(dt, a.i & b.i));
    case RVL_OP_OR: return ival(wrap(dt, a.i | b.i));
    case RVL_OP_XOR: return ival(wrap(dt, a.i ^ b.i));
    case RVL_OP_WHERE: return a.i ? b : c;
  }
  throw std::invalid_argument("reference: op " + std::to_string(op) + " is not element-wise");
}

Value reduce_identity(int32_t rop, int32_t dt) {
  if (rop == RVL_REDUCE_LOGSUMEXP) return fval(-std::numeric_limits<double>::infinity());  // empty
  if (rop == RVL_REDUCE_PROD) return is_float(dt) ? fval(1) : ival(1);
  if (rop == RVL_REDUCE_MAX)
    return is_float(dt) ? fval(-std::numeric_limits<double>::infinity()) : ival(imin(dt));
  return is_float(dt) ? fval(0) : ival(0);
}

}  // namespace rvl::ref
