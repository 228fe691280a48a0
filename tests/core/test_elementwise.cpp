// Elementwise primitives (neg .. where, cast) x every dtype they are defined for x every view
// kind of the input, against the naive reference; plus the integer/bool semantics and dtype
// promotion rules spelled out value by value.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <limits>

#include "common.hpp"

namespace bdata = boost::unit_test::data;
using namespace rtest;

namespace {

const Shape kShape = {2, 3, 4};

double neg_f(double x, DType) { return -x; }

std::vector<UnaryRow> unary_rows() {
  std::vector<UnaryRow> rows = {
      {"neg", kNumeric, Domain::Any, [](const Tensor& x) { return x.neg(); }, neg_f},
      {"recip", kFloats, Domain::NonZero, [](const Tensor& x) { return x.recip(); },
       [](double x, DType t) { return in_precision(t, x, [](auto v) { return decltype(v)(1) / v; }); }},
      {"sqrt", kFloats, Domain::NonNeg, [](const Tensor& x) { return x.sqrt(); },
       [](double x, DType t) { return in_precision(t, x, [](auto v) { return std::sqrt(v); }); }},
      {"exp2", kFloats, Domain::Any, [](const Tensor& x) { return x.exp2(); },
       [](double x, DType) { return std::exp2(x); }},
      {"log2", kFloats, Domain::Positive, [](const Tensor& x) { return x.log2(); },
       [](double x, DType) { return std::log2(x); }},
      {"sin", kFloats, Domain::Any, [](const Tensor& x) { return x.sin(); },
       [](double x, DType) { return std::sin(x); }},
      {"trunc", kNumeric, Domain::Any, [](const Tensor& x) { return x.trunc(); },
       [](double x, DType) { return std::trunc(x); }},
  };
  for (DType to : kAllDTypes) {
    // Mixed signs: float -> u8 saturates negatives to 0, integer -> u8 wraps (docs/abi.md 7.3).
    rows.push_back({std::string("cast->") + ravel::dtype_name(to), kAllDTypes, Domain::Any,
                    [to](const Tensor& x) { return x.cast(to); },
                    [to](double x, DType from) { return ref::cast_value(x, from, to); }, [to](DType) { return to; }});
  }
  // Float math on integers and bools computes in f32 (docs/dtypes.md).
  auto f32_math = [](std::string name, Domain d, std::function<Tensor(const Tensor&)> op, double (*f)(double)) {
    return UnaryRow{name + "(int/bool -> f32)", kBoolInts, d, op, [f](double x, DType) { return f(x); },
                    [](DType) { return DType::F32; }};
  };
  rows.push_back(f32_math("recip", Domain::NonZero, [](const Tensor& x) { return x.recip(); },
                          [](double x) { return double(1.0f / float(x)); }));
  rows.push_back(f32_math("sqrt", Domain::NonNeg, [](const Tensor& x) { return x.sqrt(); }, [](double x) { return std::sqrt(x); }));
  rows.push_back(f32_math("exp2", Domain::Any, [](const Tensor& x) { return x.exp2(); }, [](double x) { return std::exp2(x); }));
  rows.push_back(f32_math("log2", Domain::Positive, [](const Tensor& x) { return x.log2(); }, [](double x) { return std::log2(x); }));
  rows.push_back(f32_math("sin", Domain::Any, [](const Tensor& x) { return x.sin(); }, [](double x) { return std::sin(x); }));
  return rows;
}

int64_t as_i(double x) { return static_cast<int64_t>(x); }

std::vector<BinaryRow> binary_rows() {
  return {
      {"add", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.add(b); },
       [](double x, double y, DType t) { return t == DType::Bool ? double(x != 0 || y != 0) : x + y; }},
      {"mul", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.mul(b); },
       [](double x, double y, DType t) { return t == DType::Bool ? double(x != 0 && y != 0) : x * y; }},
      {"maximum", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.maximum(b); },
       [](double x, double y, DType) { return std::max(x, y); }},
      // Integer divisors include 0: x % 0 == 0 and x / 0 == 0.
      {"mod(int)", kInts, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.mod(b); },
       [](double x, double y, DType) { return y == 0 ? 0.0 : std::fmod(x, y); }},
      {"mod(float)", kFloats, Domain::Any, Domain::NonZero, [](const Tensor& a, const Tensor& b) { return a.mod(b); },
       [](double x, double y, DType) { return std::fmod(x, y); }},
      {"idiv(int)", kInts, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.idiv(b); },
       [](double x, double y, DType) { return y == 0 ? 0.0 : std::trunc(x / y); }},
      {"idiv(float)", kFloats, Domain::Any, Domain::NonZero, [](const Tensor& a, const Tensor& b) { return a.idiv(b); },
       [](double x, double y, DType t) {
         return t == DType::F32 ? double(std::trunc(float(x) / float(y))) : std::trunc(x / y);
       }},
      {"lt", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.lt(b); },
       [](double x, double y, DType) { return double(x < y); }, to_bool},
      {"ne", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.ne(b); },
       [](double x, double y, DType) { return double(x != y); }, to_bool},
      // Bitwise on integers (two's complement), logical on bools.
      {"logical_and", kBoolInts, Domain::Any, Domain::Any,
       [](const Tensor& a, const Tensor& b) { return a.logical_and(b); },
       [](double x, double y, DType) { return double(as_i(x) & as_i(y)); }},
      {"logical_or", kBoolInts, Domain::Any, Domain::Any,
       [](const Tensor& a, const Tensor& b) { return a.logical_or(b); },
       [](double x, double y, DType) { return double(as_i(x) | as_i(y)); }},
      {"logical_xor", kBoolInts, Domain::Any, Domain::Any,
       [](const Tensor& a, const Tensor& b) { return a.logical_xor(b); },
       [](double x, double y, DType) { return double(as_i(x) ^ as_i(y)); }},
  };
}

}  // namespace

