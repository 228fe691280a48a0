// Every row of the decomposition table (<ravel/decompose.hpp>) against the reference
// interpreter: for each dtype the row covers, a program applying the op to edge values (NaN,
// infinities, signed zeros, subnormals, the largest finite values, integer MIN/MAX; every pair
// of them for binary ops) is run as written and as rewritten for a device lacking the op, and the
// two results must agree: exactly (NaN where NaN) for EXACT ops, within 2 ulps for SQRT (a
// ROUNDING op whose rewrite rounds four times). The rewritten program must not contain the op.
// Also: chains of several lacking ops, refusals naming op and dtype, and rvl::effective_ops.
//
// A plain program (not Boost.Test): tests/sdk is built with the SDK, before the test framework.
#include <ravel/conformance/reference.hpp>
#include <ravel/decompose.hpp>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace {

int g_failures = 0, g_checks = 0;
#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    ++g_checks;                                                           \
    if (!(cond)) {                                                        \
      ++g_failures;                                                       \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
      std::printf(__VA_ARGS__);                                           \
      std::printf("\n");                                                  \
    }                                                                     \
  } while (0)

using rvl::ref::HostBuffer;
using rvl::ref::Value;

std::vector<Value> edge_values(int32_t dt) {
  std::vector<Value> v;
  if (rvl::decompose_detail::is_float(dt)) {
    const bool f32 = dt == RVL_DTYPE_F32;
    const double inf = INFINITY, big = f32 ? 3.4028234663852886e38 : std::numeric_limits<double>::max();
    const double sub = f32 ? 1.401298464324817e-45 : 4.9406564584124654e-324;
    const double edge = f32 ? 8388608.5 : 4503599627370495.5;  // just below 2^23 / 2^52, not integral
    for (double f : {std::nan(""), inf, -inf, 0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -2.5, 2.0, 3.0, 10.0,
                     7.25, -1e10, 1e-30, 123456.789, sub, -sub, big, -big, edge, -edge, 1e20, -3e15})
      v.push_back(rvl::ref::fval(f));
  } else if (dt == RVL_DTYPE_BOOL) {
    v = {rvl::ref::ival(0), rvl::ref::ival(1)};
  } else {
    const int64_t mn = dt == RVL_DTYPE_I32 ? INT32_MIN : dt == RVL_DTYPE_I64 ? INT64_MIN : 0;
    const int64_t mx = dt == RVL_DTYPE_I32 ? INT32_MAX : dt == RVL_DTYPE_I64 ? INT64_MAX : 255;
    for (int64_t i : {mn, mx, mn + 1, mx - 1, int64_t(-1), int64_t(0), int64_t(1), int64_t(2), int64_t(-7),
                      int64_t(100), int64_t(128)})
      v.push_back(rvl::ref::ival(i));
  }
  return v;
}

rvl_instruction ins(int32_t op, int32_t dt, int32_t a = -1, int32_t b = -1, int32_t c = -1, int32_t arg = 0) {
  rvl_instruction in{};
  in.op = op;
  in.dtype = dt;
  in.src[0] = a;
  in.src[1] = b;
  in.src[2] = c;
  in.arg = arg;
  return in;
}

// Runs `code` over n elements of the contiguous inputs on the reference interpreter.
HostBuffer run(const std::vector<rvl_instruction>& code, const std::vector<HostBuffer>& inputs, int64_t n) {
  std::vector<rvl_operand> ops;
  std::vector<const HostBuffer*> ptrs;
  for (const HostBuffer& b : inputs) {
    rvl_operand o{};
    o.struct_size = sizeof o;
    o.dtype = b.dtype;
    o.view.struct_size = sizeof o.view;
    o.view.strides[0] = 1;
    o.view.valid_hi[0] = n;
    ops.push_back(o);
    ptrs.push_back(&b);
  }
  rvl_program p{};
  p.struct_size = sizeof p;
  p.rank = 1;
  p.shape[0] = n;
  p.n_inputs = int32_t(ops.size());
  p.inputs = ops.data();
  p.n_instructions = int32_t(code.size());
  p.instructions = code.data();
  p.output = ops.empty() ? rvl_operand{} : ops[0];
  p.output.dtype = code.back().dtype;
  HostBuffer out(code.back().dtype, n);
  rvl::ref::run_program(p, ptrs, out);
  return out;
}

// Distance in units of the last place of `dt` between two finite floats.
double ulps(double a, double b, int32_t dt) {
  const double m = std::max(std::fabs(a), std::fabs(b));
  const int digits = dt == RVL_DTYPE_F32 ? 24 : 53;
  const double min_normal = dt == RVL_DTYPE_F32 ? 1.1754943508222875e-38 : std::numeric_limits<double>::min();
  const double ulp = std::ldexp(1.0, std::ilogb(std::max(m, min_normal)) - digits + 1);
  return std::fabs(a - b) / ulp;
}

