// Helpers and the naive reference evaluator. The reference deliberately shares no code with the
// plugin: it works per element on int64/double values and re-derives every rule from docs/abi.md.
#include "common.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace abitest {

Val I(int64_t i) { return Val{i, 0}; }
Val F(double f) { return Val{0, f}; }

size_t dsize(int32_t dt) {
  static const size_t s[] = {1, 1, 4, 8, 4, 8};
  return s[dt];
}
bool is_float(int32_t dt) { return dt == RVL_DTYPE_F32 || dt == RVL_DTYPE_F64; }

int64_t HostBuf::elems() const { return static_cast<int64_t>(bytes.size() / dsize(dtype)); }

Val HostBuf::get(int64_t idx) const {
  if (idx < 0 || idx >= elems()) BOOST_FAIL("HostBuf::get out of range: " << idx);
  const uint8_t* p = bytes.data() + idx * dsize(dtype);
  switch (dtype) {
    case RVL_DTYPE_BOOL: return I(*p != 0);
    case RVL_DTYPE_U8: return I(*p);
    case RVL_DTYPE_I32: { int32_t v; std::memcpy(&v, p, 4); return I(v); }
    case RVL_DTYPE_I64: { int64_t v; std::memcpy(&v, p, 8); return I(v); }
    case RVL_DTYPE_F32: { float v; std::memcpy(&v, p, 4); return F(v); }
    default: { double v; std::memcpy(&v, p, 8); return F(v); }
  }
}

void HostBuf::set(int64_t idx, Val x) {
  if (idx < 0 || idx >= elems()) BOOST_FAIL("HostBuf::set out of range: " << idx);
  uint8_t* p = bytes.data() + idx * dsize(dtype);
  switch (dtype) {
    case RVL_DTYPE_BOOL: *p = x.i != 0; break;
    case RVL_DTYPE_U8: *p = static_cast<uint8_t>(x.i); break;
    case RVL_DTYPE_I32: { int32_t v = static_cast<int32_t>(x.i); std::memcpy(p, &v, 4); break; }
    case RVL_DTYPE_I64: std::memcpy(p, &x.i, 8); break;
    case RVL_DTYPE_F32: { float v = static_cast<float>(x.f); std::memcpy(p, &v, 4); break; }
    default: std::memcpy(p, &x.f, 8); break;
  }
}

HostBuf make_buf(int32_t dtype, const std::vector<Val>& vals) {
  HostBuf h{dtype, std::vector<uint8_t>(vals.size() * dsize(dtype))};
  for (size_t i = 0; i < vals.size(); ++i) h.set(static_cast<int64_t>(i), vals[i]);
  return h;
}

HostBuf filled(int32_t dtype, int64_t n, const std::function<Val(int64_t)>& f) {
  HostBuf h{dtype, std::vector<uint8_t>(n * dsize(dtype))};
  for (int64_t i = 0; i < n; ++i) h.set(i, f(i));
  return h;
}

// ---- reference arithmetic -------------------------------------------------------------------
namespace {

// Reduce an int64 to the value range of `dt` modulo 2^bits (two's complement).
Val wrap(int32_t dt, int64_t x) {
  switch (dt) {
    case RVL_DTYPE_BOOL: return I(x != 0);
    case RVL_DTYPE_U8: return I(x & 0xff);
    case RVL_DTYPE_I32: {
      int64_t y = x & 0xffffffffLL;
      return I(y >= 0x80000000LL ? y - 0x100000000LL : y);
    }
    default: return I(x);
  }
}
// Round a double result to the float dtype.
Val rf(int32_t dt, double x) { return F(dt == RVL_DTYPE_F32 ? double(float(x)) : x); }

template <class Fn>
Val fl1(int32_t dt, Val a, Fn fn) {
  if (dt == RVL_DTYPE_F32) return F(double(fn(float(a.f))));
  return F(fn(a.f));
}
template <class Fn>
Val fl2(int32_t dt, Val a, Val b, Fn fn) {
  if (dt == RVL_DTYPE_F32) return F(double(fn(float(a.f), float(b.f))));
  return F(fn(a.f, b.f));
}
int64_t imin(int32_t dt) {
  return dt == RVL_DTYPE_I32 ? INT32_MIN : dt == RVL_DTYPE_I64 ? INT64_MIN : 0;
}
uint64_t U(int64_t x) { return static_cast<uint64_t>(x); }

}  // namespace

