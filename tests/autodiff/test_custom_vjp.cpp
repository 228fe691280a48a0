// ravel::custom_vjp (Note [Custom derivatives]): a value whose gradient is its own rule, not the
// chain rule through the ops that computed it. Expected values are closed forms computed here;
// the rules below are deliberately different from the true derivative where that shows which
// one autodiff used.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "ravel/autodiff.hpp"
#include "ravel/ravel.hpp"

using ravel::Tensor;

namespace {
const std::vector<double> kX = {-2.0, -0.5, 0.0, 0.75, 3.0};
Tensor xs() { return Tensor::from_vector<double>(kX, {5}); }

// x^3 with its rule written out: 3 x^2 g. Differentiating the rule gives the higher orders.
Tensor cube(const Tensor& x) {
  return ravel::custom_vjp(x * x * x, {x}, [](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
    return std::vector<Tensor>{g * in[0] * in[0] * 3.0};
  }, "cube");
}

void check(const Tensor& got, const std::vector<double>& want, double tol = 1e-12) {
  std::vector<double> v = got.to_vector<double>();
  BOOST_REQUIRE_EQUAL(v.size(), want.size());
  for (size_t i = 0; i < v.size(); ++i) BOOST_TEST(std::abs(v[i] - want[i]) <= tol * (1 + std::abs(want[i])));
}
}  // namespace

// The straight-through estimator: trunc's true derivative is 0 almost everywhere, the rule says
// 1, and the gradient is the rule's.
BOOST_AUTO_TEST_CASE(rule_replaces_the_chain_rule) {
  Tensor x = xs();
  Tensor y = ravel::custom_vjp(x.trunc(), {x}, [](const std::vector<Tensor>&, const Tensor&, const Tensor& g) {
    return std::vector<Tensor>{g};
  });
  check(y, {-2.0, -0.0, 0.0, 0.0, 3.0});
  check(ravel::gradients((y * y).sum(), {x})[0], {-4.0, 0.0, 0.0, 0.0, 6.0});  // 2 trunc(x) * 1
  // Without the rule, trunc passes no gradient.
  check(ravel::gradients((x.trunc() * x.trunc()).sum(), {x})[0], {0, 0, 0, 0, 0});
}

BOOST_AUTO_TEST_CASE(higher_orders_differentiate_the_rule) {
  ravel::UnaryFn f = [](const Tensor& x) { return cube(x).sum(); };
  std::vector<double> d1, d2, d3;
  for (double v : kX) d1.push_back(3 * v * v), d2.push_back(6 * v), d3.push_back(6);
  ravel::UnaryFn g1 = ravel::grad(f);
  ravel::UnaryFn g2 = ravel::grad(ravel::UnaryFn([&](const Tensor& x) { return g1(x).sum(); }));
  ravel::UnaryFn g3 = ravel::grad(ravel::UnaryFn([&](const Tensor& x) { return g2(x).sum(); }));
  check(g1(xs()), d1);
  check(g2(xs()), d2);
  check(g3(xs()), d3);
  // Forward mode (jvp by double vjp) goes through the rule too: d/dt cube(x + t v) = 3 x^2 v.
  Tensor v = Tensor::from_vector<double>({1, 2, 3, 4, 5}, {5});
  auto [y, t] = ravel::jvp([](const std::vector<Tensor>& a) { return cube(a[0]); }, {xs()}, {v});
  std::vector<double> want;
  for (size_t i = 0; i < kX.size(); ++i) want.push_back(3 * kX[i] * kX[i] * (i + 1));
  check(t, want);
  // hessian of sum(cube(x)): diag(6 x).
  std::vector<double> h = ravel::hessian(f)(xs()).to_vector<double>();
  for (size_t i = 0; i < 5; ++i)
    for (size_t j = 0; j < 5; ++j) BOOST_TEST(h[i * 5 + j] == (i == j ? 6 * kX[i] : 0.0), boost::test_tools::tolerance(1e-12));
}