bool same(Value a, Value b, int32_t dt, double tolerance_ulps) {
  if (!rvl::decompose_detail::is_float(dt)) return a.i == b.i;
  if (std::isnan(a.f) || std::isnan(b.f)) return std::isnan(a.f) && std::isnan(b.f);
  if (std::isinf(a.f) || std::isinf(b.f)) return a.f == b.f;
  return a.f == b.f || ulps(a.f, b.f, dt) <= tolerance_ulps;
}

// The rewrite of `code` for a device lacking `lacking`; checks it succeeded and no lacking op is left.
std::vector<rvl_instruction> rewrite(const std::vector<rvl_instruction>& code, uint64_t lacking, const std::string& what) {
  rvl::Rewriter r(RVL_OPS_ALL & ~lacking);
  const bool ok = r.rewrite(code.data(), int32_t(code.size()));
  CHECK(ok, "%s: %s", what.c_str(), r.error().c_str());
  for (const rvl_instruction& in : r.result())
    CHECK(!((lacking >> in.op) & 1u), "%s: the rewrite still contains %s", what.c_str(), rvl::op_info(in.op).name);
  return r.result();
}

void check_row(const rvl::Decomposition& d, int32_t dt) {
  const int arity = rvl::op_info(d.op).arity;
  const int32_t rdt = rvl::op_result_dtype(d.op, dt) >= 0 ? rvl::op_result_dtype(d.op, dt) : dt;
  const std::vector<Value> vals = edge_values(dt);
  std::vector<HostBuffer> inputs;
  int64_t n = int64_t(vals.size());
  if (arity == 1) {
    inputs.emplace_back(dt, n);
    for (int64_t i = 0; i < n; ++i) inputs[0].set(i, vals[size_t(i)]);
  } else {  // every ordered pair
    n = int64_t(vals.size() * vals.size());
    inputs.emplace_back(dt, n);
    inputs.emplace_back(dt, n);
    for (int64_t i = 0; i < n; ++i) {
      inputs[0].set(i, vals[size_t(i) / vals.size()]);
      inputs[1].set(i, vals[size_t(i) % vals.size()]);
    }
  }
  std::vector<rvl_instruction> code;
  for (int k = 0; k < arity; ++k) code.push_back(ins(RVL_OP_LOAD, dt, -1, -1, -1, k));
  code.push_back(ins(d.op, rdt, 0, arity > 1 ? 1 : -1));
  const std::string what = std::string(rvl::op_info(d.op).name) + " on " + rvl::decompose_detail::dtype_text(dt);
  const std::vector<rvl_instruction> lowered = rewrite(code, RVL_OP_BIT(d.op), what);
  const HostBuffer want = run(code, inputs, n), got = run(lowered, inputs, n);
  const double tol = d.op == RVL_OP_SQRT ? 2.0 : 0.0;
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; ++i) {
    const Value w = want.get(i), g = got.get(i);
    if (same(w, g, rdt, tol)) continue;
    ++bad;
    CHECK(false, "%s: element %" PRId64 " (%g, %g | %" PRId64 ", %" PRId64 "): want %.17g / %" PRId64 ", got %.17g / %" PRId64,
          what.c_str(), i, inputs[0].get(i).f, arity > 1 ? inputs[1].get(i).f : 0.0, inputs[0].get(i).i,
          arity > 1 ? inputs[1].get(i).i : int64_t(0), w.f, w.i, g.f, g.i);
  }
  ++g_checks;
}

// SQRT over a dense sweep of exponents (its accuracy depends on |log2 x|).
void check_sqrt_sweep(int32_t dt) {
  HostBuffer x(dt, 4000);
  for (int64_t i = 0; i < 4000; ++i) x.set(i, rvl::ref::fval(std::ldexp(1.0 + (i % 97) / 97.0, int(i % 251) - 125)));
  const std::vector<rvl_instruction> code = {ins(RVL_OP_LOAD, dt), ins(RVL_OP_SQRT, dt, 0)};
  const HostBuffer want = run(code, {x}, 4000), got = run(rewrite(code, RVL_OP_BIT(RVL_OP_SQRT), "SQRT sweep"), {x}, 4000);
  double worst = 0;
  for (int64_t i = 0; i < 4000; ++i) worst = std::max(worst, ulps(want.get(i).f, got.get(i).f, dt));
  CHECK(worst <= 2.0, "SQRT on %s: %g ulps off the correctly rounded root", rvl::decompose_detail::dtype_text(dt), worst);
}

