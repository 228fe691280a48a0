// Gradient checks of the elementwise ops: every unary and binary primitive and composite that is
// differentiable in its float inputs, in f64, against central finite differences (gradcheck.hpp
// explains eps and the tolerance). Binary ops are checked on equal shapes and under broadcasting;
// comparisons, where, idiv and casts to integers must pass no gradient.
#include "gradcheck.hpp"

using namespace adtest;

namespace {

using Unary = std::function<Tensor(const Tensor&)>;
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;

// Inputs of one unary row, shifted into the op's domain.
using Gen = std::function<Tensor(const Shape&, uint64_t)>;
Gen normal_gen() { return [](const Shape& s, uint64_t seed) { return normal(s, seed); }; }
Gen positive_gen(double lo = 0.5, double hi = 3.0) {
  return [lo, hi](const Shape& s, uint64_t seed) { return uniform(s, seed, lo, hi); };
}
Gen away_gen() { return [](const Shape& s, uint64_t seed) { return signed_away(s, seed); }; }
Gen off_int_gen() { return [](const Shape& s, uint64_t seed) { return off_integers(s, seed); }; }

struct UnaryRow {
  std::string name;
  Gen gen;
  Unary op;
};

const std::vector<UnaryRow>& unary_rows() {
  static const std::vector<UnaryRow> rows = {
      // primitives
      {"neg", normal_gen(), [](const Tensor& x) { return x.neg(); }},
      {"recip", away_gen(), [](const Tensor& x) { return x.recip(); }},
      {"sqrt", positive_gen(), [](const Tensor& x) { return x.sqrt(); }},
      {"exp2", normal_gen(), [](const Tensor& x) { return x.exp2(); }},
      {"log2", positive_gen(), [](const Tensor& x) { return x.log2(); }},
      {"sin", positive_gen(-4.0, 4.0), [](const Tensor& x) { return x.sin(); }},
      {"trunc (gradient 0)", off_int_gen(), [](const Tensor& x) { return x.trunc(); }},
      {"trunc * x", off_int_gen(), [](const Tensor& x) { return x.trunc() * x; }},
      // composites
      {"exp", normal_gen(), [](const Tensor& x) { return x.exp(); }},
      {"log", positive_gen(), [](const Tensor& x) { return x.log(); }},
      {"cos", positive_gen(-4.0, 4.0), [](const Tensor& x) { return x.cos(); }},
      {"tanh", normal_gen(), [](const Tensor& x) { return x.tanh(); }},
      {"sigmoid", normal_gen(), [](const Tensor& x) { return x.sigmoid(); }},
      {"relu", away_gen(), [](const Tensor& x) { return x.relu(); }},
      {"abs", away_gen(), [](const Tensor& x) { return x.abs(); }},
      {"square", normal_gen(), [](const Tensor& x) { return x.square(); }},
      {"operator- (unary)", normal_gen(), [](const Tensor& x) { return -x; }},
      // operators with a scalar on either side
      {"x + 2.5", normal_gen(), [](const Tensor& x) { return x + 2.5; }},
      {"2.5 - x", normal_gen(), [](const Tensor& x) { return 2.5 - x; }},
      {"x * -1.5", normal_gen(), [](const Tensor& x) { return x * -1.5; }},
      {"3 / x", away_gen(), [](const Tensor& x) { return 3.0 / x; }},
      {"x / 4", normal_gen(), [](const Tensor& x) { return x / 4.0; }},
      {"x ^ 3 (negative base, odd integer exponent)", away_gen(),
       [](const Tensor& x) { return x.pow(Tensor::scalar(3.0, DType::F64)); }},
      {"x ^ 2 (negative base, even integer exponent)", away_gen(),
       [](const Tensor& x) { return x.pow(Tensor::scalar(2.0, DType::F64)); }},
      {"x ^ 0.5", positive_gen(), [](const Tensor& x) { return x.pow(Tensor::scalar(0.5, DType::F64)); }},
      {"2 ^ x (pow)", normal_gen(), [](const Tensor& x) { return Tensor::scalar(2.0, DType::F64).pow(x); }},
      // compositions
      {"sin(exp(x)) * log2(x*x + 1)", normal_gen(), [](const Tensor& x) { return x.exp().sin() * (x * x + 1.0).log2(); }},
      {"x * x (one input used twice)", normal_gen(), [](const Tensor& x) { return x * x; }},
      {"sigmoid(tanh(x)) / (1 + x^2)", normal_gen(), [](const Tensor& x) { return x.tanh().sigmoid() / (1.0 + x.square()); }},
  };
  return rows;
}

BOOST_AUTO_TEST_CASE(unary_ops) {
  uint64_t seed = 100;
  for (const auto& row : unary_rows())
    for (const Shape& s : {Shape{3, 4}, Shape{}, Shape{2, 1, 3}}) {
      ++seed;
      gradcheck1(row.name + " shape " + shape_text(s), row.op, row.gen(s, seed), seed);
    }
}

// ---- binary ------------------------------------------------------------------------------------
struct BinaryRow {
  std::string name;
  Gen ga, gb;
  Binary op;
};

const std::vector<BinaryRow>& binary_rows() {
  static const std::vector<BinaryRow> rows = {
      {"add", normal_gen(), normal_gen(), [](const Tensor& a, const Tensor& b) { return a.add(b); }},
      {"mul", normal_gen(), normal_gen(), [](const Tensor& a, const Tensor& b) { return a.mul(b); }},
      {"sub", normal_gen(), normal_gen(), [](const Tensor& a, const Tensor& b) { return a.sub(b); }},
      {"div", normal_gen(), away_gen(), [](const Tensor& a, const Tensor& b) { return a.div(b); }},
      {"pow (positive base)", positive_gen(), normal_gen(), [](const Tensor& a, const Tensor& b) { return a.pow(b); }},
      {"operator+", normal_gen(), normal_gen(), [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"operator-", normal_gen(), normal_gen(), [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"operator*", normal_gen(), normal_gen(), [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"operator/", normal_gen(), away_gen(), [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"a*b + sin(a)/b", normal_gen(), away_gen(), [](const Tensor& a, const Tensor& b) { return a * b + a.sin() / b; }},
  };
  return rows;
}

// Shape pairs: equal, and broadcasting either way.
const std::vector<std::pair<Shape, Shape>> kShapePairs = {
    {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{4}, {3, 4}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {3, 1}}, {{}, {3, 4}}, {{3, 4}, {}}};

BOOST_AUTO_TEST_CASE(binary_ops_with_broadcasting) {
  uint64_t seed = 1000;
  for (const auto& row : binary_rows())
    for (const auto& [sa, sb] : kShapePairs) {
      seed += 2;
      gradcheck2(row.name + " " + shape_text(sa) + " op " + shape_text(sb), row.op, row.ga(sa, seed),
                 row.gb(sb, seed + 1), seed);
    }
}

// maximum / minimum: b = a + d with |d| in [0.2, 1), so no element is within eps of a tie.
BOOST_AUTO_TEST_CASE(maximum_minimum_away_from_ties) {
  uint64_t seed = 2000;
  for (const auto& [sa, sb] : kShapePairs) {
    seed += 3;
    Shape out = ravel::broadcast_shapes(sa, sb);
    // Equal shapes: b = a + d with |d| in [0.2, 1). Broadcasting: |a| in [0.1, 3) and
    // |b| < 0.05, so |a - b| > 0.05 everywhere.
    Tensor a, b;
    if (sa == out && sb == out) {
      a = normal(sa, seed);
      std::vector<double> av = values(a), dv = values(signed_away(sb, seed + 1, 0.2, 1.0));
      for (size_t k = 0; k < av.size(); ++k) av[k] += dv[k];
      b = host(av, sb);
    } else {
      a = signed_away(sa, seed, 0.1, 3.0);
      b = uniform(sb, seed + 1, -0.05, 0.05);
    }
    std::string shapes = " " + shape_text(sa) + " op " + shape_text(sb);
    gradcheck2("maximum" + shapes, [](const Tensor& x, const Tensor& y) { return x.maximum(y); }, a, b, seed);
    gradcheck2("minimum" + shapes, [](const Tensor& x, const Tensor& y) { return x.minimum(y); }, a, b, seed);
    gradcheck2("maximum(x,y) * minimum(x,y) + x" + shapes,
               [](const Tensor& x, const Tensor& y) { return x.maximum(y) * x.minimum(y) + x; }, a, b, seed);
  }
}

// a % b (C semantics, sign of the dividend) and idiv: a = q * b with q off the integers, so a/b
// is never within eps of a jump. d(a % b)/da = 1, d/db = -trunc(a / b); idiv is flat.
BOOST_AUTO_TEST_CASE(mod_and_idiv_away_from_jumps) {
  uint64_t seed = 3000;
  for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{2, 3}, {}}}) {
    seed += 3;
    Tensor b = signed_away(sb, seed, 0.7, 2.0);
    Tensor q = off_integers(sa, seed + 1);
    Tensor a = host(values(q * b.expand(sa)), sa);
    std::string shapes = " " + shape_text(sa) + " op " + shape_text(sb);
    gradcheck2("mod" + shapes, [](const Tensor& x, const Tensor& y) { return x.mod(y); }, a, b, seed);
    gradcheck2("idiv (gradient 0) * a + a" + shapes,
               [](const Tensor& x, const Tensor& y) { return x.idiv(y) * x + x; }, a, b, seed);
    gradcheck2("sin(a % b) * b" + shapes, [](const Tensor& x, const Tensor& y) { return x.mod(y).sin() * y; }, a, b,
               seed);
  }
}

// where(cond, a, b) with cond computed from a third float input c (its gradient is 0) and all
// three broadcasting against each other; the comparisons and logical ops make masks only.
BOOST_AUTO_TEST_CASE(where_and_comparisons) {
  uint64_t seed = 4000;
  // The inputs; the lambdas' own parameters are named c, a, b.
  Tensor c_in = signed_away({3, 4}, seed, 0.2, 2.0);
  Tensor a_in = normal({4}, seed + 1), b_in = normal({3, 1}, seed + 2);
  auto f3 = [](std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> f) {
    return [f](const std::vector<Tensor>& v) { return f(v[0], v[1], v[2]); };
  };
  gradcheck("where(c > 0, a, b)", f3([](const Tensor& c, const Tensor& a, const Tensor& b) {
              return Tensor::where(c.gt(Tensor::scalar(0.0, DType::F64)), a, b);
            }), {c_in, a_in, b_in}, seed);
  gradcheck("where(c < 0, a * c, sin(b) + c)", f3([](const Tensor& c, const Tensor& a, const Tensor& b) {
              return Tensor::where(c < 0.0, a * c, b.sin() + c);
            }), {c_in, a_in, b_in}, seed);
  gradcheck("where((c > 0.5) and not (c >= 1.5) or (c <= -1), a, b)",
            f3([](const Tensor& c, const Tensor& a, const Tensor& b) {
              Tensor m = (c > 0.5).logical_and((c >= 1.5).logical_not()).logical_or(c <= -1.0);
              return Tensor::where(m, a, b);
            }), {c_in, a_in, b_in}, seed);
  gradcheck("where(c != a, c, a) + where(c == c, b, a)  (xor/ne/eq masks)",
            f3([](const Tensor& c, const Tensor& a, const Tensor& b) {
              Tensor m = c.ne(a).logical_xor((c > 1.0));
              return Tensor::where(m, c, a) + Tensor::where(c.eq(c), b, a);
            }), {c_in, a_in, b_in}, seed);
  // comparison results cast to float are constants: the gradient of c * (c > 0) is (c > 0).
  gradcheck1("c * cast(c > 0)", [](const Tensor& c) { return c * (c > 0.0).cast(DType::F64); }, c_in, seed);
  gradcheck1("c * cast(c.lt(0.3)) + c.le(c)", [](const Tensor& c) {
    return c * c.lt(Tensor::scalar(0.3, DType::F64)).cast(DType::F64) + c.le(c).cast(DType::F64);
  }, c_in, seed);
}

// cast: f64 -> f32 -> f64 passes the gradient through (rounded to f32), f64 -> integer -> f64
// passes none. Finite differences do not work across an f32 round trip (it is a staircase at
// eps = 1e-6), so these are checked against the analytic gradients.
BOOST_AUTO_TEST_CASE(cast_gradients) {
  Tensor x = normal({3, 4}, 5000), u = normal({3, 4}, 5001);
  std::vector<double> uv = values(u);
  guarded("f64 -> f32 -> f64", [&] {
    Tensor y = x.cast(DType::F32).cast(DType::F64) * 3.0;
    std::vector<double> want(uv.size());
    for (size_t k = 0; k < uv.size(); ++k) want[k] = static_cast<double>(static_cast<float>(3.0 * uv[k]));
    check_values("gradient", ravel::gradients(y, {x}, u)[0], {3, 4}, want, 1e-6, 1e-6);
  });
  guarded("f64 -> f64 (no-op cast)", [&] {
    Tensor y = x.cast(DType::F64) * 2.0;
    std::vector<double> want(uv.size());
    for (size_t k = 0; k < uv.size(); ++k) want[k] = 2.0 * uv[k];
    check_values("gradient", ravel::gradients(y, {x}, u)[0], {3, 4}, want, 1e-12, 1e-12);
  });
  for (DType it : {DType::I32, DType::I64, DType::U8, DType::Bool})
    guarded(std::string("f64 -> ") + ravel::dtype_name(it) + " -> f64 (gradient 0)", [&] {
      Tensor y = (x * 3.0).cast(it).cast(DType::F64) + x;  // only the "+ x" term has a gradient
      check_values("gradient", ravel::gradients(y, {x}, u)[0], {3, 4}, uv, 1e-12, 1e-12);
      gradcheck1("fd", [it](const Tensor& v) { return (v * 3.0).cast(it).cast(DType::F64) + v; },
                 host(values(off_integers({3, 4}, 5002) / 3.0), {3, 4}), 5003);
    });
  guarded("f32 input gets an f32 gradient", [&] {
    Tensor x32 = x.cast(DType::F32);
    x32 = Tensor::from_vector<float>(x32.to_vector<float>(), {3, 4});
    Tensor g = ravel::gradients((x32 * x32).sum(), {x32})[0];
    BOOST_CHECK(g.dtype() == DType::F32);
    std::vector<float> xv = x32.to_vector<float>(), gv = g.to_vector<float>();
    for (size_t k = 0; k < xv.size(); ++k) BOOST_CHECK_CLOSE(gv[k], 2.0f * xv[k], 1e-4);
  });
}

}  // namespace

namespace {
// pow at an exponent of exactly 0 (a^0 = 1 is special-cased in the composite): the derivative
// with respect to the exponent is still a^0 ln a = ln a (as in JAX and PyTorch), and 0 with
// respect to the base.
BOOST_AUTO_TEST_CASE(pow_at_exponent_zero) {
  gradcheck2("pow(a, 0) for positive a", [](const Tensor& a, const Tensor& b) { return a.pow(b); },
             uniform({4}, 6000, 0.5, 3.0), Tensor::zeros({4}, DType::F64), 6000);
}
}  // namespace
