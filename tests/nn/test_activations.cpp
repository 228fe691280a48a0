// softplus, silu, elu, leaky_relu, hardsigmoid and hardswish against torch.nn.functional's
// definitions written here in double, and their derivatives at the kinks as torch's backward
// kernels define them (finite-difference checks away from the kinks are in
// tests/autodiff/test_gradcheck_composite_ops.cpp).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ravel/nn.hpp"
#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;
namespace nn = ravel::nn;

namespace {

const std::vector<double> kX = {-1000, -30, -6, -3.5, -3, -2, -1, -0.25, 0, 0.25, 1, 2, 3, 3.5, 6, 19.9, 20.1, 30, 1000};

void check(const std::string& name, const std::function<Tensor(const Tensor&)>& f, const std::function<double(double)>& ref) {
  for (DType t : {DType::F32, DType::F64}) {
    BOOST_TEST_CONTEXT(name << " " << ravel::dtype_name(t)) {
      std::vector<double> got = f(Tensor::from_vector<double>(kX, {int64_t(kX.size())}).cast(t)).to_vector<double>();
      for (size_t k = 0; k < kX.size(); ++k) {
        double want = ref(kX[k]);
        double tol = (t == DType::F32 ? 3e-7 : 1e-15) * std::max(1.0, std::fabs(want));
        BOOST_CHECK_MESSAGE(std::fabs(got[k] - want) <= tol, name << "(" << kX[k] << ") = " << got[k] << ", want " << want);
      }
    }
  }
}

// d/dx of sum f at each point of xs.
std::vector<double> derivative(const std::function<Tensor(const Tensor&)>& f, const std::vector<double>& xs) {
  return ravel::grad([f](const Tensor& v) { return f(v).sum(); })(Tensor::from_vector<double>(xs, {int64_t(xs.size())}))
      .to_vector<double>();
}

}  // namespace

BOOST_AUTO_TEST_CASE(values_against_torch_definitions) {
  check("softplus", [](const Tensor& x) { return nn::softplus(x); },
        [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); });
  check("softplus(beta=2, threshold=5)", [](const Tensor& x) { return nn::softplus(x, 2.0, 5.0); },
        [](double x) { return 2 * x > 5 ? x : std::log1p(std::exp(2 * x)) / 2; });
  check("silu", [](const Tensor& x) { return nn::silu(x); }, [](double x) { return x / (1 + std::exp(-x)); });
  check("elu", [](const Tensor& x) { return nn::elu(x); }, [](double x) { return x > 0 ? x : std::expm1(x); });
  check("elu(alpha=0.5)", [](const Tensor& x) { return nn::elu(x, 0.5); }, [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); });
  check("leaky_relu", [](const Tensor& x) { return nn::leaky_relu(x); }, [](double x) { return x > 0 ? x : 0.01 * x; });
  check("leaky_relu(0.2)", [](const Tensor& x) { return nn::leaky_relu(x, 0.2); }, [](double x) { return x > 0 ? x : 0.2 * x; });
  check("hardsigmoid", [](const Tensor& x) { return nn::hardsigmoid(x); },
        [](double x) { return std::min(std::max(x + 3, 0.0), 6.0) / 6; });
  check("hardswish", [](const Tensor& x) { return nn::hardswish(x); },
        [](double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; });
}

BOOST_AUTO_TEST_CASE(derivatives_at_the_kinks_as_torch) {
  // torch's elu_backward: alpha e^x for x <= 0; leaky_relu_backward: slope for x <= 0.
  BOOST_CHECK_EQUAL(derivative([](const Tensor& x) { return nn::elu(x, 0.5); }, {0.0})[0], 0.5);
  BOOST_CHECK_EQUAL(derivative([](const Tensor& x) { return nn::leaky_relu(x, 0.2); }, {0.0})[0], 0.2);
  // hardsigmoid_backward: 1/6 strictly inside (-3, 3), 0 at and beyond +-3.
  std::vector<double> hs = derivative([](const Tensor& x) { return nn::hardsigmoid(x); }, {-3.0, -1.0, 3.0, 4.0});
  BOOST_CHECK((hs == std::vector<double>{0, 1.0 / 6, 0, 0}));
  // hardswish_backward: 0 below -3, x/3 + 1/2 on [-3, 3], 1 above.
  std::vector<double> hw = derivative([](const Tensor& x) { return nn::hardswish(x); }, {-4.0, -3.0, 0.0, 3.0, 4.0});
  BOOST_CHECK((hw == std::vector<double>{0, -0.5, 0.5, 1.5, 1}));
  // softplus: exactly 1 above the threshold, and finite (no 0 * inf) where e^(beta x) overflows.
  std::vector<double> sp = derivative([](const Tensor& x) { return nn::softplus(x); }, {1000.0, 21.0, 0.0, -1000.0});
  BOOST_CHECK_EQUAL(sp[0], 1.0);
  BOOST_CHECK_EQUAL(sp[1], 1.0);
  BOOST_CHECK_CLOSE(sp[2], 0.5, 1e-12);
  BOOST_CHECK_EQUAL(sp[3], 0.0);
  std::vector<double> el = derivative([](const Tensor& x) { return nn::elu(x); }, {1000.0, -1000.0});
  BOOST_CHECK_EQUAL(el[0], 1.0);
  BOOST_CHECK_EQUAL(el[1], 0.0);
  BOOST_CHECK_THROW(nn::softplus(Tensor::zeros({2}), 0.0), ravel::ValueError);
}
