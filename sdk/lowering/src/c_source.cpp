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
      if (in.acc.empty()) fail(RVL_STATUS_INTERNAL, "ACC outside a contraction epilogue");
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

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// $FN, $NOINLINE, $I64, $U64, $LL, $F (f32 math suffix), $BITS32, $BITS64 are the dialect's.
// Every f64 helper sits between $FP64 and $END_FP64: OpenCL C compiles them only where the
// device has fp64 (the f32 helpers never widen to double for the same reason).
const char* kHelpers = R"(// MAX propagates NaN (the first NaN operand).
$FN float rvl_max_f32(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }
// float -> integer: truncate toward zero, saturate at the target's range, NaN -> 0. The bounds
// are powers of two, exact in both float types.
#define RVL_F2I_ALL(F, N, TRUNC)                                                                \
  $FN unsigned char rvl_f2u8_##N(F x) {                                                        \
    if (x != x) return 0;                                                                      \
    const F t = TRUNC(x);                                                                      \
    return t <= (F)0 ? (unsigned char)0 : t >= (F)255 ? (unsigned char)255 : (unsigned char)t;  \
  }                                                                                            \
  $FN int rvl_f2i32_##N(F x) {                                                                 \
    if (x != x) return 0;                                                                      \
    const F t = TRUNC(x);                                                                      \
    return t <= (F)-2147483648.0 ? (int)(-2147483647 - 1) : t >= (F)2147483648.0 ? 2147483647 : (int)t; \
  }                                                                                            \
  $FN $I64 rvl_f2i64_##N(F x) {                                                                \
    if (x != x) return 0;                                                                      \
    const F t = TRUNC(x);                                                                      \
    return t <= (F)-9223372036854775808.0 ? ($I64)(-9223372036854775807$LL - 1)                \
         : t >= (F)9223372036854775808.0 ? ($I64)9223372036854775807$LL : ($I64)t;              \
  }                                                                                            \
  $FN signed char rvl_f2i8_##N(F x) {                                                          \
    if (x != x) return 0;                                                                      \
    const F t = TRUNC(x);                                                                      \
    return t <= (F)-128 ? (signed char)-128 : t >= (F)127 ? (signed char)127 : (signed char)t;  \
  }                                                                                            \
  $FN short rvl_f2i16_##N(F x) {                                                               \
    if (x != x) return 0;                                                                      \
    const F t = TRUNC(x);                                                                      \
    return t <= (F)-32768 ? (short)-32768 : t >= (F)32767 ? (short)32767 : (short)t;            \
  }                                                                                            \
  $FN unsigned short rvl_f2u16_##N(F x) {                                                      \
    if (x != x) return 0;                                                                      \
    const F t = TRUNC(x);                                                                      \
    return t <= (F)0 ? (unsigned short)0 : t >= (F)65535 ? (unsigned short)65535 : (unsigned short)t; \
  }                                                                                            \
  $FN unsigned rvl_f2u32_##N(F x) {                                                            \
    if (x != x) return 0;                                                                      \
    const F t = TRUNC(x);                                                                      \
    return t <= (F)0 ? 0u : t >= (F)4294967296.0 ? 4294967295u : (unsigned)t;                  \
  }                                                                                            \
  $FN $U64 rvl_f2u64_##N(F x) {                                                                \
    if (x != x) return 0;                                                                      \
    const F t = TRUNC(x);                                                                      \
    return t <= (F)0 ? ($U64)0 : t >= (F)18446744073709551616.0 ? ~($U64)0 : ($U64)t;          \
  }
RVL_F2I_ALL(float, f32, trunc$F)
// Integer division and remainder: x/0 == x%0 == 0, MIN/-1 == MIN, MIN%-1 == 0.
$FN int rvl_idiv_i32(int a, int b) { return b == 0 ? 0 : b == -1 ? (int)(0u - (unsigned)a) : a / b; }
$FN int rvl_mod_i32(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }
// 64-bit division is a long subroutine on GPUs: called, not inlined (compile time of long programs).
$NOINLINE $I64 rvl_idiv_i64($I64 a, $I64 b) { return b == 0 ? 0 : b == -1 ? ($I64)(($U64)0 - ($U64)a) : a / b; }
$NOINLINE $I64 rvl_mod_i64($I64 a, $I64 b) { return (b == 0 || b == -1) ? 0 : a % b; }
$FN unsigned char rvl_idiv_u8(unsigned char a, unsigned char b) { return b == 0 ? 0 : (unsigned char)(a / b); }
$FN unsigned char rvl_mod_u8(unsigned char a, unsigned char b) { return b == 0 ? 0 : (unsigned char)(a % b); }
$FN unsigned char rvl_idiv_bool(unsigned char a, unsigned char b) { return b == 0 ? 0 : (unsigned char)(a / b); }
$FN unsigned char rvl_mod_bool(unsigned char a, unsigned char b) { return b == 0 ? 0 : (unsigned char)(a % b); }
// The narrow types compute in int (C's promotions): MIN / -1 is 128 or 32768 there, and the cast
// back wraps it to MIN, as the reference's wrap does; MIN % -1 is 0 in int.
#define RVL_IDIV_NARROW(T, N)                                                                   \
  $FN T rvl_idiv_##N(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); }                           \
  $FN T rvl_mod_##N(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }
