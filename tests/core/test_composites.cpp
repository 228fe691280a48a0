// Elementwise composites (sub .. square, and the operators) x every dtype they are defined for x
// every view kind, against the naive reference.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include "common.hpp"

namespace bdata = boost::unit_test::data;
using namespace rtest;

namespace {

const Shape kShape = {3, 4, 2};

DType to_f32_if_int(DType t) { return ref::float_type(t) ? t : DType::F32; }
DType to_f32(DType) { return DType::F32; }

std::vector<UnaryRow> unary_rows() {
  return {
      {"logical_not", {DType::Bool}, Domain::Any, [](const Tensor& x) { return x.logical_not(); },
       [](double x, DType) { return double(x == 0); }},
      {"exp", kFloats, Domain::Any, [](const Tensor& x) { return x.exp(); }, [](double x, DType) { return std::exp(x); }},
      // log: Positive inputs (padding's zeros give -inf, which IEEE log also gives).
      {"log", kFloats, Domain::Positive, [](const Tensor& x) { return x.log(); },
       [](double x, DType) { return std::log(x); }},
      {"cos", kFloats, Domain::Any, [](const Tensor& x) { return x.cos(); }, [](double x, DType) { return std::cos(x); }},
      {"tanh", kFloats, Domain::Any, [](const Tensor& x) { return x.tanh(); },
       [](double x, DType) { return std::tanh(x); }},
      {"sigmoid", kFloats, Domain::Any, [](const Tensor& x) { return x.sigmoid(); },
       [](double x, DType) { return 1.0 / (1.0 + std::exp(-x)); }},
      {"relu", kNumeric, Domain::Any, [](const Tensor& x) { return x.relu(); },
       [](double x, DType) { return std::max(x, 0.0); }},
      {"abs", kNumeric, Domain::Any, [](const Tensor& x) { return x.abs(); }, [](double x, DType) { return std::fabs(x); }},
      {"square", kNumeric, Domain::Any, [](const Tensor& x) { return x.square(); }, [](double x, DType) { return x * x; }},
      // Float math on integers and bools computes in f32 (docs/dtypes.md).
      {"exp(int/bool)", kBoolInts, Domain::Any, [](const Tensor& x) { return x.exp(); },
       [](double x, DType) { return std::exp(x); }, to_f32},
      {"log(int/bool)", kBoolInts, Domain::Positive, [](const Tensor& x) { return x.log(); },
       [](double x, DType) { return std::log(x); }, to_f32},
      {"cos(int/bool)", kBoolInts, Domain::Any, [](const Tensor& x) { return x.cos(); },
       [](double x, DType) { return std::cos(x); }, to_f32},
      {"tanh(int/bool)", kBoolInts, Domain::Any, [](const Tensor& x) { return x.tanh(); },
       [](double x, DType) { return std::tanh(x); }, to_f32},
      {"sigmoid(int/bool)", kBoolInts, Domain::Any, [](const Tensor& x) { return x.sigmoid(); },
       [](double x, DType) { return 1.0 / (1.0 + std::exp(-x)); }, to_f32},
      {"operator-(unary)", kSigned, Domain::Any, [](const Tensor& x) { return -x; }, [](double x, DType) { return -x; }},
  };
}

std::vector<BinaryRow> binary_rows() {
  auto cmp = [](auto f) {
    return [f](double x, double y, DType) { return double(f(x, y)); };
  };
  return {
      {"sub", kNumeric, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.sub(b); },
       [](double x, double y, DType) { return x - y; }},
      {"operator-", kNumeric, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a - b; },
       [](double x, double y, DType) { return x - y; }},
      // True division; integers go to f32 first. Padding on the right gives x/0 = +-inf or NaN
      // (IEEE), which the reference reproduces.
      {"div", kNumeric, Domain::Any, Domain::NonZero, [](const Tensor& a, const Tensor& b) { return a.div(b); },
       [](double x, double y, DType t) { return t == DType::F64 ? x / y : double(float(x) / float(y)); }, to_f32_if_int},
      {"operator/", kNumeric, Domain::Any, Domain::NonZero, [](const Tensor& a, const Tensor& b) { return a / b; },
       [](double x, double y, DType t) { return t == DType::F64 ? x / y : double(float(x) / float(y)); }, to_f32_if_int},
      // pow: positive bases, non-zero exponents (0 ** 0 is left out: padding would produce it).
      {"pow", kFloats, Domain::Positive, Domain::NonZero, [](const Tensor& a, const Tensor& b) { return a.pow(b); },
       [](double x, double y, DType) { return std::pow(x, y); }},
      {"minimum", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.minimum(b); },
       [](double x, double y, DType) { return std::min(x, y); }},
      {"operator*", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a * b; },
       [](double x, double y, DType t) { return t == DType::Bool ? double(x != 0 && y != 0) : x * y; }},
      {"operator+", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a + b; },
       [](double x, double y, DType t) { return t == DType::Bool ? double(x != 0 || y != 0) : x + y; }},
      {"gt", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.gt(b); },
       cmp(std::greater<double>()), to_bool},
      {"le", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.le(b); },
       cmp(std::less_equal<double>()), to_bool},
      {"ge", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.ge(b); },
       cmp(std::greater_equal<double>()), to_bool},
      {"eq", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a.eq(b); },
       cmp(std::equal_to<double>()), to_bool},
      {"operator<", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a < b; },
       cmp(std::less<double>()), to_bool},
      {"operator>", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a > b; },
       cmp(std::greater<double>()), to_bool},
      {"operator<=", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a <= b; },
       cmp(std::less_equal<double>()), to_bool},
      {"operator>=", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a >= b; },
       cmp(std::greater_equal<double>()), to_bool},
      {"operator==", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a == b; },
       cmp(std::equal_to<double>()), to_bool},
      {"operator!=", kAllDTypes, Domain::Any, Domain::Any, [](const Tensor& a, const Tensor& b) { return a != b; },
       cmp(std::not_equal_to<double>()), to_bool},
  };
}

}  // namespace

