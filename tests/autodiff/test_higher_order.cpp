// Higher-order derivatives: grad of grad of grad (tanh at 2.0, the JAX autodiff cookbook's
// figures), forward-over-reverse (jvp of grad), reverse-over-forward (grad of jvp), Hessians by
// every composition of jacfwd / jacrev, and gradients with respect to aliased arguments and
// intermediate nodes.
#include "gradcheck.hpp"

using namespace adtest;
using ravel::UnaryFn;

namespace {

Tensor scalar(double v) { return Tensor::scalar(v, DType::F64); }
UnaryFn tanh_fn() { return [](const Tensor& x) { return x.tanh(); }; }

BOOST_AUTO_TEST_CASE(tanh_derivatives_at_2) {
  UnaryFn d1 = ravel::grad(tanh_fn());
  UnaryFn d2 = ravel::grad(d1);
  UnaryFn d3 = ravel::grad(d2);
  UnaryFn d4 = ravel::grad(d3);
  Tensor x = scalar(2.0);
  // The JAX autodiff cookbook prints 0.070650816, -0.13621868, 0.25265405; to 8 decimals:
  BOOST_CHECK_SMALL(d1(x).item<double>() - 0.07065082, 1e-7);
  BOOST_CHECK_SMALL(d2(x).item<double>() - (-0.13621868), 1e-7);
  BOOST_CHECK_SMALL(d3(x).item<double>() - 0.25265408, 1e-7);
  // And exactly, from t = tanh(x): f' = 1 - t^2, f'' = -2 t f', f''' = -2 f'^2 - 2 t f'',
  // f'''' = -6 f' f'' - 2 t f'''.
  const double t = std::tanh(2.0), f1 = 1 - t * t, f2 = -2 * t * f1, f3 = -2 * f1 * f1 - 2 * t * f2,
               f4 = -6 * f1 * f2 - 2 * t * f3;
  BOOST_CHECK_CLOSE(d1(x).item<double>(), f1, 1e-10);
  BOOST_CHECK_CLOSE(d2(x).item<double>(), f2, 1e-10);
  BOOST_CHECK_CLOSE(d3(x).item<double>(), f3, 1e-10);
  BOOST_CHECK_CLOSE(d4(x).item<double>(), f4, 1e-9);
  // The results are 0-d f64 like x.
  BOOST_CHECK(d3(x).shape().empty());
  BOOST_CHECK(d3(x).dtype() == DType::F64);
}

// grad of grad of grad elementwise over a vector (through sum), against the same closed forms.
BOOST_AUTO_TEST_CASE(third_derivative_of_a_vector_function) {
  UnaryFn g1 = ravel::grad(UnaryFn([](const Tensor& x) { return x.tanh().sum(); }));
  UnaryFn g2 = ravel::grad(UnaryFn([g1](const Tensor& x) { return g1(x).sum(); }));
  UnaryFn g3 = ravel::grad(UnaryFn([g2](const Tensor& x) { return g2(x).sum(); }));
  std::vector<double> xs = {-1.5, -0.3, 0.0, 0.4, 2.0};
  std::vector<double> w1, w2, w3;
  for (double v : xs) {
    double t = std::tanh(v), f1 = 1 - t * t, f2 = -2 * t * f1;
    w1.push_back(f1), w2.push_back(f2), w3.push_back(-2 * f1 * f1 - 2 * t * f2);
  }
  Tensor x = host(xs, {5});
  check_values("tanh'", g1(x), {5}, w1, 1e-12, 1e-12);
  check_values("tanh''", g2(x), {5}, w2, 1e-12, 1e-12);
  check_values("tanh'''", g3(x), {5}, w3, 1e-11, 1e-11);
}

BOOST_AUTO_TEST_CASE(forward_over_reverse_and_reverse_over_forward) {
  std::vector<double> xs = {-2.0, -0.5, 0.3, 1.0, 2.5}, ts = {0.7, -1.1, 2.0, 0.25, -0.4};
  Tensor x = host(xs, {5}), t = host(ts, {5});
  std::vector<double> second(5), second_t(5), second_tt(5);
  for (int k = 0; k < 5; ++k) {
    second[k] = -std::sin(xs[k]);
    second_t[k] = -std::sin(xs[k]) * ts[k];
    second_tt[k] = -std::sin(xs[k]) * ts[k] * ts[k];
  }
  // Forward over reverse: jvp of grad(sum sin) = -sin(x) * t.
  UnaryFn g = ravel::grad(UnaryFn([](const Tensor& v) { return v.sin().sum(); }));
  auto [gx, gt] = ravel::jvp([g](const std::vector<Tensor>& a) { return g(a[0]); }, {x}, {t});
  std::vector<double> cosx(5);
  for (int k = 0; k < 5; ++k) cosx[k] = std::cos(xs[k]);
  check_values("jvp(grad sin) primal", gx, {5}, cosx, 1e-12, 1e-12);
  check_values("jvp(grad sin) tangent", gt, {5}, second_t, 1e-12, 1e-12);

  // Reverse over forward: grad of sum(jvp(sin)(x; ones)) = -sin(x).
  UnaryFn h = [](const Tensor& v) {
    return ravel::jvp([](const std::vector<Tensor>& a) { return a[0].sin(); }, {v}, {Tensor::ones_like(v)}).second.sum();
  };
  check_values("grad(jvp sin)", ravel::grad(h)(x), {5}, second, 1e-12, 1e-12);

  // Forward over forward: jvp of (x -> jvp(sin)(x; t)) along t = -sin(x) t^2.
  auto inner = [t](const std::vector<Tensor>& a) {
    return ravel::jvp([](const std::vector<Tensor>& b) { return b[0].sin(); }, {a[0]}, {t}).second;
  };
  check_values("jvp(jvp sin)", ravel::jvp(inner, {x}, {t}).second, {5}, second_tt, 1e-12, 1e-12);

  // Reverse over reverse through vjp: the pullback's result is differentiable again.
  UnaryFn pulled = [t](const Tensor& v) {
    auto r = ravel::vjp([](const std::vector<Tensor>& a) { return a[0].sin(); }, {v});
    return (r.pullback(t)[0]).sum();  // sum(cos(x) * t)
  };
  check_values("grad(vjp sin)", ravel::grad(pulled)(x), {5}, second_t, 1e-12, 1e-12);

  // And the whole second-order machinery against finite differences.
  gradcheck1("grad(sum sin) (its gradient is the Hessian-vector product)", g, x);
  gradcheck1("grad(sum tanh(x)^3)", ravel::grad(UnaryFn([](const Tensor& v) { return (v.tanh() * v.tanh() * v.tanh()).sum(); })), x);
  gradcheck1("grad(logsumexp)", ravel::grad(UnaryFn([](const Tensor& v) { return v.logsumexp(); })), x);
  gradcheck1("grad(softmax . x)", ravel::grad(UnaryFn([](const Tensor& v) { return (v.softmax() * v).sum(); })), x);
}

BOOST_AUTO_TEST_CASE(hessians_every_way) {
  // f(x) = x^T A x + sum(sin(x)) * x0: H = A + A^T - diag(sin x) * x0 + cos-terms; compare the
  // four compositions with each other and with finite differences of grad.
  Tensor A = normal({3, 3}, 77);
  UnaryFn f = [A](const Tensor& x) {
    return x.dot(A.matmul(x)) + x.sin().sum() * x.at(0);
  };
  Tensor x = normal({3}, 78);
  Tensor h = ravel::hessian(f)(x);
  BOOST_REQUIRE(h.shape() == (Shape{3, 3}));
  std::vector<double> xv = values(x), fd(9);
  UnaryFn g = ravel::grad(f);
  for (int k = 0; k < 3; ++k) {
    auto p = xv, m = xv;
    p[k] += kEps;
    m[k] -= kEps;
    std::vector<double> gp = values(g(host(p, {3}))), gm = values(g(host(m, {3})));
    for (int j = 0; j < 3; ++j) fd[3 * j + k] = (gp[j] - gm[j]) / (2 * kEps);
  }
  check_values("hessian (jacfwd(jacrev)) vs fd", h, {3, 3}, fd);
  check_values("jacrev(jacrev) vs fd", ravel::jacrev(ravel::jacrev(f))(x), {3, 3}, fd);
  check_values("jacfwd(jacfwd) vs fd", ravel::jacfwd(ravel::jacfwd(f))(x), {3, 3}, fd);
  check_values("jacrev(jacfwd) vs fd", ravel::jacrev(ravel::jacfwd(f))(x), {3, 3}, fd);
  check_values("jacfwd(grad) vs fd", ravel::jacfwd(g)(x), {3, 3}, fd);
  check_values("jacrev(grad) vs fd", ravel::jacrev(g)(x), {3, 3}, fd);

  // The pieces of f one at a time, against their closed forms (x0 S with S = sum sin x:
  // H00 = 2 cos x0 - x0 sin x0, H0j = Hj0 = cos xj, Hjj = -x0 sin xj; x.x: 2 I).
  std::vector<double> hs(9, 0.0), hd = {2, 0, 0, 0, 2, 0, 0, 0, 2};
  hs[0] = 2 * std::cos(xv[0]) - xv[0] * std::sin(xv[0]);
  for (int j = 1; j < 3; ++j) hs[j] = hs[3 * j] = std::cos(xv[j]), hs[4 * j] = -xv[0] * std::sin(xv[j]);
  UnaryFn fs = [](const Tensor& v) { return v.sin().sum() * v.at(0); };
  UnaryFn fd2 = [](const Tensor& v) { return v.dot(v); };
  using Compose = std::function<UnaryFn(UnaryFn)>;
  const std::vector<std::pair<std::string, Compose>> ways = {
      {"hessian", [](UnaryFn u) { return ravel::hessian(u); }},
      {"jacrev(jacrev)", [](UnaryFn u) { return ravel::jacrev(ravel::jacrev(u)); }},
      {"jacfwd(jacfwd)", [](UnaryFn u) { return ravel::jacfwd(ravel::jacfwd(u)); }},
      {"jacrev(jacfwd)", [](UnaryFn u) { return ravel::jacrev(ravel::jacfwd(u)); }},
  };
  for (const auto& [name, way] : ways) {
    check_values(name + " of sum(sin x) * x[0]", way(fs)(x), {3, 3}, hs, 1e-12, 1e-12);
    check_values(name + " of dot(x, x)", way(fd2)(x), {3, 3}, hd, 1e-12, 1e-12);
  }

  // Hessian of x -> sum(x^4) on a [2,2] input: shape [2,2,2,2], diagonal 12 x^2.
  Tensor x2 = normal({2, 2}, 79);
  Tensor h4 = ravel::hessian(UnaryFn([](const Tensor& v) { return (v * v * v * v).sum(); }))(x2);
  std::vector<double> x2v = values(x2), want(16, 0.0);
  for (int k = 0; k < 4; ++k) want[5 * k] = 12 * x2v[k] * x2v[k];
  check_values("hessian sum x^4", h4, {2, 2, 2, 2}, want, 1e-12, 1e-12);
}

BOOST_AUTO_TEST_CASE(aliased_arguments_and_intermediates) {
  // grad(f)(x, x): each argument gets its own gradient (mark_arguments aliases them).
  Tensor x = host({1.5, -2.0}, {2});
  auto f = [](const std::vector<Tensor>& a) { return (a[0] * a[1] * a[1]).sum(); };
  std::vector<Tensor> g = ravel::grad(f)({x, x});
  check_values("d/da (a b^2) at a = b = x", g[0], {2}, {2.25, 4.0}, 1e-12, 1e-12);
  check_values("d/db (a b^2) at a = b = x", g[1], {2}, {4.5, 8.0}, 1e-12, 1e-12);
  // One argument computed from another: y = 2x passed beside x is still its own argument.
  Tensor y = x * 2.0;
  std::vector<Tensor> g2 = ravel::grad(f)({x, y});
  check_values("d/da with b = 2x", g2[0], {2}, {9.0, 16.0}, 1e-12, 1e-12);
  check_values("d/db with b = 2x", g2[1], {2}, {9.0, 16.0}, 1e-12, 1e-12);
  // gradients() with respect to an intermediate node and the leaf together.
  Tensor h = x * 3.0, out = (h.sin() * x).sum();
  std::vector<Tensor> gi = ravel::gradients(out, {h, x});
  std::vector<double> wh(2), wx(2);
  for (int k = 0; k < 2; ++k) {
    double xv = k == 0 ? 1.5 : -2.0;
    wh[k] = std::cos(3 * xv) * xv;
    wx[k] = std::sin(3 * xv) + 3 * std::cos(3 * xv) * xv;
  }
  check_values("d out / d h", gi[0], {2}, wh, 1e-12, 1e-12);
  check_values("d out / d x (through h too)", gi[1], {2}, wx, 1e-12, 1e-12);
  // The gradient of an output with respect to itself is the cotangent; of an unrelated input, 0.
  Tensor z = host({4.0}, {1});
  std::vector<Tensor> gs = ravel::gradients(out, {out, z});
  BOOST_CHECK_EQUAL(gs[0].item<double>(), 1.0);
  check_values("unrelated input", gs[1], {1}, {0.0}, 0, 0);
}

}  // namespace