RVL_IDIV_NARROW(signed char, i8)
RVL_IDIV_NARROW(short, i16)
RVL_IDIV_NARROW(unsigned short, u16)
RVL_IDIV_NARROW(unsigned, u32)
$NOINLINE $U64 rvl_idiv_u64($U64 a, $U64 b) { return b == 0 ? 0 : a / b; }
$NOINLINE $U64 rvl_mod_u64($U64 a, $U64 b) { return b == 0 ? 0 : a % b; }
// f16 / bf16 <-> f32 / f64 (Note [Half storage]): <ravel/half.hpp>'s narrow_float_bits, one
// generic round-to-nearest-even narrowing of the source's bits X (type U) with SE/SM exponent and
// mantissa bits into DE/DM ones: overflow to infinity, NaN quiet keeping its payload's top
// bits, subnormals kept, one rounding from the source (f64 -> f16 never goes through f32).
#define RVL_NARROW(NAME, U, SE, SM, DE, DM)                                                     \
  $FN unsigned short NAME(U x) {                                                               \
    const U one = 1;                                                                           \
    const U sign = ((x >> (SE + SM)) & one) << (DE + DM);                                      \
    const U e = (x >> SM) & ((one << SE) - one), m = x & ((one << SM) - one);                  \
    const U inf = sign | (((one << DE) - one) << DM);                                          \
    if (e == (one << SE) - one)                                                                \
      return (unsigned short)(m == 0 ? inf : inf | (one << (DM - 1)) | (m >> (SM - DM)));      \
    if (e == 0 && m == 0) return (unsigned short)sign;                                         \
    const U sig = e == 0 ? m : (m | (one << SM));                                              \
    const int de = (e == 0 ? 1 : (int)e) - ((1 << (SE - 1)) - 1) + ((1 << (DE - 1)) - 1);      \
    const int shift = (SM - DM) + (de < 1 ? 1 - de : 0);                                       \
    if (shift >= SM + 2) return (unsigned short)sign;                                          \
    U q = sig >> shift;                                                                        \
    const U rem = sig & ((one << shift) - one), tie = one << (shift - 1);                      \
    if (rem > tie || (rem == tie && (q & one))) ++q;                                           \
    const U mag = (de >= 1 ? (U)(de - 1) << DM : (U)0) + q;                                    \
    return (unsigned short)(mag >= (((one << DE) - one) << DM) ? inf : sign | mag);            \
  }
