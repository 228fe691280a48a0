// Note [One op table]
// Every op's code is one case of the switch in emit_instruction(). The switch names every
// rvl_op and has no default, and the library is compiled with -Werror=switch, so appending an op
// to RVL_OP_LIST breaks this build until the op is given code here. Semantics follow docs/abi.md
// section 7 exactly (the conformance suite checks them against the SDK's reference interpreter):
//  - integer ADD/MUL/NEG wrap: computed in the unsigned type (signed overflow is UB in C);
//  - IDIV/MOD: x/0 == x%0 == 0, MIN/-1 == MIN, MIN%-1 == 0 (helpers below);
//  - float MAX propagates NaN; float->int CAST truncates and saturates, NaN -> 0;
//  - bool is a byte 0/1: ADD = or, MUL = and, MAX = or; every result is 0 or 1.
// Each instruction is rounded on its own: backends compile without FMA contraction
// (--fmad=false / -ffp-contract=off / no -cl-mad-enable), so a fused program equals the sequence
// of its ops.
//
// Note [Half storage]
// f16 and bf16 values live in kernels as their bits in an `unsigned short` (the storage type of
// both, in HIP C++ and OpenCL C alike), and are converted by the integer routines of the prelude
// (rvl_f16_to_f32, rvl_f32_to_f16, ..., a transcription of <ravel/half.hpp>'s one generic
// narrowing), not by the languages' half types:
//  - bit for bit the SDK's conversions (decision 40): round to nearest even, overflow to
//    infinity, NaN quiet with its payload's top bits, subnormals kept. The hardware converters
//    differ at the edges (CUDA's __float2half_rn and AMD's v_cvt_f16_f32 return a canonical NaN;
//    OpenCL's vstore_half leaves NaN payloads to the implementation, and PoCL's CPU device
//    rounds through the host's F16C or a software path), and bf16 has no OpenCL C type at all;
//  - `__half`/`__nv_bfloat16` need hip_fp16.h / cuda_fp16.h, which NVRTC cannot see (generated
//    kernels include nothing, prelude.cpp) and the CPU emulator's host compiler does not have;
//    OpenCL's `half` needs cl_khr_fp16 for anything but vload_half/vstore_half;
//  - arithmetic is f32 anyway (Note [Halves in kernels] in halves.hpp): the rewrite leaves only
//    LOADs, CASTs and the final store as half operations, so the conversions are the whole cost,
//    about ten integer operations an element against a memory-bound kernel's loads.
// A faster path (cvt.rn.f16.f32 on NVIDIA, v_cvt_pkrtz on AMD, with the NaN fixed up) would be
// a per-target prelude change checked against these routines; not done yet.
#include <ravel/backend.hpp>
#include <ravel/half.hpp>
#include <ravel/lowering/c_source.hpp>
#include <ravel/lowering/plan.hpp>
#include <ravel/op_table.hpp>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace rvl::lower::c {
namespace {

bool is_float(int32_t dt) { return dt == RVL_DTYPE_F32 || dt == RVL_DTYPE_F64; }
bool is_half(int32_t dt) { return dt == RVL_DTYPE_F16 || dt == RVL_DTYPE_BF16; }
const char* half_name(int32_t dt) { return dt == RVL_DTYPE_F16 ? "f16" : "bf16"; }
bool is_bool(int32_t dt) { return dt == RVL_DTYPE_BOOL; }
std::string v(int32_t j) { return "v" + std::to_string(j); }
const char* sfx(int32_t dt) { return rvl::dtype_name(dt); }  // helper suffixes: "i32", "f64"

// "(T)((U)a OP (U)b)": wrap-around integer arithmetic.
std::string wrap2(const Dialect& d, int32_t dt, const std::string& a, const char* op, const std::string& b) {
  return std::string("(") + ctype(d, dt) + ")((" + utype(d, dt) + ")" + a + " " + op + " (" +
         utype(d, dt) + ")" + b + ")";
}

std::string cast_expr(const Dialect& d, int32_t to, int32_t from, std::string x) {
  if (is_half(from)) {  // widen exactly, then the f32 rules
    if (to == from) return x;
    x = std::string("rvl_") + half_name(from) + "_to_f32(" + x + ")";
    from = RVL_DTYPE_F32;
  }
  if (to == RVL_DTYPE_BOOL) return "(unsigned char)(" + x + " != 0)";  // NaN != 0: true
  if (is_half(to))  // one rounding from the source (integers through double where there is one)
    return std::string("rvl_") + (is_float(from) ? sfx(from) : "int") + "_to_" + half_name(to) + "(" + x + ")";
  if (is_float(from) && !is_float(to))  // truncate toward zero, saturate, NaN -> 0
    return std::string("rvl_f2") + sfx(to) + "_" + sfx(from) + "(" + x + ")";
  return std::string("(") + ctype(d, to) + ")" + x;  // int->int wraps, ->float rounds to nearest
}

// f(a) with the dtype's spelling: sqrtf / sqrt in C++, sqrt for both in OpenCL C.
std::string math(const Dialect& d, int32_t dt, const char* f, const std::string& a) {
  return std::string(f) + (dt == RVL_DTYPE_F32 ? d.f32_math : "") + "(" + a + ")";
}
// Out of line for long programs: rvl_ol_sin_f32 (helpers()).
std::string transcendental(const Dialect& d, const SsaInput& in, int32_t dt, const char* f,
                           const std::string& a) {
  return in.outline ? std::string("rvl_ol_") + f + "_" + sfx(dt) + "(" + a + ")" : math(d, dt, f, a);
}

// The expression of instruction j; `sdt` is source 0's dtype.
std::string emit_instruction(const Dialect& d, const SsaInput& in, int32_t j, int32_t sdt) {
  const rvl_instruction& I = in.ins[j];
  const int32_t dt = I.dtype;
  const int arity = rvl::op_info(I.op).arity;  // the op table says which sources are read
  const std::string a = arity > 0 ? v(I.src[0]) : "";
  const std::string b = arity > 1 ? v(I.src[1]) : "";
  const std::string c = arity > 2 ? v(I.src[2]) : "";
  if (is_half(dt) && I.op != RVL_OP_LOAD && I.op != RVL_OP_CAST && I.op != RVL_OP_CONST)
    fail(RVL_STATUS_INTERNAL, std::string("emit_instruction: ") + rvl::op_name(I.op) + " on " + sfx(dt) +
                                  ": halves are computed in f32 (lower::widen_halves first)");
  switch (static_cast<rvl_op>(I.op)) {
    case RVL_OP_LOAD: return in.load(I.arg);
    case RVL_OP_CONST: return literal(d, dt, I.value);
    case RVL_OP_ACC:
      if (!in.accs.empty()) {
        if (I.arg < 0 || size_t(I.arg) >= in.accs.size() || in.accs[size_t(I.arg)].empty())
          fail(RVL_STATUS_INTERNAL, "ACC " + std::to_string(I.arg) + " names no value of this chain here");
        return in.accs[size_t(I.arg)];
      }
      if (in.acc.empty()) fail(RVL_STATUS_INTERNAL, "ACC outside an epilogue");
      return in.acc;
    case RVL_OP_CAST: return cast_expr(d, dt, sdt, a);
    case RVL_OP_NEG: return is_float(dt) ? "(-" + a + ")" : wrap2(d, dt, "0", "-", a);
    case RVL_OP_RECIP: return "((" + std::string(ctype(d, dt)) + ")1 / " + a + ")";
    case RVL_OP_SQRT: return math(d, dt, "sqrt", a);
    case RVL_OP_EXP2: return transcendental(d, in, dt, "exp2", a);
    case RVL_OP_LOG2: return transcendental(d, in, dt, "log2", a);
    case RVL_OP_SIN: return transcendental(d, in, dt, "sin", a);
    case RVL_OP_TRUNC: return is_float(dt) ? math(d, dt, "trunc", a) : a;
    case RVL_OP_ADD: return combine(d, RVL_REDUCE_SUM, dt, a, b);
    case RVL_OP_MUL: return combine(d, RVL_REDUCE_PROD, dt, a, b);
    case RVL_OP_MAX: return combine(d, RVL_REDUCE_MAX, dt, a, b);
    case RVL_OP_MOD:
      if (is_float(dt)) return math(d, dt, "fmod", a + ", " + b);
      return std::string("rvl_mod_") + sfx(dt) + "(" + a + ", " + b + ")";
    case RVL_OP_IDIV:
      if (is_float(dt)) return math(d, dt, "trunc", a + " / " + b);
      return std::string("rvl_idiv_") + sfx(dt) + "(" + a + ", " + b + ")";
    case RVL_OP_CMPLT: return "(unsigned char)(" + a + " < " + b + ")";
    case RVL_OP_CMPNE: return "(unsigned char)(" + a + " != " + b + ")";
    case RVL_OP_AND: return "(" + std::string(ctype(d, dt)) + ")(" + a + " & " + b + ")";
    case RVL_OP_OR: return "(" + std::string(ctype(d, dt)) + ")(" + a + " | " + b + ")";
    case RVL_OP_XOR: return "(" + std::string(ctype(d, dt)) + ")(" + a + " ^ " + b + ")";
    case RVL_OP_WHERE: return "(" + a + " ? " + b + " : " + c + ")";
    case RVL_OP_COUNT_: break;
  }
  fail(RVL_STATUS_INTERNAL, "emit_instruction: op " + std::to_string(I.op) + " has no code");
}

}  // namespace