bool ref_supported(int32_t op, int32_t dt) {
  switch (op) {
    case RVL_OP_NEG: return dt != RVL_DTYPE_BOOL;
    case RVL_OP_RECIP: case RVL_OP_SQRT: case RVL_OP_EXP2: case RVL_OP_LOG2: case RVL_OP_SIN:
      return is_float(dt);
    case RVL_OP_AND: case RVL_OP_OR: case RVL_OP_XOR: return !is_float(dt);
    default: return true;
  }
}

Val ref_cast(int32_t to, int32_t from, Val x) {
  if (to == RVL_DTYPE_BOOL) return I(is_float(from) ? (x.f != 0) : (x.i != 0));
  if (is_float(to)) return is_float(from) ? rf(to, x.f) : rf(to, static_cast<double>(x.i));
  if (!is_float(from)) return wrap(to, x.i);
  if (std::isnan(x.f)) return I(0);
  const double t = std::trunc(x.f);
  switch (to) {
    case RVL_DTYPE_U8: return I(t <= 0 ? 0 : t >= 255 ? 255 : int64_t(t));
    case RVL_DTYPE_I32:
      return I(t <= -2147483648.0 ? INT32_MIN : t >= 2147483647.0 ? INT32_MAX : int64_t(t));
    default:
      return I(t <= -9223372036854775808.0 ? INT64_MIN
               : t >= 9223372036854775808.0 ? INT64_MAX : int64_t(t));
  }
}

Val ref_op(int32_t op, int32_t dt, int32_t sdt, Val a, Val b, Val c) {
  const bool fp = is_float(sdt);
  switch (op) {
    case RVL_OP_CAST: return ref_cast(dt, sdt, a);
    case RVL_OP_NEG: return fp ? fl1(dt, a, [](auto x) { return -x; }) : wrap(dt, int64_t(0 - U(a.i)));
    case RVL_OP_RECIP: return fl1(dt, a, [](auto x) { return decltype(x)(1) / x; });
    case RVL_OP_SQRT: return fl1(dt, a, [](auto x) { return std::sqrt(x); });
    case RVL_OP_EXP2: return fl1(dt, a, [](auto x) { return std::exp2(x); });
    case RVL_OP_LOG2: return fl1(dt, a, [](auto x) { return std::log2(x); });
    case RVL_OP_SIN: return fl1(dt, a, [](auto x) { return std::sin(x); });
    case RVL_OP_TRUNC: return fp ? fl1(dt, a, [](auto x) { return std::trunc(x); }) : a;
    case RVL_OP_ADD:
      if (dt == RVL_DTYPE_BOOL) return I(a.i || b.i);
      return fp ? fl2(dt, a, b, [](auto x, auto y) { return x + y; }) : wrap(dt, int64_t(U(a.i) + U(b.i)));
    case RVL_OP_MUL:
      if (dt == RVL_DTYPE_BOOL) return I(a.i && b.i);
      return fp ? fl2(dt, a, b, [](auto x, auto y) { return x * y; }) : wrap(dt, int64_t(U(a.i) * U(b.i)));
    case RVL_OP_MAX:
      if (!fp) return I(a.i > b.i ? a.i : b.i);
      if (std::isnan(a.f)) return a;
      if (std::isnan(b.f)) return b;
      return F(a.f < b.f ? b.f : a.f);
    case RVL_OP_MOD:
    case RVL_OP_IDIV:
      if (fp) {
        if (op == RVL_OP_MOD) return fl2(dt, a, b, [](auto x, auto y) { return std::fmod(x, y); });
        return fl2(dt, a, b, [](auto x, auto y) { return std::trunc(x / y); });
      }
      if (b.i == 0) return I(0);
      if (b.i == -1 && a.i == imin(dt)) return I(op == RVL_OP_MOD ? 0 : a.i);
      return wrap(dt, op == RVL_OP_MOD ? a.i % b.i : a.i / b.i);
    case RVL_OP_CMPLT: return I(fp ? a.f < b.f : a.i < b.i);
    case RVL_OP_CMPNE: return I(fp ? a.f != b.f : a.i != b.i);
    case RVL_OP_AND: return wrap(dt, a.i & b.i);
    case RVL_OP_OR: return wrap(dt, a.i | b.i);
    case RVL_OP_XOR: return wrap(dt, a.i ^ b.i);
    case RVL_OP_WHERE: return a.i ? b : c;
    default: BOOST_FAIL("ref_op: unexpected op"); return {};
  }
}