// Decompositions whose own ops are lacking too: MAX and CMPNE and XOR and NEG at once, in one
// program whose last instruction is itself rewritten.
void check_chain() {
  const int32_t f = RVL_DTYPE_F32, b = RVL_DTYPE_BOOL;
  std::vector<rvl_instruction> code = {
      ins(RVL_OP_LOAD, f, -1, -1, -1, 0), ins(RVL_OP_LOAD, f, -1, -1, -1, 1),
      ins(RVL_OP_MAX, f, 0, 1),           ins(RVL_OP_NEG, f, 2),
      ins(RVL_OP_CMPNE, b, 3, 0),         ins(RVL_OP_CMPLT, b, 1, 3),
      ins(RVL_OP_XOR, b, 4, 5)};
  const std::vector<Value> vals = edge_values(f);
  const int64_t n = int64_t(vals.size() * vals.size());
  std::vector<HostBuffer> in{HostBuffer(f, n), HostBuffer(f, n)};
  for (int64_t i = 0; i < n; ++i) {
    in[0].set(i, vals[size_t(i) / vals.size()]);
    in[1].set(i, vals[size_t(i) % vals.size()]);
  }
  const uint64_t lacking = RVL_OP_BIT(RVL_OP_MAX) | RVL_OP_BIT(RVL_OP_NEG) | RVL_OP_BIT(RVL_OP_CMPNE) | RVL_OP_BIT(RVL_OP_XOR);
  const HostBuffer want = run(code, in, n), got = run(rewrite(code, lacking, "chain"), in, n);
  int64_t diff = 0;
  for (int64_t i = 0; i < n; ++i) diff += want.get(i).i != got.get(i).i;
  CHECK(diff == 0, "chain: %" PRId64 " of %" PRId64 " elements differ", diff, n);
  // TRUNC of an integer is its source: the result must still be the last instruction.
  const std::vector<rvl_instruction> t =
      rewrite({ins(RVL_OP_LOAD, RVL_DTYPE_I32), ins(RVL_OP_LOAD, RVL_DTYPE_I32, -1, -1, -1, 1), ins(RVL_OP_TRUNC, RVL_DTYPE_I32, 0)},
              RVL_OP_BIT(RVL_OP_TRUNC), "TRUNC i32");
  CHECK(t.size() == 3 && t[2].op == RVL_OP_CAST && t[2].src[0] == 0, "TRUNC i32 is a copy of its source as the last instruction");
}

void check_refusals() {
  rvl::Rewriter r(RVL_OPS_ALL & ~RVL_OP_BIT(RVL_OP_SIN));
  const std::vector<rvl_instruction> sin = {ins(RVL_OP_LOAD, RVL_DTYPE_F64), ins(RVL_OP_SIN, RVL_DTYPE_F64, 0)};
  CHECK(!r.rewrite(sin.data(), 2), "SIN has no decomposition");
  CHECK(r.error().find("SIN on f64") != std::string::npos, "the refusal names op and dtype: %s", r.error().c_str());
  // AND has a row for bool only; on i32 it is refused.
  rvl::Rewriter a(RVL_OPS_ALL & ~RVL_OP_BIT(RVL_OP_AND));
  const std::vector<rvl_instruction> and_i32 = {ins(RVL_OP_LOAD, RVL_DTYPE_I32), ins(RVL_OP_AND, RVL_DTYPE_I32, 0, 0)};
  CHECK(!a.rewrite(and_i32.data(), 2) && a.error().find("AND on i32") != std::string::npos, "%s", a.error().c_str());
  // MAX decomposes into WHERE; without WHERE as well it is refused, naming WHERE.
  rvl::Rewriter w(RVL_OPS_ALL & ~RVL_OP_BIT(RVL_OP_MAX) & ~RVL_OP_BIT(RVL_OP_WHERE));
  const std::vector<rvl_instruction> mx = {ins(RVL_OP_LOAD, RVL_DTYPE_I64), ins(RVL_OP_MAX, RVL_DTYPE_I64, 0, 0)};
  CHECK(!w.rewrite(mx.data(), 2) && w.error().find("WHERE on i64") != std::string::npos, "%s", w.error().c_str());
  // A device with every op: the program comes back unchanged.
  rvl::Rewriter all(RVL_OPS_ALL);
  CHECK(all.rewrite(sin.data(), 2) && all.result().size() == 2 && all.result()[1].op == RVL_OP_SIN, "identity rewrite");
}

void check_masks() {
  CHECK(rvl::effective_ops(0) == RVL_OPS_1_0, "0 reads as the 1.0 table");
  CHECK(rvl::effective_ops(RVL_OP_BIT(RVL_OP_ADD)) == (RVL_OP_BIT(RVL_OP_ADD) | RVL_OPS_REQUIRED), "required rows are implied");
  CHECK(rvl::effective_ops(~0ull) == RVL_OPS_ALL, "unknown rows are dropped");
  CHECK(RVL_OPS_1_0 == 0x3FFFFFull, "the 1.0 table has 22 rows, LOAD..WHERE");
}

}  // namespace

int main() {
  int rows = 0;
  for (const rvl::Decomposition& d : rvl::decompositions())
    for (int32_t dt = 0; dt < RVL_DTYPE_COUNT_; ++dt)
      if (d.applies(dt) && rvl::op_accepts(d.op, dt)) {
        check_row(d, dt);
        ++rows;
      }
  check_sqrt_sweep(RVL_DTYPE_F32);
  check_sqrt_sweep(RVL_DTYPE_F64);
  check_chain();
  check_refusals();
  check_masks();
  std::printf("%d (row, dtype) pairs, %d checks, %d failures\n", rows, g_checks, g_failures);
  return g_failures == 0 && rows >= 20 ? 0 : 1;
}
