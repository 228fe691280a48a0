// Optimizers against their update rules computed by hand, and end-to-end training.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "ravel/ravel.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;
namespace tt = boost::test_tools;

// loss = sum((p - target)^2) has gradient 2 (p - target).
static Tensor quadratic(const Tensor& p) { return (p - Tensor::from_vector<double>({3, -1}, {2})).square().sum(); }

BOOST_AUTO_TEST_CASE(sgd_with_momentum_follows_the_rule) {
  Tensor p = Tensor::from_vector<double>({0, 0}, {2}).requires_grad_();
  nn::SGD opt({&p}, 0.1, 0.9);
  double v[2] = {0, 0}, x[2] = {0, 0};
  const double t[2] = {3, -1};
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    quadratic(p).backward();
    opt.step();
    for (int i = 0; i < 2; ++i) {
      double g = 2 * (x[i] - t[i]);
      v[i] = step == 0 ? g : 0.9 * v[i] + g;  // torch.optim.SGD: first buffer is the gradient
      x[i] -= 0.1 * v[i];
    }
    auto got = p.to_vector<double>();
    for (int i = 0; i < 2; ++i) BOOST_TEST(got[i] == x[i], tt::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(adam_follows_the_rule) {
  Tensor p = Tensor::from_vector<double>({0, 0}, {2}).requires_grad_();
  nn::Adam opt({&p}, 0.05);
  double m[2] = {0, 0}, v[2] = {0, 0}, x[2] = {0, 0};
  const double t[2] = {3, -1};
  for (int step = 1; step <= 5; ++step) {
    opt.zero_grad();
    quadratic(p).backward();
    opt.step();
    for (int i = 0; i < 2; ++i) {
      double g = 2 * (x[i] - t[i]);
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      double mh = m[i] / (1 - std::pow(0.9, step)), vh = v[i] / (1 - std::pow(0.999, step));
      x[i] -= 0.05 * mh / (std::sqrt(vh) + 1e-8);
    }
    auto got = p.to_vector<double>();
    for (int i = 0; i < 2; ++i) BOOST_TEST(got[i] == x[i], tt::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(mlp_learns_xor) {
  nn::MLP mlp({2, 16, 1}, nn::Activation::Tanh, 5, ravel::DType::F32);
  nn::Adam opt(mlp.parameters(), 0.05);
  Tensor x = Tensor::from_vector<float>({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2});
  Tensor y = Tensor::from_vector<float>({0, 1, 1, 0}, {4, 1});
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    Tensor loss = nn::mse_loss(mlp(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<float>();
  }
  BOOST_TEST(first > 0.1);
  BOOST_TEST(last < 0.01);
  ravel::NoGradGuard no_grad;
  auto pred = mlp(x).to_vector<float>();
  BOOST_TEST(pred[0] < 0.5f);
  BOOST_TEST(pred[1] > 0.5f);
  BOOST_TEST(pred[2] > 0.5f);
  BOOST_TEST(pred[3] < 0.5f);
}

// backward() realizes the loss with the gradients (one forward pass): reading it launches no
// kernel. step({t}) realizes t in the update's pass, from the parameters before the update.
BOOST_AUTO_TEST_CASE(backward_and_step_realize_alongside) {
  Tensor p = Tensor::from_vector<double>({0, 0}, {2}).requires_grad_();
  nn::SGD opt({&p}, 0.1);
  opt.zero_grad();
  Tensor loss = quadratic(p);
  loss.backward();
  BOOST_TEST(loss.is_realized());
  BOOST_TEST(loss.item<double>() == 10.0, tt::tolerance(1e-12));  // (0-3)^2 + (0+1)^2
  BOOST_TEST(ravel::last_realization_stats().kernels() == 0);
  Tensor doubled = (p * 2.0 + 1.0).sum();  // read before the update: 2
  BOOST_TEST(!doubled.is_realized());
  opt.step({doubled});
  BOOST_TEST(doubled.is_realized());
  BOOST_TEST(doubled.item<double>() == 2.0, tt::tolerance(1e-12));
  BOOST_TEST(ravel::last_realization_stats().kernels() == 0);
  auto got = p.to_vector<double>();
  BOOST_TEST(got[0] == 0.6, tt::tolerance(1e-12));  // 0 - 0.1 * 2 * (0 - 3)
  BOOST_TEST(got[1] == -0.2, tt::tolerance(1e-12));
}
