// Running validated kernels: one element at a time, one thread, no vectorisation. Every value
// lives in a register holding an int64 (bool and integer dtypes) or a double (floats); f32
// arithmetic is done in float so results are rounded exactly as the ABI specifies.
// DEVICE: a real backend compiles or dispatches the instruction list to its device instead.
#include "kernel.hpp"

#include <ravel/backend.hpp>

#include <cmath>
#include <cstring>
#include <limits>

namespace tmpl {
namespace {

struct Reg {
  int64_t i = 0;
  double f = 0;
};

bool is_f(int32_t dt) { return rvl::dtype_is_float(dt); }

int64_t wrap(int32_t dt, int64_t x) {  // two's complement wrap-around into dt
  switch (dt) {
    case RVL_DTYPE_BOOL: return x != 0;
    case RVL_DTYPE_U8: return static_cast<uint8_t>(x);
    case RVL_DTYPE_I32: return static_cast<int32_t>(x);  // modular since C++20
    default: return x;
  }
}
Reg norm(int32_t dt, Reg r) {
  if (dt == RVL_DTYPE_F32) r.f = static_cast<float>(r.f);
  else if (!is_f(dt)) r.i = wrap(dt, r.i);
  return r;
}
Reg I(int64_t v) { return Reg{v, 0}; }
Reg F(double v) { return Reg{0, v}; }

Reg load(const View& v, const int64_t* idx, int rank) {
  if (v.empty) return {};
  int64_t a = v.offset;
  for (int d = 0; d < rank; ++d) {
    if (idx[d] < v.lo[d] || idx[d] >= v.hi[d]) return {};  // padding reads as 0
    a += idx[d] * v.stride[d];
  }
  const std::byte* p = v.data + a * int64_t(rvl::dtype_size(v.dtype));
  switch (v.dtype) {
    case RVL_DTYPE_BOOL: case RVL_DTYPE_U8: return I(static_cast<uint8_t>(*p));
    case RVL_DTYPE_I32: { int32_t x; std::memcpy(&x, p, 4); return I(x); }
    case RVL_DTYPE_I64: { int64_t x; std::memcpy(&x, p, 8); return I(x); }
    case RVL_DTYPE_F32: { float x; std::memcpy(&x, p, 4); return F(x); }
    default: { double x; std::memcpy(&x, p, 8); return F(x); }
  }
}

void store(const View& v, const int64_t* idx, int rank, Reg r) {
  int64_t a = v.offset;
  for (int d = 0; d < rank; ++d) a += idx[d] * v.stride[d];
  std::byte* p = v.data + a * int64_t(rvl::dtype_size(v.dtype));
  switch (v.dtype) {
    case RVL_DTYPE_BOOL: case RVL_DTYPE_U8: *p = static_cast<std::byte>(r.i); break;
    case RVL_DTYPE_I32: { const int32_t x = static_cast<int32_t>(r.i); std::memcpy(p, &x, 4); break; }
    case RVL_DTYPE_I64: std::memcpy(p, &r.i, 8); break;
    case RVL_DTYPE_F32: { const float x = static_cast<float>(r.f); std::memcpy(p, &x, 4); break; }
    default: std::memcpy(p, &r.f, 8); break;
  }
}

Reg cast(int32_t to, int32_t from, Reg x) {
  if (to == RVL_DTYPE_BOOL) return I(is_f(from) ? x.f != 0 : x.i != 0);
  if (is_f(to)) return norm(to, F(is_f(from) ? x.f : static_cast<double>(x.i)));
  if (!is_f(from)) return I(wrap(to, x.i));
  if (std::isnan(x.f)) return I(0);
  const double t = std::trunc(x.f);  // saturate: bounds are exact powers of two in double
  const double lo = to == RVL_DTYPE_U8 ? 0 : to == RVL_DTYPE_I32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = to == RVL_DTYPE_U8 ? 256.0 : to == RVL_DTYPE_I32 ? 2147483648.0 : 9223372036854775808.0;
  if (t <= lo) return I(static_cast<int64_t>(lo));
  if (t >= hi) return I(to == RVL_DTYPE_U8 ? 255 : to == RVL_DTYPE_I32 ? INT32_MAX : INT64_MAX);
  return I(static_cast<int64_t>(t));
}

template <class Fn> Reg fmath(int32_t dt, Reg a, Reg b, Fn fn) {
  if (dt == RVL_DTYPE_F32) return F(fn(static_cast<float>(a.f), static_cast<float>(b.f)));
  return F(fn(a.f, b.f));
}

Reg apply(int32_t op, int32_t dt, int32_t sdt, Reg a, Reg b, Reg c) {
  const uint64_t ua = static_cast<uint64_t>(a.i), ub = static_cast<uint64_t>(b.i);
  const bool fp = is_f(sdt);
  // Exhaustive over rvl_op, no default: a new row in the op table fails this build
  // (-Werror=switch) until the template says what it computes.
  switch (static_cast<rvl_op>(op)) {
    case RVL_OP_LOAD: case RVL_OP_CONST: case RVL_OP_ACC: case RVL_OP_COUNT_:
      break;  // not element-wise: evaluate() handles them before calling apply
    case RVL_OP_CAST: return cast(dt, sdt, a);
    case RVL_OP_NEG: return fp ? fmath(dt, a, b, [](auto x, auto) { return -x; }) : I(wrap(dt, int64_t(0 - ua)));
    case RVL_OP_RECIP: return fmath(dt, a, b, [](auto x, auto) { return decltype(x)(1) / x; });
    case RVL_OP_SQRT: return fmath(dt, a, b, [](auto x, auto) { return std::sqrt(x); });
    case RVL_OP_EXP2: return fmath(dt, a, b, [](auto x, auto) { return std::exp2(x); });
    case RVL_OP_LOG2: return fmath(dt, a, b, [](auto x, auto) { return std::log2(x); });
    case RVL_OP_SIN: return fmath(dt, a, b, [](auto x, auto) { return std::sin(x); });
    case RVL_OP_TRUNC: return fp ? fmath(dt, a, b, [](auto x, auto) { return std::trunc(x); }) : a;
    case RVL_OP_ADD:
      if (dt == RVL_DTYPE_BOOL) return I(a.i | b.i);
      return fp ? fmath(dt, a, b, [](auto x, auto y) { return x + y; }) : I(wrap(dt, int64_t(ua + ub)));
    case RVL_OP_MUL:
      if (dt == RVL_DTYPE_BOOL) return I(a.i & b.i);
      return fp ? fmath(dt, a, b, [](auto x, auto y) { return x * y; }) : I(wrap(dt, int64_t(ua * ub)));
    case RVL_OP_MAX:
      if (!fp) return a.i < b.i ? b : a;
      if (std::isnan(a.f)) return a;
      if (std::isnan(b.f)) return b;
      return a.f < b.f ? b : a;
    case RVL_OP_MOD: case RVL_OP_IDIV: {
      if (fp) {
        if (op == RVL_OP_MOD) return fmath(dt, a, b, [](auto x, auto y) { return std::fmod(x, y); });
        return fmath(dt, a, b, [](auto x, auto y) { return std::trunc(x / y); });
      }
      if (b.i == 0) return I(0);      // x / 0 == x % 0 == 0
      if (b.i == -1) return I(op == RVL_OP_MOD ? 0 : wrap(dt, int64_t(0 - ua)));  // MIN / -1 == MIN
      return I(op == RVL_OP_MOD ? a.i % b.i : a.i / b.i);
    }
    case RVL_OP_CMPLT: return I(fp ? a.f < b.f : a.i < b.i);
    case RVL_OP_CMPNE: return I(fp ? a.f != b.f : a.i != b.i);
    case RVL_OP_AND: return I(a.i & b.i);
    case RVL_OP_OR: return I(a.i | b.i);
    case RVL_OP_XOR: return I(wrap(dt, a.i ^ b.i));
    case RVL_OP_WHERE: return a.i ? b : c;
  }
  rvl::fail(RVL_STATUS_INTERNAL, std::string("template: op ") + rvl::op_name(op) +
                                     " reached apply()");
}

// Evaluates the instruction list at idx; `regs` is scratch space of p.n_ins registers.
Reg evaluate(const Program& p, const int64_t* idx, Reg acc, std::vector<Reg>& regs) {
  for (int j = 0; j < p.n_ins; ++j) {
    const rvl_instruction& in = p.ins[j];
    switch (static_cast<rvl_op>(in.op)) {
      case RVL_OP_LOAD: regs[j] = load(p.inputs[in.arg], idx, p.rank); break;
      case RVL_OP_CONST:
        regs[j] = is_f(in.dtype) ? norm(in.dtype, F(in.value.f)) : cast(in.dtype, RVL_DTYPE_I64, I(in.value.i));
        break;
      case RVL_OP_ACC: regs[j] = acc; break;
      case RVL_OP_COUNT_: break;  // rejected by validation
      case RVL_OP_CAST:
      RVL_OP_CASES_COMPUTED {
        const Reg none{};
        regs[j] = apply(in.op, in.dtype, p.ins[in.src[0]].dtype, regs[in.src[0]],
                        in.src[1] >= 0 ? regs[in.src[1]] : none, in.src[2] >= 0 ? regs[in.src[2]] : none);
      }
    }
  }
  return regs[p.n_ins - 1];
}

// Visits every index of shape[0..rank) in row-major order; returns false on an empty space.
template <class Fn> void for_each(int rank, const int64_t* shape, Fn fn) {
  for (int d = 0; d < rank; ++d)
    if (shape[d] == 0) return;
  int64_t idx[RVL_MAX_RANK] = {};
  for (;;) {
    fn(idx);
    int d = rank - 1;
    while (d >= 0 && ++idx[d] == shape[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

Reg identity(int32_t rop, int32_t dt) {
  if (rop == RVL_REDUCE_PROD) return is_f(dt) ? F(1) : I(1);
  if (rop != RVL_REDUCE_MAX) return {};
  switch (dt) {
    case RVL_DTYPE_I32: return I(INT32_MIN);
    case RVL_DTYPE_I64: return I(INT64_MIN);
    case RVL_DTYPE_F32: case RVL_DTYPE_F64: return F(-std::numeric_limits<double>::infinity());
    default: return I(0);
  }
}

}  // namespace

void run_program(const Program& p) {
  std::vector<Reg> regs(static_cast<size_t>(p.n_ins));
  const int32_t dt = p.out.dtype;
  if (p.reduce_op == RVL_REDUCE_NONE) {
    for_each(p.rank, p.shape, [&](const int64_t* idx) { store(p.out, idx, p.rank, evaluate(p, idx, {}, regs)); });
    return;
  }
  // LOGSUMEXP (ABI 1.4) is optional and this backend does not list it in reduce_ops, so the
  // host never sends it; anyone else is told so rather than given a wrong reduction.
  if (p.reduce_op == RVL_REDUCE_LOGSUMEXP)
    rvl::fail(RVL_STATUS_UNSUPPORTED, "template: reduce_op LOGSUMEXP is not implemented (not in reduce_ops)");
  // Reduction: for every kept index, combine over the reduced axes (in the output dtype).
  const int32_t combine = p.reduce_op == RVL_REDUCE_SUM ? RVL_OP_ADD
                          : p.reduce_op == RVL_REDUCE_MAX ? RVL_OP_MAX : RVL_OP_MUL;
  int64_t kept[RVL_MAX_RANK], reduced[RVL_MAX_RANK];
  for (int d = 0; d < p.rank; ++d) {
    const bool r = (p.reduce_axes >> d) & 1u;
    kept[d] = r ? 1 : p.shape[d];
    reduced[d] = r ? p.shape[d] : 1;
  }
  for_each(p.rank, kept, [&](const int64_t* k) {
    Reg acc = identity(p.reduce_op, dt);
    for_each(p.rank, reduced, [&](const int64_t* r) {
      int64_t idx[RVL_MAX_RANK];
      for (int d = 0; d < p.rank; ++d) idx[d] = k[d] + r[d];
      acc = apply(combine, dt, dt, acc, evaluate(p, idx, {}, regs), {});
    });
    store(p.out, k, p.rank, acc);
  });
}

void run_contraction(const Contraction& c) {
  const Program& e = c.epilogue;
  const int br = c.batch_rank, R = br + 2;
  std::vector<Reg> regs(static_cast<size_t>(e.n_ins));
  for_each(R, e.shape, [&](const int64_t* idx) {
    int64_t ia[RVL_MAX_RANK], ib[RVL_MAX_RANK];
    for (int d = 0; d < br; ++d) ia[d] = ib[d] = idx[d];
    ia[br] = idx[br];
    ib[br + 1] = idx[br + 1];
    Reg acc{};  // 0 / false
    for (int64_t k = 0; k < c.k; ++k) {
      ia[br + 1] = k;
      ib[br] = k;
      const Reg prod = apply(RVL_OP_MUL, c.dtype, c.dtype, load(c.a, ia, R), load(c.b, ib, R), {});
      acc = apply(RVL_OP_ADD, c.dtype, c.dtype, acc, prod, {});
    }
    store(e.out, idx, R, evaluate(e, idx, acc, regs));
  });
}

}  // namespace tmpl
