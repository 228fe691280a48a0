#include "scalar_ops.hpp"

#include <ravel/backend.hpp>
#include <ravel/half.hpp>
#include <ravel/lowering/plan.hpp>

#include <spirv/unified1/OpenCL.std.h>

#include <cmath>
#include <string>

namespace rvl::l0 {

using spv::Op;

namespace {
bool is_float(int32_t dt) { return dt == RVL_DTYPE_F32 || dt == RVL_DTYPE_F64; }
uint32_t bits(int32_t dt) { return uint32_t(rvl::dtype_size(dt) * 8); }
}  // namespace

// Note [Halves in SPIR-V]
// f16 and bf16 are stored and moved as 16-bit integers (Int16 capability, like Int8 for bool
// and u8 an unconditional one here: every Level Zero device and PoCL has both) and converted with
// integer operations and selects, a transcription of <ravel/half.hpp>'s narrow_float_bits (the
// same routine the C lowering renders, Note [Half storage] in sdk/lowering/src/c_source.cpp):
// round to nearest even from the source itself (f64 -> f16 never through f32), overflow to
// infinity, NaN quiet with its payload's top bits, subnormals kept. Not OpFConvert on a
// Float16 type: bf16 has no SPIR-V type at all, the NaN payload and rounding-mode defaults of an
// f16 OpFConvert are the device compiler's, and the arithmetic is f32 anyway
// (lower::widen_halves). An integer source is converted to f32 first (ScalarOps knows nothing of
// the device's fp64), exact for |x| <= 2^24: wider integers may round twice (docs/dtypes.md).

Id ScalarOps::type(int32_t dt) {
  return is_float(dt) ? b_.t_float(bits(dt)) : b_.t_int(bits(dt));  // halves: 16-bit integers
}
Id ScalarOps::cond_type() { return b_.t_bool(); }

Id ScalarOps::zero(int32_t dt) {
  return is_float(dt) ? b_.c_float(bits(dt), 0.0) : b_.c_int(bits(dt), 0);
}

Id ScalarOps::constant(const rvl_instruction& ins) { return constant(ins.dtype, ins.value); }
Id ScalarOps::constant(int32_t dt, const rvl_scalar& value) {
  if (is_float(dt)) return b_.c_float(bits(dt), value.f);  // binary32: rounded to nearest
  if (dtype_is_half(dt))
    return b_.c_int(16, dt == RVL_DTYPE_F16 ? rvl::f16_bits_from(value.f) : rvl::bf16_bits_from(value.f));
  if (dt == RVL_DTYPE_BOOL) return b_.c_int(8, value.i != 0 ? 1 : 0);
  return b_.c_int(bits(dt), uint64_t(value.i));  // modular, like CAST from i64
}

Id ScalarOps::identity(int32_t reduce_op, int32_t dt) {
  return constant(dt, lower::reduce_identity(reduce_op, dt));
}

std::pair<Id, Id> ScalarOps::lse_merge(int32_t dt, Id m, Id s, Id m2, Id s2) {
  const Id t = type(dt), c = cond_type(), none = identity(RVL_REDUCE_MAX, dt), z = zero(dt);
  const Id nan = b_.op(Op::OpLogicalOr, c, {b_.op(Op::OpIsNan, c, {m}), b_.op(Op::OpIsNan, c, {m2})});
  const Id n = b_.op(Op::OpSelect, t, {b_.op(Op::OpFOrdLessThan, c, {m, m2}), m2, m});
  auto part = [&](Id mi, Id si) {  // si * exp(mi - n), or 0 when mi is -inf
    const Id scaled = b_.op(Op::OpFMul, t, {si, b_.ext(t, OpenCLLIB::Exp, {b_.op(Op::OpFSub, t, {mi, n})})});
    return b_.op(Op::OpSelect, t, {b_.op(Op::OpFOrdEqual, c, {mi, none}), z, scaled});
  };
  const Id sum = b_.op(Op::OpFAdd, t, {part(m, s), part(m2, s2)});
  const Id special = b_.op(Op::OpLogicalOr, c, {nan, b_.op(Op::OpIsInf, c, {n})});
  return {b_.op(Op::OpSelect, t, {nan, b_.op(Op::OpFAdd, t, {m, m2}), n}),  // NaN + x is NaN
          b_.op(Op::OpSelect, t, {special, z, sum})};
}

Id ScalarOps::lse_result(int32_t dt, int32_t out_dt, Id m, Id s) {
  if (out_dt != dt) m = cast(dt, out_dt, m), s = cast(dt, out_dt, s);
  const Id t = type(out_dt), c = cond_type();
  const Id special = b_.op(Op::OpLogicalOr, c, {b_.op(Op::OpIsNan, c, {m}), b_.op(Op::OpIsInf, c, {m})});
  return b_.op(Op::OpSelect, t, {special, m, b_.op(Op::OpFAdd, t, {m, b_.ext(t, OpenCLLIB::Log, {s})})});
}

Id ScalarOps::combine(int32_t reduce_op, int32_t dt, Id a, Id b) {
  switch (reduce_op) {
    case RVL_REDUCE_SUM: return add(dt, a, b);
    case RVL_REDUCE_MAX: return max(dt, a, b);
    case RVL_REDUCE_PROD: return mul(dt, a, b);
    default: break;
  }
  fail(RVL_STATUS_INTERNAL, "level_zero: cannot combine with reduce op " +
                                std::to_string(reduce_op));
}

Id ScalarOps::select(int32_t dt, Id cond, Id a, Id b) {
  return b_.op(Op::OpSelect, type(dt), {cond, a, b});
}
Id ScalarOps::to_cond(int32_t dt, Id v) {
  if (is_float(dt)) return b_.op(Op::OpFUnordNotEqual, cond_type(), {v, zero(dt)});  // NaN: true
  return b_.op(Op::OpINotEqual, cond_type(), {v, zero(dt)});
}
Id ScalarOps::from_cond(Id c) {
  return b_.op(Op::OpSelect, b_.t_int(8), {c, b_.c_int(8, 1), b_.c_int(8, 0)});
}
Id ScalarOps::normalize_bool(Id stored) { return from_cond(to_cond(RVL_DTYPE_U8, stored)); }

// Bool registers hold 0/1, so or/and on them are the bitwise ones.
Id ScalarOps::add(int32_t dt, Id a, Id b) {
  if (is_float(dt)) return b_.op(Op::OpFAdd, type(dt), {a, b});
  if (dt == RVL_DTYPE_BOOL) return b_.op(Op::OpBitwiseOr, type(dt), {a, b});
  return b_.op(Op::OpIAdd, type(dt), {a, b});  // wraps: no NoSignedWrap decoration
}
Id ScalarOps::mul(int32_t dt, Id a, Id b) {
  if (is_float(dt)) return b_.op(Op::OpFMul, type(dt), {a, b});
  if (dt == RVL_DTYPE_BOOL) return b_.op(Op::OpBitwiseAnd, type(dt), {a, b});
  return b_.op(Op::OpIMul, type(dt), {a, b});
}
// Float MAX propagates NaN (the first NaN operand), which OpenCL's fmax does not: spelled out.
Id ScalarOps::max(int32_t dt, Id a, Id b) {
  if (dt == RVL_DTYPE_BOOL) return b_.op(Op::OpBitwiseOr, type(dt), {a, b});
  if (!is_float(dt)) {
    const Op gt = dtype_is_signed_int(dt) ? Op::OpSGreaterThan : Op::OpUGreaterThan;
    return select(dt, b_.op(gt, cond_type(), {a, b}), a, b);
  }
  const Id a_nan = b_.op(Op::OpIsNan, cond_type(), {a});
  const Id b_nan = b_.op(Op::OpIsNan, cond_type(), {b});
  const Id gt = select(dt, b_.op(Op::OpFOrdGreaterThan, cond_type(), {a, b}), a, b);
  return select(dt, a_nan, a, select(dt, b_nan, b, gt));
}
Id ScalarOps::less(int32_t dt, Id a, Id b) {
  if (is_float(dt)) return b_.op(Op::OpFOrdLessThan, cond_type(), {a, b});
  return b_.op(dtype_is_signed_int(dt) ? Op::OpSLessThan : Op::OpULessThan, cond_type(), {a, b});
}

// Integer division never traps and never is undefined: x / 0 == 0, MIN / -1 == MIN (the wrapped
// negation). The divisor is replaced by 1 where the hardware instruction would be undefined and
// the defined answer is selected afterwards.
Id ScalarOps::idiv(int32_t dt, Id a, Id b) {
  const Id t = type(dt);
  if (is_float(dt))
    return b_.ext(t, OpenCLLIB::Trunc, {b_.op(Op::OpFDiv, t, {a, b})});
  const Id by_zero = b_.op(Op::OpIEqual, cond_type(), {b, zero(dt)});
  const Id one = b_.c_int(bits(dt), 1);
  if (!dtype_is_signed_int(dt)) {
    const Id q = b_.op(Op::OpUDiv, t, {a, select(dt, by_zero, one, b)});
    return select(dt, by_zero, zero(dt), q);
  }
  const Id by_m1 = b_.op(Op::OpIEqual, cond_type(), {b, b_.c_int(bits(dt), ~uint64_t(0))});
  const Id unsafe = b_.op(Op::OpLogicalOr, cond_type(), {by_zero, by_m1});
  const Id q = b_.op(Op::OpSDiv, t, {a, select(dt, unsafe, one, b)});
  const Id neg = b_.op(Op::OpSNegate, t, {a});  // a / -1, wrapping at MIN
  return select(dt, by_zero, zero(dt), select(dt, by_m1, neg, q));
}
// C remainder (sign of the dividend); x % 0 == 0 and MIN % -1 == 0. Floats: fmod.
Id ScalarOps::mod(int32_t dt, Id a, Id b) {
  const Id t = type(dt);
  if (is_float(dt)) return b_.ext(t, OpenCLLIB::Fmod, {a, b});
  const Id by_zero = b_.op(Op::OpIEqual, cond_type(), {b, zero(dt)});
  const Id one = b_.c_int(bits(dt), 1);
  if (!dtype_is_signed_int(dt)) {
    const Id r = b_.op(Op::OpUMod, t, {a, select(dt, by_zero, one, b)});
    return select(dt, by_zero, zero(dt), r);
  }
  const Id by_m1 = b_.op(Op::OpIEqual, cond_type(), {b, b_.c_int(bits(dt), ~uint64_t(0))});
  const Id unsafe = b_.op(Op::OpLogicalOr, cond_type(), {by_zero, by_m1});
  const Id r = b_.op(Op::OpSRem, t, {a, select(dt, unsafe, one, b)});
  return select(dt, unsafe, zero(dt), r);
}

// Float -> integer: truncate toward zero, saturate at the target's range, NaN -> 0. SPIR-V
// leaves out-of-range conversions undefined, so the conversion only decides in-range values.
Id ScalarOps::float_to_int(int32_t from, int32_t to, Id v) {
  const uint32_t fb = bits(from), tb = bits(to);
  const Id t = type(to);
  Id too_big, too_small, max_v, min_v;
  if (dtype_is_signed_int(to)) {
    const double lim = std::ldexp(1.0, int(tb) - 1);  // 2^(n-1), exact
    too_big = b_.op(Op::OpFOrdGreaterThanEqual, cond_type(), {v, b_.c_float(fb, lim)});
    too_small = b_.op(Op::OpFOrdLessThanEqual, cond_type(), {v, b_.c_float(fb, -lim)});
    max_v = b_.c_int(tb, (uint64_t(1) << (tb - 1)) - 1);
    min_v = b_.c_int(tb, uint64_t(1) << (tb - 1));
  } else {  // [0, 2^n - 1]; (-1, 0) truncates to 0 as well
    too_big = b_.op(Op::OpFOrdGreaterThanEqual, cond_type(), {v, b_.c_float(fb, std::ldexp(1.0, int(tb)))});
    too_small = b_.op(Op::OpFOrdLessThan, cond_type(), {v, b_.c_float(fb, 0.0)});
    max_v = b_.c_int(tb, ~uint64_t(0));  // masked to the width
    min_v = zero(to);
  }
  const Id conv = b_.op(dtype_is_signed_int(to) ? Op::OpConvertFToS : Op::OpConvertFToU, t, {v});
  const Id is_nan = b_.op(Op::OpIsNan, cond_type(), {v});
  Id r = select(to, too_big, max_v, conv);
  r = select(to, too_small, min_v, r);
  return select(to, is_nan, zero(to), r);
}

// f16 / bf16 bits -> f32, exact: bf16 is an f32's top half; f16 rebiases the exponent, and a
// subnormal m * 2^-24 is formed by a (exact) multiply.
Id ScalarOps::half_to_f32(int32_t from, Id h) {
  const Id u32 = b_.t_int(32), f32 = b_.t_float(32), c = cond_type();
  const Id x = b_.op(Op::OpUConvert, u32, {h});
  auto k = [&](uint32_t v) { return b_.c_int(32, v); };
  if (from == RVL_DTYPE_BF16) return b_.op(Op::OpBitcast, f32, {b_.op(Op::OpShiftLeftLogical, u32, {x, k(16)})});
  const Id sign = b_.op(Op::OpShiftLeftLogical, u32, {b_.op(Op::OpBitwiseAnd, u32, {x, k(0x8000)}), k(16)});
  const Id e = b_.op(Op::OpBitwiseAnd, u32, {b_.op(Op::OpShiftRightLogical, u32, {x, k(10)}), k(0x1f)});
  const Id m = b_.op(Op::OpBitwiseAnd, u32, {x, k(0x3ff)});
  const Id m13 = b_.op(Op::OpShiftLeftLogical, u32, {m, k(13)});
  const Id special = b_.op(Op::OpBitwiseOr, u32, {sign, b_.op(Op::OpBitwiseOr, u32, {k(0x7f800000), m13})});
  const Id normal = b_.op(Op::OpBitwiseOr, u32, {sign, b_.op(Op::OpBitwiseOr, u32, {
      b_.op(Op::OpShiftLeftLogical, u32, {b_.op(Op::OpIAdd, u32, {e, k(112)}), k(23)}), m13})});
  const Id sub = b_.op(Op::OpFMul, f32, {b_.op(Op::OpConvertUToF, f32, {m}), b_.c_float(32, 5.9604644775390625e-8)});
  const Id sub_bits = b_.op(Op::OpBitwiseOr, u32, {sign, b_.op(Op::OpBitcast, u32, {sub})});
  const Id r = b_.op(Op::OpSelect, u32, {b_.op(Op::OpIEqual, c, {e, k(0x1f)}), special,
                                         b_.op(Op::OpSelect, u32, {b_.op(Op::OpIEqual, c, {e, k(0)}), sub_bits, normal})});
  return b_.op(Op::OpBitcast, f32, {r});
}

// f32 / f64 -> f16 / bf16 bits: <ravel/half.hpp>'s narrow_float_bits with selects for its
// branches (every path is computed; shifts are clamped so that none is out of range).
Id ScalarOps::narrow_to_half(int32_t from, int32_t to, Id v) {
  const uint32_t W = bits(from);
  const int SE = W == 64 ? 11 : 8, SM = W == 64 ? 52 : 23;
  const int DE = to == RVL_DTYPE_F16 ? 5 : 8, DM = to == RVL_DTYPE_F16 ? 10 : 7;
  const Id u = b_.t_int(W), i32 = b_.t_int(32), c = cond_type();
  auto k = [&](uint64_t x) { return b_.c_int(W, x); };
  auto k32 = [&](int64_t x) { return b_.c_int(32, uint64_t(x)); };
  auto op = [&](Op o, Id t, Id a, Id b2) { return b_.op(o, t, {a, b2}); };
  auto sel = [&](Id cond, Id a, Id b2) { return b_.op(Op::OpSelect, u, {cond, a, b2}); };
  const Id x = b_.op(Op::OpBitcast, u, {v});
  const uint64_t one = 1;
  const Id sign = op(Op::OpShiftLeftLogical, u, op(Op::OpBitwiseAnd, u, op(Op::OpShiftRightLogical, u, x, k(uint64_t(SE + SM))), k(1)),
                     k(uint64_t(DE + DM)));
  const Id e = op(Op::OpBitwiseAnd, u, op(Op::OpShiftRightLogical, u, x, k(uint64_t(SM))), k((one << SE) - 1));
  const Id m = op(Op::OpBitwiseAnd, u, x, k((one << SM) - 1));
  const Id inf = op(Op::OpBitwiseOr, u, sign, k(((one << DE) - 1) << DM));
  const Id nan = op(Op::OpBitwiseOr, u, inf, op(Op::OpBitwiseOr, u, k(one << (DM - 1)),
                                                op(Op::OpShiftRightLogical, u, m, k(uint64_t(SM - DM)))));
  const Id m_zero = op(Op::OpIEqual, c, m, k(0)), e_zero = op(Op::OpIEqual, c, e, k(0));
  const Id special = sel(m_zero, inf, nan);
  const Id sig = sel(e_zero, m, op(Op::OpBitwiseOr, u, m, k(one << SM)));
  // de = max(e, 1) - src bias + dst bias, in i32 (e < 2^11).
  const Id e32 = W == 32 ? e : b_.op(Op::OpUConvert, i32, {e});
  const Id de = op(Op::OpIAdd, i32, b_.op(Op::OpSelect, i32, {e_zero, k32(1), e32}),
                   k32(-((int64_t(1) << (SE - 1)) - 1) + ((int64_t(1) << (DE - 1)) - 1)));
  const Id below = op(Op::OpSLessThan, c, de, k32(1));
  const Id shift = op(Op::OpIAdd, i32, k32(SM - DM), b_.op(Op::OpSelect, i32, {below, op(Op::OpISub, i32, k32(1), de), k32(0)}));
  const Id tiny = op(Op::OpSGreaterThanEqual, c, shift, k32(SM + 2));
  // Clamp the shift into [SM - DM, SM + 1] (its value where `tiny` is false) for the arithmetic.
  const Id sh32 = b_.op(Op::OpSelect, i32, {tiny, k32(SM + 1), shift});
  const Id sh = W == 32 ? sh32 : b_.op(Op::OpUConvert, u, {sh32});
  Id q = op(Op::OpShiftRightLogical, u, sig, sh);
  const Id rem = op(Op::OpBitwiseAnd, u, sig, op(Op::OpISub, u, op(Op::OpShiftLeftLogical, u, k(1), sh), k(1)));
  const Id tie = op(Op::OpShiftLeftLogical, u, k(1), op(Op::OpISub, u, sh, k(1)));
  const Id odd = op(Op::OpINotEqual, c, op(Op::OpBitwiseAnd, u, q, k(1)), k(0));
  const Id up = b_.op(Op::OpLogicalOr, c, {op(Op::OpUGreaterThan, c, rem, tie),
                                          b_.op(Op::OpLogicalAnd, c, {op(Op::OpIEqual, c, rem, tie), odd})});
  q = op(Op::OpIAdd, u, q, sel(up, k(1), k(0)));
  const Id de_m1 = W == 32 ? op(Op::OpISub, i32, de, k32(1))
                           : b_.op(Op::OpSConvert, u, {op(Op::OpISub, i32, de, k32(1))});
  const Id base = sel(below, k(0), op(Op::OpShiftLeftLogical, u, de_m1, k(uint64_t(DM))));
  const Id mag = op(Op::OpIAdd, u, base, q);
  const Id finite = sel(op(Op::OpUGreaterThanEqual, c, mag, k(((one << DE) - 1) << DM)), inf,
                        op(Op::OpBitwiseOr, u, sign, mag));
  Id r = sel(tiny, sign, finite);
  r = sel(b_.op(Op::OpLogicalAnd, c, {e_zero, m_zero}), sign, r);
  r = sel(op(Op::OpIEqual, c, e, k((one << SE) - 1)), special, r);
  return b_.op(Op::OpUConvert, b_.t_int(16), {r});
}

Id ScalarOps::cast(int32_t from, int32_t to, Id v) {
  if (from == to) return v;
  if (dtype_is_half(from)) {  // widen exactly, then the f32 rules
    v = half_to_f32(from, v);
    from = RVL_DTYPE_F32;
    if (to == from) return v;
  }
  if (dtype_is_half(to)) {
    if (!is_float(from))  // integers through f32 (Note [Halves in SPIR-V])
      v = cast(from, RVL_DTYPE_F32, v), from = RVL_DTYPE_F32;
    return narrow_to_half(from, to, v);
  }
  if (to == RVL_DTYPE_BOOL) return from_cond(to_cond(from, v));
  const Id t = type(to);
  if (is_float(from)) {
    if (is_float(to)) return b_.op(Op::OpFConvert, t, {v});  // round to nearest
    return float_to_int(from, to, v);
  }
  if (is_float(to))
    return b_.op(dtype_is_signed_int(from) ? Op::OpConvertSToF : Op::OpConvertUToF, t, {v});
  // integer/bool -> integer: sign- or zero-extend by the source's signedness, or truncate.
  if (bits(to) == bits(from)) return v;  // bool -> u8
  if (bits(to) > bits(from))
    return b_.op(dtype_is_signed_int(from) ? Op::OpSConvert : Op::OpUConvert, t, {v});
  return b_.op(Op::OpUConvert, t, {v});  // truncation: modular
}

Id ScalarOps::apply(int32_t op, int32_t dt, int32_t sdt, Id a, Id b, Id c) {
  const Id t = type(dt);
  // Exhaustive on purpose (built with -Werror=switch, no default): an op appended to the table
  // does not compile here until its SPIR-V is written.
  switch (static_cast<rvl_op>(op)) {
    case RVL_OP_LOAD:
    case RVL_OP_CONST:
    case RVL_OP_ACC: break;  // operands, emitted by the kernel emitters
    case RVL_OP_CAST: return cast(sdt, dt, a);
    case RVL_OP_NEG:
      return b_.op(is_float(dt) ? Op::OpFNegate : Op::OpSNegate, t, {a});  // ints wrap
    case RVL_OP_RECIP: return b_.op(Op::OpFDiv, t, {b_.c_float(bits(dt), 1.0), a});
    case RVL_OP_SQRT: return b_.ext(t, OpenCLLIB::Sqrt, {a});
    case RVL_OP_EXP2: return b_.ext(t, OpenCLLIB::Exp2, {a});
    case RVL_OP_LOG2: return b_.ext(t, OpenCLLIB::Log2, {a});
    case RVL_OP_SIN: return b_.ext(t, OpenCLLIB::Sin, {a});
    case RVL_OP_TRUNC: return is_float(dt) ? b_.ext(t, OpenCLLIB::Trunc, {a}) : a;
    case RVL_OP_ADD: return add(dt, a, b);
    case RVL_OP_MUL: return mul(dt, a, b);
    case RVL_OP_MAX: return max(dt, a, b);
    case RVL_OP_MOD: return mod(dt, a, b);
    case RVL_OP_IDIV: return idiv(dt, a, b);
    case RVL_OP_CMPLT: return from_cond(less(sdt, a, b));
    case RVL_OP_CMPNE:
      return from_cond(b_.op(is_float(sdt) ? Op::OpFUnordNotEqual : Op::OpINotEqual,
                             cond_type(), {a, b}));  // NaN != x
    case RVL_OP_AND: return b_.op(Op::OpBitwiseAnd, t, {a, b});
    case RVL_OP_OR: return b_.op(Op::OpBitwiseOr, t, {a, b});
    case RVL_OP_XOR: return b_.op(Op::OpBitwiseXor, t, {a, b});
    case RVL_OP_WHERE: return b_.op(Op::OpSelect, t, {to_cond(RVL_DTYPE_BOOL, a), b, c});
    case RVL_OP_COUNT_: break;
  }
  fail(RVL_STATUS_INTERNAL, "level_zero: no SPIR-V for op " + std::to_string(op));
}

}  // namespace rvl::l0