const char* ctype(const Dialect& d, int32_t dt) {
  switch (dt) {
    case RVL_DTYPE_BOOL: case RVL_DTYPE_U8: return "unsigned char";
    case RVL_DTYPE_I8: return "signed char";
    case RVL_DTYPE_I16: return "short";
    case RVL_DTYPE_U16: case RVL_DTYPE_F16: case RVL_DTYPE_BF16: return "unsigned short";  // Note [Half storage]
    case RVL_DTYPE_I32: return "int";
    case RVL_DTYPE_U32: return "unsigned";
    case RVL_DTYPE_I64: return d.i64;
    case RVL_DTYPE_U64: return d.u64;
    case RVL_DTYPE_F32: return "float";
    case RVL_DTYPE_F64: return "double";
    default: fail(RVL_STATUS_INTERNAL, "ctype: dtype " + std::to_string(dt));
  }
}

const char* utype(const Dialect& d, int32_t dt) {
  switch (dt) {
    case RVL_DTYPE_BOOL: case RVL_DTYPE_U8: case RVL_DTYPE_I8: case RVL_DTYPE_I16: case RVL_DTYPE_U16:
    case RVL_DTYPE_I32: case RVL_DTYPE_U32:
      return "unsigned";
    case RVL_DTYPE_I64: case RVL_DTYPE_U64: return d.u64;
    default: return ctype(d, dt);
  }
}