Val ref_identity(int32_t rop, int32_t dt) {
  if (rop == RVL_REDUCE_PROD) return is_float(dt) ? F(1) : I(1);
  if (rop == RVL_REDUCE_MAX)
    return is_float(dt) ? F(-std::numeric_limits<double>::infinity()) : I(imin(dt));
  return I(0);
}

void ref_program(const rvl_program& p, const std::vector<const HostBuf*>& inputs, HostBuf& out,
                 const std::function<Val(const int64_t*)>& acc) {
  const int R = p.rank;
  int64_t total = 1;
  for (int d = 0; d < R; ++d) total *= p.shape[d];
  auto address = [&](const rvl_view& v, const int64_t* idx) {
    int64_t a = v.offset;
    for (int d = 0; d < R; ++d) a += idx[d] * v.strides[d];
    return a;
  };
  auto unravel = [&](int64_t lin, int64_t* idx) {
    for (int d = R - 1; d >= 0; --d) idx[d] = lin % p.shape[d], lin /= p.shape[d];
  };
  const int32_t odt = p.output.dtype;
  const int rop = p.reduce_op;
  auto combine = [&](Val x, Val y) {
    const int op = rop == RVL_REDUCE_SUM ? RVL_OP_ADD : rop == RVL_REDUCE_MAX ? RVL_OP_MAX : RVL_OP_MUL;
    return ref_op(op, odt, odt, x, y, {});
  };
  if (rop != RVL_REDUCE_NONE) {  // every output starts at the identity (even for empty extents)
    int64_t kept_total = 1;
    for (int d = 0; d < R; ++d) if (!((p.reduce_axes >> d) & 1)) kept_total *= p.shape[d];
    for (int64_t o = 0; o < kept_total; ++o) {
      int64_t idx[RVL_MAX_RANK] = {}, rest = o;
      for (int d = R - 1; d >= 0; --d)
        if (!((p.reduce_axes >> d) & 1)) idx[d] = rest % p.shape[d], rest /= p.shape[d];
      out.set(address(p.output.view, idx), ref_identity(rop, odt));
    }
  }
  std::vector<Val> regs(p.n_instructions);
  for (int64_t lin = 0; lin < total; ++lin) {
    int64_t idx[RVL_MAX_RANK] = {};
    unravel(lin, idx);
    for (int j = 0; j < p.n_instructions; ++j) {
      const rvl_instruction& in = p.instructions[j];
      switch (in.op) {
        case RVL_OP_LOAD: {
          const rvl_view& v = p.inputs[in.arg].view;
          bool valid = true;
          for (int d = 0; d < R; ++d) valid = valid && idx[d] >= v.valid_lo[d] && idx[d] < v.valid_hi[d];
          regs[j] = valid ? inputs[in.arg]->get(address(v, idx)) : Val{};
          break;
        }
        case RVL_OP_CONST:
          regs[j] = is_float(in.dtype) ? rf(in.dtype, in.value.f) : wrap(in.dtype, in.value.i);
          break;
        case RVL_OP_ACC: regs[j] = acc(idx); break;
        default: {
          const Val none{};
          regs[j] = ref_op(in.op, in.dtype, p.instructions[in.src[0]].dtype, regs[in.src[0]],
                           in.src[1] >= 0 ? regs[in.src[1]] : none, in.src[2] >= 0 ? regs[in.src[2]] : none);
        }
      }
    }
    const int64_t oa = address(p.output.view, idx);
    const Val r = regs.back();
    out.set(oa, rop == RVL_REDUCE_NONE ? r : combine(out.get(oa), r));
  }
}

void check_same(const HostBuf& got, const HostBuf& want, const std::string& ctx, double rel) {
  BOOST_REQUIRE_EQUAL(got.bytes.size(), want.bytes.size());
  int reported = 0;
  for (int64_t i = 0; i < want.elems() && reported < 5; ++i) {
    const Val g = got.get(i), w = want.get(i);
    bool same;
    if (is_float(want.dtype)) {
      same = (std::isnan(g.f) && std::isnan(w.f)) || g.f == w.f ||
             (rel > 0 && std::fabs(g.f - w.f) <= rel * std::fabs(w.f));
    } else {
      same = g.i == w.i;
    }
    if (!same) {
      ++reported;
      BOOST_ERROR(ctx << ": element " << i << " is " << (is_float(want.dtype) ? g.f : double(g.i))
                      << " (i=" << g.i << "), expected "
                      << (is_float(want.dtype) ? w.f : double(w.i)) << " (i=" << w.i << ")");
    }
  }
}

}  // namespace abitest
