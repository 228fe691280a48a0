#include "scalar_ops.hpp"

#include <ravel/backend.hpp>
#include <ravel/lowering/plan.hpp>

#include <spirv/unified1/OpenCL.std.h>

#include <string>

namespace rvl::l0 {

using spv::Op;

namespace {
bool is_float(int32_t dt) { return dt == RVL_DTYPE_F32 || dt == RVL_DTYPE_F64; }
// i32 and i64 are two's-complement signed; bool and u8 are unsigned bytes.
bool is_signed(int32_t dt) { return dt == RVL_DTYPE_I32 || dt == RVL_DTYPE_I64; }
uint32_t bits(int32_t dt) { return uint32_t(rvl::dtype_size(dt) * 8); }
}  // namespace

Id ScalarOps::type(int32_t dt) {
  return is_float(dt) ? b_.t_float(bits(dt)) : b_.t_int(bits(dt));
}
Id ScalarOps::cond_type() { return b_.t_bool(); }

Id ScalarOps::zero(int32_t dt) {
  return is_float(dt) ? b_.c_float(bits(dt), 0.0) : b_.c_int(bits(dt), 0);
}

Id ScalarOps::constant(const rvl_instruction& ins) { return constant(ins.dtype, ins.value); }
Id ScalarOps::constant(int32_t dt, const rvl_scalar& value) {
  if (is_float(dt)) return b_.c_float(bits(dt), value.f);  // binary32: rounded to nearest
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
    const Op gt = is_signed(dt) ? Op::OpSGreaterThan : Op::OpUGreaterThan;
    return select(dt, b_.op(gt, cond_type(), {a, b}), a, b);
  }
  const Id a_nan = b_.op(Op::OpIsNan, cond_type(), {a});
  const Id b_nan = b_.op(Op::OpIsNan, cond_type(), {b});
  const Id gt = select(dt, b_.op(Op::OpFOrdGreaterThan, cond_type(), {a, b}), a, b);
  return select(dt, a_nan, a, select(dt, b_nan, b, gt));
}
Id ScalarOps::less(int32_t dt, Id a, Id b) {
  if (is_float(dt)) return b_.op(Op::OpFOrdLessThan, cond_type(), {a, b});
  return b_.op(is_signed(dt) ? Op::OpSLessThan : Op::OpULessThan, cond_type(), {a, b});
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
  if (!is_signed(dt)) {
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
  if (!is_signed(dt)) {
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
  if (is_signed(to)) {
    const double lim = tb == 64 ? 9223372036854775808.0 : 2147483648.0;  // 2^(n-1), exact
    too_big = b_.op(Op::OpFOrdGreaterThanEqual, cond_type(), {v, b_.c_float(fb, lim)});
    too_small = b_.op(Op::OpFOrdLessThanEqual, cond_type(), {v, b_.c_float(fb, -lim)});
    max_v = b_.c_int(tb, (uint64_t(1) << (tb - 1)) - 1);
    min_v = b_.c_int(tb, uint64_t(1) << (tb - 1));
  } else {  // u8: [0, 255]; (-1, 0) truncates to 0 as well
    too_big = b_.op(Op::OpFOrdGreaterThanEqual, cond_type(), {v, b_.c_float(fb, 256.0)});
    too_small = b_.op(Op::OpFOrdLessThan, cond_type(), {v, b_.c_float(fb, 0.0)});
    max_v = b_.c_int(tb, 255);
    min_v = zero(to);
  }
  const Id conv = b_.op(is_signed(to) ? Op::OpConvertFToS : Op::OpConvertFToU, t, {v});
  const Id is_nan = b_.op(Op::OpIsNan, cond_type(), {v});
  Id r = select(to, too_big, max_v, conv);
  r = select(to, too_small, min_v, r);
  return select(to, is_nan, zero(to), r);
}

Id ScalarOps::cast(int32_t from, int32_t to, Id v) {
  if (from == to) return v;
  if (to == RVL_DTYPE_BOOL) return from_cond(to_cond(from, v));
  const Id t = type(to);
  if (is_float(from)) {
    if (is_float(to)) return b_.op(Op::OpFConvert, t, {v});  // round to nearest
    return float_to_int(from, to, v);
  }
  if (is_float(to))
    return b_.op(is_signed(from) ? Op::OpConvertSToF : Op::OpConvertUToF, t, {v});
  // integer/bool -> integer: sign- or zero-extend by the source's signedness, or truncate.
  if (bits(to) == bits(from)) return v;  // bool -> u8
  if (bits(to) > bits(from))
    return b_.op(is_signed(from) ? Op::OpSConvert : Op::OpUConvert, t, {v});
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