BOOST_DATA_TEST_CASE(unary_composite, bdata::make(unary_rows()), row) { run_unary(row, kShape); }

BOOST_DATA_TEST_CASE(binary_composite, bdata::make(binary_rows()), row) { run_binary(row, kShape); }

// Composites at the edges of their domains, value by value (NumPy's results in the comments).
BOOST_AUTO_TEST_CASE(composite_edge_values) {
  // np.abs(np.array([-3, 0, 3], np.int32)) -> [3 0 3]
  BOOST_TEST(Tensor::from_vector<int32_t>({-3, 0, 3}, {3}).abs().to_vector<int32_t>() == (std::vector<int32_t>{3, 0, 3}),
             boost::test_tools::per_element());
  // np.maximum(np.array([-2, 0, 5]), 0) -> [0 0 5]
  BOOST_TEST(Tensor::from_vector<int64_t>({-2, 0, 5}, {3}).relu().to_vector<int64_t>() == (std::vector<int64_t>{0, 0, 5}),
             boost::test_tools::per_element());
  // np.float32(2) ** np.float32([0.5, -1, 3]) -> [1.4142135 0.5 8.]
  auto p = Tensor::full({3}, 2.0).pow(Tensor::from_vector<float>({0.5f, -1.f, 3.f}, {3})).to_vector<float>();
  BOOST_TEST(p[0] == 1.4142135f, boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(p[1] == 0.5f, boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(p[2] == 8.0f, boost::test_tools::tolerance(1e-5f));
  // sigmoid saturates without NaN: 1/(1+exp(100)) ~ 3.7e-44 (0 in f32), 1/(1+exp(-100)) = 1
  auto s = Tensor::from_vector<float>({-100.f, 100.f}, {2}).sigmoid().to_vector<float>();
  BOOST_TEST(!std::isnan(s[0]));
  BOOST_TEST(s[0] == 0.0f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(s[1] == 1.0f, boost::test_tools::tolerance(1e-6f));
  // tanh(+-20) is +-1 (no inf/inf NaN)
  auto th = Tensor::from_vector<float>({-20.f, 20.f}, {2}).tanh().to_vector<float>();
  BOOST_TEST(th[0] == -1.0f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(th[1] == 1.0f, boost::test_tools::tolerance(1e-6f));
  // integer division promotes: np.array([7, -7]) / np.array([2, 2]) -> [3.5 -3.5] (f32 in Ravel)
  auto d = Tensor::from_vector<int32_t>({7, -7}, {2}).div(Tensor::from_vector<int32_t>({2, 2}, {2}));
  BOOST_TEST((d.dtype() == DType::F32));
  BOOST_TEST(d.to_vector<float>() == (std::vector<float>{3.5f, -3.5f}), boost::test_tools::per_element());
}