BOOST_DATA_TEST_CASE(unary_primitive, bdata::make(unary_rows()), row) { run_unary(row, kShape); }

BOOST_DATA_TEST_CASE(binary_primitive, bdata::make(binary_rows()), row) { run_binary(row, kShape); }

BOOST_AUTO_TEST_CASE(where_every_dtype_and_view) {
  uint64_t seed = 500;
  const size_t nk = kAllKinds.size();
  for (DType dt : kAllDTypes)
    for (size_t k = 0; k < nk; ++k) {
      ViewKind kc = kAllKinds[k], ka = kAllKinds[(k + 2) % nk], kb = kAllKinds[(k + 5) % nk];
      guarded(std::string("where dtype=") + ravel::dtype_name(dt) + " cond=" + kind_name(kc) + " a=" + kind_name(ka) +
                  " b=" + kind_name(kb),
              [&] {
                Built c = build(kc, kShape, DType::Bool, Domain::Any, ++seed);
                Built a = build(ka, kShape, dt, Domain::Any, ++seed), b = build(kb, kShape, dt, Domain::Any, ++seed);
                check_tensor(Tensor::where(c.t, a.t, b.t), ref::where(c.r, a.r, b.r, dt));
              });
    }
}

// ---- integer and bool semantics, value by value ---------------------------------------------------
BOOST_AUTO_TEST_CASE(idiv_and_mod_follow_c) {
  for (DType dt : {DType::I32, DType::I64}) {
    BOOST_TEST_CONTEXT(ravel::dtype_name(dt)) {
      auto a = Tensor::from_vector<int64_t>({-7, 7, -7, 7, 5, 0, -5}, {7}).cast(dt);
      auto b = Tensor::from_vector<int64_t>({2, -2, -2, 2, 0, 3, 0}, {7}).cast(dt);
      // C: -7/2 == -3, 7/-2 == -3, -7/-2 == 3; x/0 == 0 by Ravel's definition.
      BOOST_TEST(a.idiv(b).to_vector<int64_t>() == (std::vector<int64_t>{-3, -3, 3, 3, 0, 0, 0}),
                 boost::test_tools::per_element());
      // C: -7%2 == -1, 7%-2 == 1, -7%-2 == -1 (sign of the dividend); x%0 == 0.
      BOOST_TEST(a.mod(b).to_vector<int64_t>() == (std::vector<int64_t>{-1, 1, -1, 1, 0, 0, 0}),
                 boost::test_tools::per_element());
      BOOST_TEST((a.idiv(b).dtype() == dt));
    }
  }
  // Floats: fmod and trunc(a / b).
  auto fa = Tensor::from_vector<double>({-7.5, 7.5, 5.25}, {3});
  auto fb = Tensor::from_vector<double>({2, -2, 0.5}, {3});
  BOOST_TEST(fa.mod(fb).to_vector<double>() == (std::vector<double>{-1.5, 1.5, 0.25}), boost::test_tools::per_element());
  BOOST_TEST(fa.idiv(fb).to_vector<double>() == (std::vector<double>{-3, -3, 10}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(integers_wrap_on_overflow) {
  auto i32 = Tensor::from_vector<int32_t>({2147483647, -2147483647 - 1, 65536}, {3});
  auto one32 = Tensor::from_vector<int32_t>({1, -1, 65536}, {3});
  BOOST_TEST(i32.add(one32).to_vector<int32_t>() == (std::vector<int32_t>{-2147483647 - 1, 2147483647, 131072}),
             boost::test_tools::per_element());
  BOOST_TEST(i32.mul(one32).to_vector<int32_t>()[2] == 0);  // 2^16 * 2^16 wraps to 0
  auto i64 = Tensor::from_vector<int64_t>({INT64_MAX}, {1});
  BOOST_TEST(i64.add(Tensor::from_vector<int64_t>({1}, {1})).to_vector<int64_t>()[0] == INT64_MIN);
  auto u8 = Tensor::from_vector<uint8_t>({250, 0, 16}, {3});
  BOOST_TEST(u8.add(Tensor::from_vector<uint8_t>({10, 0, 16}, {3})).to_vector<uint8_t>() ==
                 (std::vector<uint8_t>{4, 0, 32}),
             boost::test_tools::per_element());
  BOOST_TEST(u8.mul(Tensor::from_vector<uint8_t>({2, 0, 16}, {3})).to_vector<uint8_t>() ==
                 (std::vector<uint8_t>{244, 0, 0}),
             boost::test_tools::per_element());
  BOOST_TEST(u8.neg().to_vector<uint8_t>() == (std::vector<uint8_t>{6, 0, 240}), boost::test_tools::per_element());
  // Integer -> u8 casts wrap modulo 256 (C++ conversion rules); float -> int truncates.
  BOOST_TEST(Tensor::from_vector<int32_t>({-1, 256, 257}, {3}).cast(DType::U8).to_vector<uint8_t>() ==
                 (std::vector<uint8_t>{255, 0, 1}),
             boost::test_tools::per_element());
  BOOST_TEST(Tensor::from_vector<float>({-2.75f, 2.75f, -0.5f}, {3}).cast(DType::I32).to_vector<int32_t>() ==
                 (std::vector<int32_t>{-2, 2, 0}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bool_arithmetic_is_logic) {
  std::vector<uint8_t> av = {0, 0, 1, 1}, bv = {0, 1, 0, 1};
  auto a = Tensor::from_data(av.data(), DType::Bool, {4}), b = Tensor::from_data(bv.data(), DType::Bool, {4});
  auto check = [](const Tensor& t, std::vector<int> want, const char* what) {
    BOOST_TEST_CONTEXT(what) {
      BOOST_TEST((t.dtype() == DType::Bool));
      std::vector<bool> got = t.to_vector<bool>();
      BOOST_REQUIRE_EQUAL(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k) BOOST_TEST(int(got[k]) == want[k]);
    }
  };
  check(a.add(b), {0, 1, 1, 1}, "add = or");
  check(a.mul(b), {0, 0, 0, 1}, "mul = and");
  check(a.maximum(b), {0, 1, 1, 1}, "maximum = or");
  check(a.logical_xor(b), {0, 1, 1, 0}, "xor");
  check(a.logical_not(), {1, 1, 0, 0}, "not");
}

// ---- dtype promotion ---------------------------------------------------------------------------
BOOST_AUTO_TEST_CASE(promote_table) {
  using D = DType;
  struct P { D a, b, want; };
  const std::vector<P> table = {
      {D::Bool, D::Bool, D::Bool}, {D::Bool, D::U8, D::U8},   {D::Bool, D::F64, D::F64}, {D::U8, D::I32, D::I32},
      {D::U8, D::I64, D::I64},     {D::I32, D::I64, D::I64},  {D::I64, D::F32, D::F32},  {D::I32, D::F64, D::F64},
      {D::F32, D::F64, D::F64},    {D::U8, D::F32, D::F32},   {D::U8, D::U8, D::U8}};
  for (const P& p : table)
    BOOST_TEST_CONTEXT(ravel::dtype_name(p.a) << " with " << ravel::dtype_name(p.b)) {
      BOOST_TEST((ravel::promote(p.a, p.b) == p.want));
      BOOST_TEST((ravel::promote(p.b, p.a) == p.want));
      auto x = Tensor::ones({2}, p.a), y = Tensor::ones({2}, p.b);
      BOOST_TEST((x.add(y).dtype() == p.want));
      BOOST_TEST((x.lt(y).dtype() == DType::Bool));
    }
  // Values survive the promotion: u8 200 + i32 -1 = i32 199 (no u8 wrap).
  auto r = Tensor::from_vector<uint8_t>({200}, {1}).add(Tensor::from_vector<int32_t>({-1}, {1}));
  BOOST_TEST((r.dtype() == DType::I32));
  BOOST_TEST(r.to_vector<int32_t>()[0] == 199);
}

BOOST_AUTO_TEST_CASE(scalar_operands) {
  struct S { DType t; double s; DType want; };
  // Float tensor: the scalar adopts its dtype. Integral scalar with an integer tensor: the
  // tensor's dtype. Integral scalar with bool: i64. Non-integral scalar with int/bool: f32.
  const std::vector<S> table = {{DType::F32, 2.5, DType::F32}, {DType::F64, 2, DType::F64}, {DType::I32, 2, DType::I32},
                                {DType::I32, 2.5, DType::F32}, {DType::I64, 3, DType::I64}, {DType::U8, 3, DType::U8},
                                {DType::Bool, 2, DType::I64},  {DType::Bool, 0.5, DType::F32}, {DType::I64, 0.5, DType::F32}};
  for (const S& c : table)
    BOOST_TEST_CONTEXT(ravel::dtype_name(c.t) << " + " << c.s) {
      auto x = Tensor::from_vector<int32_t>({1, 0}, {2}).cast(c.t);
      Tensor sum = x + c.s, rsum = c.s + x;
      BOOST_TEST((sum.dtype() == c.want));
      BOOST_TEST((rsum.dtype() == c.want));
      BOOST_TEST(sum.to_vector<double>() == (std::vector<double>{1 + c.s, c.s}), boost::test_tools::per_element());
      BOOST_TEST(rsum.to_vector<double>() == (std::vector<double>{1 + c.s, c.s}), boost::test_tools::per_element());
    }
  auto i = Tensor::from_vector<int32_t>({1, 2}, {2});
  BOOST_TEST(((2.0 - i).dtype() == DType::I32));
  BOOST_TEST((2.0 - i).to_vector<int32_t>() == (std::vector<int32_t>{1, 0}), boost::test_tools::per_element());
  BOOST_TEST(((i < 1.5).dtype() == DType::Bool));
  BOOST_TEST((i < 1.5).to_vector<int32_t>() == (std::vector<int32_t>{1, 0}), boost::test_tools::per_element());
  BOOST_TEST(((10.0 / Tensor::from_vector<int32_t>({4}, {1})).dtype() == DType::F32));
  BOOST_TEST((10.0 / Tensor::from_vector<int32_t>({4}, {1})).item<float>() == 2.5f);
  BOOST_TEST((-i).to_vector<int32_t>() == (std::vector<int32_t>{-1, -2}), boost::test_tools::per_element());
}

// The ABI's defined edge cases (docs/abi.md 7.2, 7.3), value by value.
BOOST_AUTO_TEST_CASE(abi_defined_edge_values) {
  // MIN / -1 == MIN and MIN % -1 == 0 (no trap).
  auto m32 = Tensor::from_vector<int32_t>({INT32_MIN}, {1}), n32 = Tensor::from_vector<int32_t>({-1}, {1});
  BOOST_TEST(m32.idiv(n32).item<int32_t>() == INT32_MIN);
  BOOST_TEST(m32.mod(n32).item<int32_t>() == 0);
  auto m64 = Tensor::from_vector<int64_t>({INT64_MIN}, {1}), n64 = Tensor::from_vector<int64_t>({-1}, {1});
  BOOST_TEST(m64.idiv(n64).item<int64_t>() == INT64_MIN);
  BOOST_TEST(m64.mod(n64).item<int64_t>() == 0);
  // Saturating float -> int casts: F32 3e9 -> I32 2147483647; -5.5 -> U8 0; 300.7 -> U8 255; NaN -> 0.
  const float inf = std::numeric_limits<float>::infinity();
  auto f = Tensor::from_vector<float>({3e9f, -5.5f, 300.7f, std::nanf(""), -inf, inf}, {6});
  BOOST_TEST(f.cast(DType::I32).to_vector<int32_t>() ==
                 (std::vector<int32_t>{INT32_MAX, -5, 300, 0, INT32_MIN, INT32_MAX}),
             boost::test_tools::per_element());
  BOOST_TEST(f.cast(DType::U8).to_vector<uint8_t>() == (std::vector<uint8_t>{255, 0, 255, 0, 0, 255}),
             boost::test_tools::per_element());
  // NaN -> bool is true.
  BOOST_TEST(f.cast(DType::Bool).to_vector<int32_t>() == (std::vector<int32_t>{1, 1, 1, 1, 1, 1}),
             boost::test_tools::per_element());
  // I64 300 -> U8 44 (modular).
  BOOST_TEST(Tensor::from_vector<int64_t>({300}, {1}).cast(DType::U8).item<uint8_t>() == 44);
  // MAX propagates NaN from either side.
  auto nan1 = Tensor::from_vector<float>({std::nanf(""), 1.f}, {2}), one_nan = Tensor::from_vector<float>({1.f, std::nanf("")}, {2});
  auto mx = nan1.maximum(one_nan).to_vector<float>();
  BOOST_TEST(std::isnan(mx[0]));
  BOOST_TEST(std::isnan(mx[1]));
  // Float idiv by zero: trunc(x / 0) = +-inf (or NaN for 0 / 0); float mod by 0 is NaN.
  auto z = Tensor::from_vector<double>({1, -1, 0}, {3}).idiv(Tensor::zeros({3}, DType::F64)).to_vector<double>();
  BOOST_TEST(z[0] == std::numeric_limits<double>::infinity());
  BOOST_TEST(z[1] == -std::numeric_limits<double>::infinity());
  BOOST_TEST(std::isnan(z[2]));
}

BOOST_AUTO_TEST_CASE(where_with_non_bool_condition_means_nonzero) {
  // docs/dtypes.md: a non-bool condition means c != 0.
  auto c = Tensor::from_vector<int32_t>({0, 2, -1, 0}, {4});
  auto r = Tensor::where(c, Tensor::full({4}, 1.0), Tensor::full({4}, 2.0));
  BOOST_TEST(r.to_vector<float>() == (std::vector<float>{2, 1, 1, 2}), boost::test_tools::per_element());
  auto cf = Tensor::from_vector<float>({0.5f, 0.f}, {2});
  BOOST_TEST(Tensor::where(cf, Tensor::arange(2), Tensor::arange(2) + 10.0).to_vector<int64_t>() ==
                 (std::vector<int64_t>{0, 11}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(apply_reaches_every_primitive_by_its_op_code) {
  // Tensor::apply(RVL_OP_*) is the one generic entry a new primitive's method calls
  // (docs/ops.md): it must agree with the named methods and reject what is not elementwise.
  auto x = Tensor::from_vector<float>({0.25f, 1.0f, 4.0f}, {3});
  BOOST_TEST(x.apply(RVL_OP_SQRT).to_vector<float>() == (std::vector<float>{0.5f, 1.0f, 2.0f}),
             boost::test_tools::per_element());
  auto i = Tensor::from_vector<int32_t>({1, 4, 9}, {3});
  BOOST_TEST((i.apply(RVL_OP_SQRT).dtype() == DType::F32));  // float-only ops promote ints
  BOOST_TEST(i.apply(RVL_OP_NEG).to_vector<int32_t>() == (std::vector<int32_t>{-1, -4, -9}),
             boost::test_tools::per_element());
  BOOST_TEST(x.apply(RVL_OP_ADD, x).to_vector<float>() == (std::vector<float>{0.5f, 2.0f, 8.0f}),
             boost::test_tools::per_element());
  BOOST_TEST((x.apply(RVL_OP_CMPLT, Tensor::full({3}, 2.0)).dtype() == DType::Bool));
  BOOST_CHECK_THROW(x.apply(RVL_OP_ADD), ravel::ValueError);         // binary op, one operand
  BOOST_CHECK_THROW(x.apply(RVL_OP_LOAD), ravel::ValueError);        // not elementwise
  BOOST_CHECK_THROW(x.apply(RVL_OP_COUNT_), ravel::ValueError);      // not an op
  BOOST_CHECK_THROW(x.apply(RVL_OP_SQRT, x), ravel::ValueError);     // unary op, two operands
  BOOST_CHECK_THROW(x.apply(RVL_OP_AND, x), ravel::DTypeError);      // AND accepts no floats
}