RVL_NARROW(rvl_narrow_f16_from_32, unsigned, 8, 23, 5, 10)
RVL_NARROW(rvl_narrow_bf16_from_32, unsigned, 8, 23, 8, 7)
$FN unsigned short rvl_f32_to_f16(float x) { return rvl_narrow_f16_from_32($F32BITS(x)); }
$FN unsigned short rvl_f32_to_bf16(float x) { return rvl_narrow_bf16_from_32($F32BITS(x)); }
// Widening is exact: a subnormal f16 is m * 2^-24, a normal f32 (no flush to zero can touch it).
$FN float rvl_f16_to_f32(unsigned short h) {
  const unsigned sign = ((unsigned)h & 0x8000u) << 16, e = ((unsigned)h >> 10) & 0x1fu, m = (unsigned)h & 0x3ffu;
  if (e == 0x1fu) return $BITS32(sign | 0x7f800000u | (m << 13));
  if (e != 0) return $BITS32(sign | ((e + 112u) << 23) | (m << 13));
  const float v = (float)m * 5.9604644775390625e-8f;
  return sign ? -v : v;
}
$FN float rvl_bf16_to_f32(unsigned short b) { return $BITS32((unsigned)b << 16); }
// Transcendentals called out of line by long programs: thousands of inlined sin() slow paths
// take the device compiler minutes.
$NOINLINE float rvl_ol_sin_f32(float x) { return sin$F(x); }
$NOINLINE float rvl_ol_exp2_f32(float x) { return exp2$F(x); }
$NOINLINE float rvl_ol_log2_f32(float x) { return log2$F(x); }
// LOGSUMEXP (ABI 1.4): a partial result is (m, s), the running maximum and sum exp(x - m);
// merging (m2, s2) into (m, s) rescales the side with the smaller maximum. NaN, then +inf, is
// sticky in m (s no longer matters); m == -inf is the identity (nothing counted yet), so -inf
// elements contribute nothing and an all -inf or empty reduction gives -inf, never -inf - -inf.
// The merge returns both halves in a struct (OpenCL C has no references, and a pointer into
// local memory would need its address space named).
#define RVL_LSE(V, INF, EXP, LOG)                                                               \
  typedef struct { V m, s; } rvl_lse_##V;                                                      \
  $FN rvl_lse_##V rvl_lse_merge_##V(V m, V s, V m2, V s2) {                                    \
    const V inf = INF;                                                                         \
    rvl_lse_##V r;                                                                             \
    if (m != m || m2 != m2) { r.m = m != m ? m : m2; r.s = 0; return r; }                       \
    const V n = m < m2 ? m2 : m;                                                               \
    if (n == inf || n == -inf) { r.m = n; r.s = 0; return r; }                                 \
    r.s = (m == -inf ? (V)0 : s * EXP(m - n)) + (m2 == -inf ? (V)0 : s2 * EXP(m2 - n));         \
    r.m = n;                                                                                   \
    return r;                                                                                  \
  }                                                                                            \
  $FN V rvl_lse_result_##V(V m, V s) { return m != m || m == INF || m == -INF ? m : m + LOG(s); }
RVL_LSE(float, $BITS32(0x7f800000), exp$F, log$F)
$FP64
$FN double rvl_max_f64(double a, double b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }
RVL_F2I_ALL(double, f64, trunc)
$NOINLINE double rvl_ol_sin_f64(double x) { return sin(x); }
$NOINLINE double rvl_ol_exp2_f64(double x) { return exp2(x); }
$NOINLINE double rvl_ol_log2_f64(double x) { return log2(x); }
RVL_LSE(double, $BITS64(0x7ff0000000000000$LL), exp, log)
// Widening (f32 values, f64 result): m and s stay f32, only m + log(s) is formed in f64.
$FN double rvl_lse_result_wide(float m, float s) { return rvl_lse_result_double((double)m, (double)s); }
RVL_NARROW(rvl_narrow_f16_from_64, $U64, 11, 52, 5, 10)
RVL_NARROW(rvl_narrow_bf16_from_64, $U64, 11, 52, 8, 7)
$FN unsigned short rvl_f64_to_f16(double x) { return rvl_narrow_f16_from_64(($U64)$F64BITS(x)); }
$FN unsigned short rvl_f64_to_bf16(double x) { return rvl_narrow_bf16_from_64(($U64)$F64BITS(x)); }
// An integer becomes a half through double, as the reference casts it (exact up to 2^53, so one
// rounding for every 32-bit and most 64-bit values).
#define rvl_int_to_f16(x) rvl_f64_to_f16((double)(x))
#define rvl_int_to_bf16(x) rvl_f64_to_bf16((double)(x))
$ELSE_FP64
// No fp64 on this device: through f32, exact for |x| <= 2^24, which covers every integer of 24
// bits or fewer; wider ones may round twice (docs/dtypes.md).
#define rvl_int_to_f16(x) rvl_f32_to_f16((float)(x))
#define rvl_int_to_bf16(x) rvl_f32_to_bf16((float)(x))
$END_FP64
)";

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

std::string helpers(const Dialect& d) {
  const bool opencl = std::strcmp(d.f32_math, "") == 0;
  std::string s = kHelpers;
  replace_all(s, "$FP64", opencl ? "#ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable" : "#if 1");
  replace_all(s, "$ELSE_FP64", "#else");
  replace_all(s, "$END_FP64", "#endif");
  replace_all(s, "$F32BITS", d.f32_bits);  // before $F
  replace_all(s, "$F64BITS", d.f64_bits);
  replace_all(s, "$NOINLINE", d.fn_noinline);
  replace_all(s, "$FN", d.fn);
  replace_all(s, "$I64", d.i64);
  replace_all(s, "$U64", d.u64);
  replace_all(s, "$LL", d.i64_suffix);
  replace_all(s, "$F", d.f32_math);
  replace_all(s, "$BITS32", d.bits_f32);
  replace_all(s, "$BITS64", d.bits_f64);
  return s;
}

}  // namespace rvl::lower::c