std::string float_bits_literal(const Dialect& d, int32_t dt, double x) {
  char buf[80];
  if (dt == RVL_DTYPE_F32) {
    const float f = static_cast<float>(x);  // round to nearest, like the reference
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    std::snprintf(buf, sizeof buf, "%s(0x%08" PRIx32 ")", d.bits_f32, bits);
  } else {
    uint64_t bits;
    std::memcpy(&bits, &x, 8);
    std::snprintf(buf, sizeof buf, "%s(0x%016" PRIx64 "%s)", d.bits_f64, bits, d.i64_suffix);
  }
  return buf;
}

std::string literal(const Dialect& d, int32_t dt, const rvl_scalar& value) {
  if (is_float(dt)) return float_bits_literal(d, dt, value.f);
  if (is_half(dt)) {  // the bits of the nearest half (a half CONST is usually widened first)
    char buf[40];
    std::snprintf(buf, sizeof buf, "(unsigned short)0x%04x",
                  unsigned(dt == RVL_DTYPE_F16 ? rvl::f16_bits_from(value.f) : rvl::bf16_bits_from(value.f)));
    return buf;
  }
  const int64_t x = value.i;  // converted like a CAST from I64: modular, bool is x != 0
  const uint64_t ux = static_cast<uint64_t>(x);
  const std::string i64 = std::string("(") + d.i64 + ")";
  switch (dt) {
    case RVL_DTYPE_BOOL: return x != 0 ? "(unsigned char)1" : "(unsigned char)0";
    case RVL_DTYPE_U8: return "(unsigned char)" + std::to_string(x & 0xff);
    case RVL_DTYPE_I8: return "(signed char)" + std::to_string(int(static_cast<int8_t>(ux & 0xff)));
    case RVL_DTYPE_I16: return "(short)" + std::to_string(int(static_cast<int16_t>(ux & 0xffff)));
    case RVL_DTYPE_U16: return "(unsigned short)" + std::to_string(ux & 0xffff);
    case RVL_DTYPE_U32: return "(unsigned)" + std::to_string(ux & 0xffffffffu) + "u";
    case RVL_DTYPE_U64: return std::string("(") + d.u64 + ")" + std::to_string(ux) + "U" + d.i64_suffix;
    case RVL_DTYPE_I32:
      return "(int)" + std::to_string(static_cast<int32_t>(static_cast<uint32_t>(x))) + d.i64_suffix;
    default:  // INT64_MIN has no literal of its own
      return x == INT64_MIN ? i64 + "(-9223372036854775807" + d.i64_suffix + " - 1)"
                            : i64 + std::to_string(x) + d.i64_suffix;
  }
}