// Several inputs; a tensor used inside but not listed gets no gradient from this value.
BOOST_AUTO_TEST_CASE(gradients_flow_to_the_listed_inputs_only) {
  Tensor a = xs(), b = xs() * 2.0, c = Tensor::full({5}, 7.0, ravel::DType::F64);
  Tensor y = ravel::custom_vjp(a * b + c, {a, b}, [](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
    return std::vector<Tensor>{g * in[1], Tensor()};  // d/da only; none for b
  });
  std::vector<Tensor> gs = ravel::gradients(y.sum(), {a, b, c});
  std::vector<double> want_a, zeros(5, 0.0);
  for (double v : kX) want_a.push_back(2 * v);
  check(gs[0], want_a);
  check(gs[1], zeros);
  check(gs[2], zeros);
  // The rule receives the output too: d exp(x) = exp(x) g, read from the output.
  Tensor x = xs();
  Tensor e = ravel::custom_vjp(x.exp(), {x}, [](const std::vector<Tensor>&, const Tensor& out, const Tensor& g) {
    return std::vector<Tensor>{g * out};
  });
  std::vector<double> want;
  for (double v : kX) want.push_back(std::exp(v));
  check(ravel::gradients(e.sum(), {x})[0], want);
}

BOOST_AUTO_TEST_CASE(bad_rules_and_arguments_are_typed_errors) {
  Tensor x = xs();
  Tensor two = ravel::custom_vjp(x * 2.0, {x}, [](const std::vector<Tensor>&, const Tensor&, const Tensor& g) {
    return std::vector<Tensor>{g, g};
  }, "two_grads");
  BOOST_CHECK_EXCEPTION(ravel::gradients(two.sum(), {x}), ravel::ValueError, [](const ravel::ValueError& e) {
    return std::string(e.what()).find("two_grads") != std::string::npos &&
           std::string(e.what()).find("expected one per input (1)") != std::string::npos;
  });
  Tensor shaped = ravel::custom_vjp(x * 2.0, {x}, [](const std::vector<Tensor>&, const Tensor&, const Tensor& g) {
    return std::vector<Tensor>{g.sum()};
  }, "wrong_shape");
  BOOST_CHECK_EXCEPTION(ravel::gradients(shaped.sum(), {x}), ravel::ShapeError, [](const ravel::ShapeError& e) {
    return std::string(e.what()).find("wrong_shape") != std::string::npos &&
           std::string(e.what()).find("[5]") != std::string::npos;
  });
  auto rule = [](const std::vector<Tensor>&, const Tensor&, const Tensor& g) { return std::vector<Tensor>{g}; };
  Tensor i = Tensor::arange(0, 5, 1, ravel::DType::I64);
  BOOST_CHECK_THROW(ravel::custom_vjp(x, {i}, rule), ravel::DTypeError);
  BOOST_CHECK_THROW(ravel::custom_vjp(i, {x}, rule), ravel::DTypeError);
  BOOST_CHECK_THROW(ravel::custom_vjp(x, {x}, ravel::VjpRule()), ravel::ValueError);
  BOOST_CHECK_THROW(ravel::custom_vjp(Tensor(), {x}, rule), ravel::Error);
}

// Under no_grad the value is returned as it is; with grad on, the alias costs no kernel: an
// elementwise chain through tanh (a custom_vjp composite) is still one kernel.
BOOST_AUTO_TEST_CASE(alias_is_free) {
  Tensor x = Tensor::linspace(-3, 3, 64);
  x.realize();
  {
    ravel::NoGradGuard off;
    Tensor y = x.tanh();
    Tensor z = x.tanh();
    BOOST_TEST(y.node() == z.node());  // hash-consed: no unique alias was made
  }
  Tensor y = x.tanh() * 2.0 + 1.0;
  y.realize();
  BOOST_TEST(ravel::last_realization_stats().kernels() == 1);
  std::vector<float> got = y.to_vector<float>(), xv = x.to_vector<float>();
  for (size_t k = 0; k < got.size(); ++k) BOOST_TEST(std::abs(got[k] - (2 * std::tanh(double(xv[k])) + 1)) <= 1e-6);
}

