// The helpers every kernel's C source starts with (lower::c::helpers): the ABI's edge cases
// (Note [One op table] in c_source.cpp), the 1.7 integers' division and saturating casts, the
// half conversions (Note [Half storage] in c_source.cpp), out-of-line transcendentals and
// LOGSUMEXP's merge, in the dialect's spelling. Plain C: no includes, no templates.
#include <ravel/lowering/c_source.hpp>

#include <cstring>
#include <string>

namespace rvl::lower::c {
namespace {

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