std::string convert(const Dialect& d, int32_t to, int32_t from, const std::string& x) {
  return to == from ? x : cast_expr(d, to, from, x);
}

std::string emit_ssa(const Dialect& d, std::string& out, const SsaInput& in, const std::string& indent) {
  for (int32_t j = 0; j < in.n; ++j) {
    const rvl_instruction& I = in.ins[j];
    const int32_t sdt = rvl::op_info(I.op).arity > 0 ? in.ins[I.src[0]].dtype : I.dtype;
    out += indent + "const " + ctype(d, I.dtype) + " " + v(j) + " = " +
           emit_instruction(d, in, j, sdt) + ";\n";
  }
  return v(in.n - 1);
}

std::string combine(const Dialect& d, int32_t rop, int32_t dt, const std::string& a,
                    const std::string& b) {
  if (is_half(dt)) dt = RVL_DTYPE_F32;  // half values are f32 in kernels (Note [Halves in kernels])
  switch (rop) {
    case RVL_REDUCE_SUM:
      if (is_bool(dt)) return "(unsigned char)(" + a + " | " + b + ")";
      return is_float(dt) ? "(" + a + " + " + b + ")" : wrap2(d, dt, a, "+", b);
    case RVL_REDUCE_PROD:
      if (is_bool(dt)) return "(unsigned char)(" + a + " & " + b + ")";
      return is_float(dt) ? "(" + a + " * " + b + ")" : wrap2(d, dt, a, "*", b);
    case RVL_REDUCE_MAX:
      if (is_bool(dt)) return "(unsigned char)(" + a + " | " + b + ")";
      if (is_float(dt)) return std::string("rvl_max_") + sfx(dt) + "(" + a + ", " + b + ")";
      return "(" + a + " > " + b + " ? " + a + " : " + b + ")";
    default: fail(RVL_STATUS_INTERNAL, "combine: reduce op " + std::to_string(rop));
  }
}