// tanh's and sigmoid's own rules: tanh' = 4e/(1+e)^2 (e = e^-2|x|) and sigmoid' = e/(1+e)^2
// (e = e^-|x|), against those closed forms in double, including x = 0 and the higher orders
// there (tanh''(0) = 0, tanh'''(0) = -2; sigmoid''(0) = 0, sigmoid'''(0) = -1/8).
BOOST_AUTO_TEST_CASE(tanh_and_sigmoid_rules) {
  std::vector<double> dt, ds;
  for (double v : kX) {
    double e = std::exp(-2 * std::abs(v)), f = std::exp(-std::abs(v));
    dt.push_back(4 * e / ((1 + e) * (1 + e)));
    ds.push_back(f / ((1 + f) * (1 + f)));
  }
  Tensor x = xs();
  check(ravel::gradients(x.tanh().sum(), {x})[0], dt);
  check(ravel::gradients(x.sigmoid().sum(), {x})[0], ds);
  auto nth = [](ravel::UnaryFn f, int n) {
    for (int i = 0; i < n; ++i) f = ravel::grad(ravel::UnaryFn([f](const Tensor& t) { return f(t).sum(); }));
    return f;
  };
  Tensor zero = Tensor::zeros({1}, ravel::DType::F64);
  ravel::UnaryFn th = [](const Tensor& t) { return t.tanh(); }, sg = [](const Tensor& t) { return t.sigmoid(); };
  BOOST_TEST(nth(th, 2)(zero).item<double>() == 0.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(nth(th, 3)(zero).item<double>() == -2.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(nth(sg, 2)(zero).item<double>() == 0.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(nth(sg, 3)(zero).item<double>() == -0.125, boost::test_tools::tolerance(1e-12));
}

// relu's rule reads the output (Note [relu at 0]): where(y <= 0, 0, g). It must be exactly the
// chain rule through where(x <= 0, 0, x) at every special value, NaN and -0 included:
// relu'(x) g = g where x > 0 or x is NaN (NaN <= 0 is false, as for torch.relu's
// threshold_backward, whose mask is "x <= 0" on the output), 0 elsewhere, 0 at both zeros.
BOOST_AUTO_TEST_CASE(relu_rule_matches_the_chain_rule) {
  const float inf = INFINITY, nan = NAN;
  const std::vector<float> xv = {-inf, -2.f, -0.f, 0.f, 1e-40f, 3.f, inf, nan};
  Tensor x = Tensor::from_vector<float>(xv, {8});
  Tensor g = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  std::vector<float> got = ravel::gradients(x.relu(), {x}, g)[0].to_vector<float>();
  const std::vector<float> want = {0, 0, 0, 0, 5, 6, 7, 8};  // 1e-40 (subnormal) > 0
  BOOST_TEST(got == want, boost::test_tools::per_element());
  // Forward mode through the rule: the tangent is masked the same way.
  auto [y, ty] = ravel::jvp([](const std::vector<Tensor>& a) { return a[0].relu(); }, {x}, {g});
  BOOST_TEST(ty.to_vector<float>() == want, boost::test_tools::per_element());
  std::vector<float> yv = y.to_vector<float>();
  for (size_t i = 0; i < 7; ++i) BOOST_TEST(yv[i] == std::max(xv[i], 0.f));
  BOOST_TEST(std::isnan(yv[7]));
  // First and second order away from the kink: relu' is 0 or 1, and relu'' is 0 (relu is
  // piecewise linear).
  Tensor p = Tensor::from_vector<double>({-1.5, 0.5, 2.0}, {3});
  ravel::UnaryFn d1 = ravel::grad(ravel::UnaryFn([](const Tensor& t) { return t.relu().sum(); }));
  ravel::UnaryFn d2 = ravel::grad(ravel::UnaryFn([d1](const Tensor& t) { return d1(t).sum(); }));
  check(d1(p), {0.0, 1.0, 1.0});
  check(d2(p), {0.0, 0.0, 0.0});
}
