// Note [One op table]
// Every op's code is one case of the switch in emit_instruction(). The switch names every
// rvl_op and has no default, and the plugin is compiled with -Werror=switch, so appending an op
// to RVL_OP_LIST breaks this build until the op is given code here. Semantics follow docs/abi.md
// section 7 exactly (the conformance suite checks them against the SDK's reference interpreter):
//  - integer ADD/MUL/NEG wrap: computed in the unsigned type (signed overflow is UB in C++);
//  - IDIV/MOD: x/0 == x%0 == 0, MIN/-1 == MIN, MIN%-1 == 0 (helpers in the prelude);
//  - float MAX propagates NaN; float->int CAST truncates and saturates, NaN -> 0;
//  - bool is a byte 0/1: ADD = or, MUL = and, MAX = or; every result is 0 or 1.
// Each instruction is rounded on its own: kernels are compiled without FMA contraction
// (--fmad=false / -ffp-contract=off), so a fused program equals the sequence of its ops.
#include "ssa.hpp"

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace rvl::hip {
namespace {

bool is_float(int32_t dt) { return dt == RVL_DTYPE_F32 || dt == RVL_DTYPE_F64; }
bool is_bool(int32_t dt) { return dt == RVL_DTYPE_BOOL; }

std::string v(int32_t j) { return "v" + std::to_string(j); }

// "(T)((U)a OP (U)b)": wrap-around integer arithmetic.
std::string wrap2(int32_t dt, const std::string& a, const char* op, const std::string& b) {
  return std::string("(") + ctype(dt) + ")((" + utype(dt) + ")" + a + " " + op + " (" +
         utype(dt) + ")" + b + ")";
}

// Suffix naming a dtype in prelude helpers ("i32", "f64", ...).
const char* sfx(int32_t dt) { return rvl::dtype_name(dt); }

std::string cast_expr(int32_t to, int32_t from, const std::string& x) {
  if (to == RVL_DTYPE_BOOL) return "(unsigned char)(" + x + " != 0)";  // NaN != 0: true
  if (is_float(from) && !is_float(to))  // truncate toward zero, saturate, NaN -> 0
    return std::string("rvl_f2") + sfx(to) + "((double)" + x + ")";
  return std::string("(") + ctype(to) + ")" + x;  // int->int wraps, ->float rounds to nearest
}

std::string unary_math(int32_t dt, const char* f32, const char* f64, const std::string& a) {
  return std::string(dt == RVL_DTYPE_F32 ? f32 : f64) + "(" + a + ")";
}

// The expression of instruction j. `s0..s2` name its sources, `sdt` is source 0's dtype.
std::string emit_instruction(const SsaInput& in, int32_t j, int32_t sdt) {
  const rvl_instruction& I = in.ins[j];
  const int32_t dt = I.dtype;
  const int arity = rvl::op_info(I.op).arity;  // the op table says which sources are read
  const std::string a = arity > 0 ? v(I.src[0]) : "";
  const std::string b = arity > 1 ? v(I.src[1]) : "";
  const std::string c = arity > 2 ? v(I.src[2]) : "";
  switch (static_cast<rvl_op>(I.op)) {
    case RVL_OP_LOAD: return in.load(I.arg);
    case RVL_OP_CONST: return literal(dt, I.value);
    case RVL_OP_ACC:
      if (in.acc.empty()) throw std::logic_error("ACC outside a contraction epilogue");
      return in.acc;
    case RVL_OP_CAST: return cast_expr(dt, sdt, a);
    case RVL_OP_NEG:
      return is_float(dt) ? "(-" + a + ")" : wrap2(dt, "0", "-", a);
    case RVL_OP_RECIP: return "((" + std::string(ctype(dt)) + ")1 / " + a + ")";
    case RVL_OP_SQRT: return unary_math(dt, "sqrtf", "sqrt", a);
    case RVL_OP_EXP2: return (in.outline ? "rvl_ol_" : "") + unary_math(dt, "exp2f", "exp2", a);
    case RVL_OP_LOG2: return (in.outline ? "rvl_ol_" : "") + unary_math(dt, "log2f", "log2", a);
    case RVL_OP_SIN: return (in.outline ? "rvl_ol_" : "") + unary_math(dt, "sinf", "sin", a);
    case RVL_OP_TRUNC: return is_float(dt) ? unary_math(dt, "truncf", "trunc", a) : a;
    case RVL_OP_ADD:
      if (is_bool(dt)) return "(unsigned char)(" + a + " | " + b + ")";
      return is_float(dt) ? "(" + a + " + " + b + ")" : wrap2(dt, a, "+", b);
    case RVL_OP_MUL:
      if (is_bool(dt)) return "(unsigned char)(" + a + " & " + b + ")";
      return is_float(dt) ? "(" + a + " * " + b + ")" : wrap2(dt, a, "*", b);
    case RVL_OP_MAX: return combine(RVL_REDUCE_MAX, dt, a, b);
    case RVL_OP_MOD:
      if (is_float(dt)) return unary_math(dt, "fmodf", "fmod", a + ", " + b);
      return std::string("rvl_mod_") + sfx(dt) + "(" + a + ", " + b + ")";
    case RVL_OP_IDIV:
      if (is_float(dt)) return unary_math(dt, "truncf", "trunc", a + " / " + b);
      return std::string("rvl_idiv_") + sfx(dt) + "(" + a + ", " + b + ")";
    case RVL_OP_CMPLT: return "(unsigned char)(" + a + " < " + b + ")";
    case RVL_OP_CMPNE: return "(unsigned char)(" + a + " != " + b + ")";
    case RVL_OP_AND: return "(" + std::string(ctype(dt)) + ")(" + a + " & " + b + ")";
    case RVL_OP_OR: return "(" + std::string(ctype(dt)) + ")(" + a + " | " + b + ")";
    case RVL_OP_XOR: return "(" + std::string(ctype(dt)) + ")(" + a + " ^ " + b + ")";
    case RVL_OP_WHERE: return "(" + a + " ? " + b + " : " + c + ")";
    case RVL_OP_COUNT_: break;
  }
  throw std::logic_error("emit_instruction: op " + std::to_string(I.op) + " has no code");
}

}  // namespace

const char* ctype(int32_t dt) {
  switch (dt) {
    case RVL_DTYPE_BOOL: case RVL_DTYPE_U8: return "unsigned char";
    case RVL_DTYPE_I32: return "int";
    case RVL_DTYPE_I64: return "long long";
    case RVL_DTYPE_F32: return "float";
    case RVL_DTYPE_F64: return "double";
    default: throw std::logic_error("ctype: dtype " + std::to_string(dt));
  }
}

const char* utype(int32_t dt) {
  switch (dt) {
    case RVL_DTYPE_BOOL: case RVL_DTYPE_U8: case RVL_DTYPE_I32: return "unsigned";
    case RVL_DTYPE_I64: return "unsigned long long";
    default: return ctype(dt);
  }
}

std::string float_bits_literal(int32_t dt, double x) {
  char buf[64];
  if (dt == RVL_DTYPE_F32) {
    const float f = static_cast<float>(x);  // round to nearest, like the reference
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    std::snprintf(buf, sizeof buf, "__int_as_float(0x%08" PRIx32 ")", bits);
  } else {
    uint64_t bits;
    std::memcpy(&bits, &x, 8);
    std::snprintf(buf, sizeof buf, "__longlong_as_double(0x%016" PRIx64 "LL)", bits);
  }
  return buf;
}

std::string literal(int32_t dt, const rvl_scalar& value) {
  if (is_float(dt)) return float_bits_literal(dt, value.f);
  const int64_t x = value.i;  // converted like a CAST from I64: modular, bool is x != 0
  switch (dt) {
    case RVL_DTYPE_BOOL: return x != 0 ? "(unsigned char)1" : "(unsigned char)0";
    case RVL_DTYPE_U8: return "(unsigned char)" + std::to_string(x & 0xff);
    case RVL_DTYPE_I32: return "(int)" + std::to_string(static_cast<int32_t>(static_cast<uint32_t>(x))) + "LL";
    default:  // INT64_MIN has no literal of its own
      return x == INT64_MIN ? "(long long)(-9223372036854775807LL - 1)"
                            : "(long long)" + std::to_string(x) + "LL";
  }
}

std::string emit_ssa(std::string& out, const SsaInput& in, const std::string& indent) {
  for (int32_t j = 0; j < in.n; ++j) {
    const rvl_instruction& I = in.ins[j];
    const int32_t sdt = rvl::op_info(I.op).arity > 0 ? in.ins[I.src[0]].dtype : I.dtype;
    out += indent + "const " + ctype(I.dtype) + " " + v(j) + " = " +
           emit_instruction(in, j, sdt) + ";\n";
  }
  return v(in.n - 1);
}

std::string combine(int32_t rop, int32_t dt, const std::string& a, const std::string& b) {
  switch (rop) {
    case RVL_REDUCE_SUM:
      if (is_bool(dt)) return "(unsigned char)(" + a + " | " + b + ")";
      return is_float(dt) ? "(" + a + " + " + b + ")" : wrap2(dt, a, "+", b);
    case RVL_REDUCE_PROD:
      if (is_bool(dt)) return "(unsigned char)(" + a + " & " + b + ")";
      return is_float(dt) ? "(" + a + " * " + b + ")" : wrap2(dt, a, "*", b);
    case RVL_REDUCE_MAX:
      if (is_bool(dt)) return "(unsigned char)(" + a + " | " + b + ")";
      if (is_float(dt)) return std::string("rvl_max_") + sfx(dt) + "(" + a + ", " + b + ")";
      return "(" + a + " > " + b + " ? " + a + " : " + b + ")";
    default: throw std::logic_error("combine: reduce op " + std::to_string(rop));
  }
}

std::string identity(int32_t rop, int32_t dt) {
  if (rop == RVL_REDUCE_PROD)
    return is_float(dt) ? float_bits_literal(dt, 1.0) : std::string("(") + ctype(dt) + ")1";
  if (rop == RVL_REDUCE_MAX && !is_bool(dt)) {
    if (is_float(dt)) return float_bits_literal(dt, -HUGE_VAL);
    if (dt == RVL_DTYPE_I32) return "(int)(-2147483647 - 1)";
    if (dt == RVL_DTYPE_I64) return "(long long)(-9223372036854775807LL - 1)";
  }
  return is_float(dt) ? float_bits_literal(dt, 0.0) : std::string("(") + ctype(dt) + ")0";
}

std::string multiply_add(int32_t dt, const std::string& acc, const std::string& a,
                         const std::string& b) {
  switch (dt) {
    case RVL_DTYPE_F32: return "fmaf(" + a + ", " + b + ", " + acc + ")";
    case RVL_DTYPE_F64: return "fma(" + a + ", " + b + ", " + acc + ")";
    case RVL_DTYPE_BOOL: return "(unsigned char)(" + acc + " | (" + a + " & " + b + "))";
    default:
      return std::string("(") + ctype(dt) + ")((" + utype(dt) + ")" + acc + " + (" + utype(dt) +
             ")" + a + " * (" + utype(dt) + ")" + b + ")";
  }
}

}  // namespace rvl::hip