std::string identity(const Dialect& d, int32_t rop, int32_t dt) {
  return literal(d, dt, reduce_identity(rop, dt));
}

std::string multiply_add(const Dialect& d, int32_t dt, const std::string& acc,
                         const std::string& a, const std::string& b) {
  if (is_half(dt)) dt = RVL_DTYPE_F32;  // widened operands, f32 accumulator
  if (is_float(dt)) return math(d, dt, "fma", a + ", " + b + ", " + acc);
  if (is_bool(dt)) return "(unsigned char)(" + acc + " | (" + a + " & " + b + "))";
  const std::string u = utype(d, dt);
  return std::string("(") + ctype(d, dt) + ")((" + u + ")" + acc + " + (" + u + ")" + a + " * (" +
         u + ")" + b + ")";
}

std::string index_name(size_t axis) { return "i" + std::to_string(axis); }

std::vector<std::string> index_names(size_t rank) {
  std::vector<std::string> idx;
  for (size_t d = 0; d < rank; ++d) idx.push_back(index_name(d));
  return idx;
}

std::string decompose(const std::string& idx_t, const std::string& linear,
                      const std::vector<size_t>& axes, const std::vector<int64_t>& extent,
                      const std::string& indent) {
  if (axes.empty()) return "";
  if (axes.size() == 1)
    return indent + "const " + idx_t + " " + index_name(axes[0]) + " = " + linear + ";\n";
  // Scratch variables in a block, then the const names: t_ does not leak into the body.
  std::string s = indent + "{ " + idx_t + " t_ = " + linear + ";\n";
  std::string decl;
  for (size_t j = axes.size(); j-- > 0;) {
    const std::string e = std::to_string(extent[axes[j]]);
    const std::string n = index_name(axes[j]);
    s += indent + "  " + n + "_ = " + (j == 0 ? "t_" : "t_ % " + e) + ";" +
         (j == 0 ? "" : " t_ /= " + e + ";") + "\n";
    decl += indent + idx_t + " " + n + "_;\n";
  }
  s += indent + "}\n";
  for (size_t axis : axes)
    s += indent + "const " + idx_t + " " + index_name(axis) + " = " + index_name(axis) + "_;\n";
  return decl + s;
}

std::string address(const SpaceView& v, const std::vector<std::string>& idx) {
  std::string a = "(" + std::to_string(v.offset);  // int or long, as the value needs
  for (size_t d = 0; d < idx.size(); ++d) {
    if (v.stride[d] == 0 || idx[d].empty()) continue;
    a += v.stride[d] == 1 ? " + " + idx[d] : " + " + idx[d] + " * (" + std::to_string(v.stride[d]) + ")";
  }
  return a + ")";
}

std::string validity(const SpaceView& v, const std::vector<std::string>& idx,
                     const std::vector<int64_t>& extent) {
  std::string c;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (v.full(d, extent[d])) continue;
    if (!c.empty()) c += " && ";
    c += "(" + idx[d] + " >= " + std::to_string(v.lo[d]) + " && " + idx[d] + " < " +
         std::to_string(v.hi[d]) + ")";
  }
  return c;
}

std::string normalise(int32_t dt, const std::string& raw) {
  return dt == RVL_DTYPE_BOOL ? "(unsigned char)(" + raw + " != 0)" : raw;
}

std::string load(const Dialect& d, const SpaceView& v, const std::string& param,
                 const std::vector<std::string>& idx, const std::vector<int64_t>& extent) {
  const std::string zero = std::string("(") + ctype(d, v.dtype) + ")0";
  if (v.empty) return zero;
  const std::string read = normalise(v.dtype, param + "[" + address(v, idx) + "]");
  const std::string c = validity(v, idx, extent);
  return c.empty() ? read : "((" + c + ") ? " + read + " : " + zero + ")";
}

}  // namespace rvl::lower::c
