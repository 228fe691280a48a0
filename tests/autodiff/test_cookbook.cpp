// The JAX autodiff cookbook's logistic regression, with everything it computes checked against
// values computed independently here (plain C++ doubles, central finite differences): the
// loss, its gradients with respect to W and b, jacfwd == jacrev, jacrev summed over outputs ==
// grad of the summed prediction, and the Hessian of the prediction (shape [4, 3, 3]).
#include "gradcheck.hpp"

using namespace adtest;
using ravel::UnaryFn;

namespace {

const std::vector<double> kInputs = {0.52, 1.12, 0.77, 0.88, -1.08, 0.15, 0.52, 0.06, -1.30, 0.74, -2.49, 1.39};
const std::vector<double> kTargets = {1, 1, 0, 1};

Tensor inputs() { return host(kInputs, {4, 3}); }
Tensor targets() { return host(kTargets, {4}); }

Tensor predict(const Tensor& W, const Tensor& b) { return (inputs().matmul(W) + b).sigmoid(); }

// Negative log-likelihood: -sum(log(p * t + (1 - p) * (1 - t))).
Tensor loss(const Tensor& W, const Tensor& b) {
  Tensor p = predict(W, b), t = targets();
  return -(p * t + (1.0 - p) * (1.0 - t)).log().sum();
}

// ---- the same model in plain doubles ------------------------------------------------------------
std::vector<double> predict_host(const std::vector<double>& W, double b) {
  std::vector<double> p(4);
  for (int i = 0; i < 4; ++i) {
    double z = b;
    for (int j = 0; j < 3; ++j) z += kInputs[3 * i + j] * W[j];
    p[i] = 1.0 / (1.0 + std::exp(-z));
  }
  return p;
}
double loss_host(const std::vector<double>& W, double b) {
  std::vector<double> p = predict_host(W, b);
  double l = 0;
  for (int i = 0; i < 4; ++i) l -= std::log(p[i] * kTargets[i] + (1 - p[i]) * (1 - kTargets[i]));
  return l;
}

struct Fixture {
  std::vector<double> W = normal_values({3}, 2024);
  double b = normal_values({}, 2025)[0];
  Tensor Wt = host(W, {3});
  Tensor bt = host({b}, {});
};

BOOST_FIXTURE_TEST_CASE(loss_value, Fixture) {
  Tensor l = loss(Wt, bt);
  BOOST_CHECK(l.shape().empty());
  BOOST_CHECK_CLOSE(l.item<double>(), loss_host(W, b), 1e-10);  // percent: 1e-12 relative
  // And at the cookbook's starting point of zero weights: 4 ln 2.
  BOOST_CHECK_CLOSE(loss(Tensor::zeros({3}, DType::F64), Tensor::zeros({}, DType::F64)).item<double>(),
                    4 * std::log(2.0), 1e-10);
}

BOOST_FIXTURE_TEST_CASE(loss_gradients, Fixture) {
  // Finite differences of the plain-double loss.
  std::vector<double> dW(3);
  for (int j = 0; j < 3; ++j) {
    auto wp = W, wm = W;
    wp[j] += kEps;
    wm[j] -= kEps;
    dW[j] = (loss_host(wp, b) - loss_host(wm, b)) / (2 * kEps);
  }
  double db = (loss_host(W, b + kEps) - loss_host(W, b - kEps)) / (2 * kEps);

  auto f = [](const std::vector<Tensor>& a) { return loss(a[0], a[1]); };
  std::vector<Tensor> g = ravel::grad(f)({Wt, bt});
  BOOST_REQUIRE_EQUAL(g.size(), 2u);
  check_values("grad(loss) W", g[0], {3}, dW);
  check_values("grad(loss) b", g[1], {}, {db});

  auto [value, vg] = ravel::value_and_grad(f, {Wt, bt});
  BOOST_CHECK_CLOSE(value.item<double>(), loss_host(W, b), 1e-10);
  check_values("value_and_grad W", vg[0], {3}, dW);
  check_values("value_and_grad b", vg[1], {}, {db});

  // The closed form: dL/dW = -sum_i (t_i - p_i) x_i, dL/db = -sum_i (t_i - p_i).
  std::vector<double> p = predict_host(W, b), aW(3, 0.0);
  double ab = 0;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) aW[j] -= (kTargets[i] - p[i]) * kInputs[3 * i + j];
    ab -= kTargets[i] - p[i];
  }
  check_values("grad(loss) W, closed form", g[0], {3}, aW, 1e-12, 1e-12);
  check_values("grad(loss) b, closed form", g[1], {}, {ab}, 1e-12, 1e-12);

  // The full gradcheck machinery (gradients, vjp, jvp) on the loss and on predict.
  gradcheck("loss(W, b)", f, {Wt, bt});
  gradcheck("predict(W, b)", [](const std::vector<Tensor>& a) { return predict(a[0], a[1]); }, {Wt, bt});
}

BOOST_FIXTURE_TEST_CASE(jacobians, Fixture) {
  Tensor bb = bt;
  UnaryFn predict_w = [bb](const Tensor& w) { return predict(w, bb); };
  Tensor jf = ravel::jacfwd(predict_w)(Wt);
  Tensor jr = ravel::jacrev(predict_w)(Wt);
  // Closed form: dp_i/dW_j = p_i (1 - p_i) x_ij.
  std::vector<double> p = predict_host(W, b), want(12);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) want[3 * i + j] = p[i] * (1 - p[i]) * kInputs[3 * i + j];
  check_values("jacfwd", jf, {4, 3}, want, 1e-12, 1e-12);
  check_values("jacrev", jr, {4, 3}, want, 1e-12, 1e-12);
  check_values("jacfwd == jacrev", jf, {4, 3}, values(jr), 1e-12, 1e-12);

  // jacrev summed over the outputs is the gradient of the summed prediction.
  Tensor gsum = ravel::grad(UnaryFn([bb](const Tensor& w) { return predict(w, bb).sum(); }))(Wt);
  check_values("jacrev(predict_w)(W).sum(0) == grad(sum predict)", jr.sum(0), {3}, values(gsum), 1e-12, 1e-12);
  std::vector<double> colsum(3, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) colsum[j] += want[3 * i + j];
  check_values("grad(sum predict), closed form", gsum, {3}, colsum, 1e-12, 1e-12);
}

BOOST_FIXTURE_TEST_CASE(hessian_of_predict, Fixture) {
  Tensor bb = bt;
  UnaryFn predict_w = [bb](const Tensor& w) { return predict(w, bb); };
  Tensor h = ravel::hessian(predict_w)(Wt);
  BOOST_REQUIRE(h.shape() == (Shape{4, 3, 3}));

  // Central differences of the (reverse-mode) Jacobian: H[i, j, k] = dJ[i, j] / dW_k.
  std::vector<double> fd(36);
  for (int k = 0; k < 3; ++k) {
    auto wp = W, wm = W;
    wp[k] += kEps;
    wm[k] -= kEps;
    std::vector<double> jp = values(ravel::jacrev(predict_w)(host(wp, {3})));
    std::vector<double> jm = values(ravel::jacrev(predict_w)(host(wm, {3})));
    for (int ij = 0; ij < 12; ++ij) fd[3 * ij + k] = (jp[ij] - jm[ij]) / (2 * kEps);
  }
  check_values("hessian vs finite differences of the Jacobian", h, {4, 3, 3}, fd);

  // Closed form: p (1 - p) (1 - 2p) x_ij x_ik, symmetric in j, k.
  std::vector<double> p = predict_host(W, b), want(36);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k)
        want[9 * i + 3 * j + k] = p[i] * (1 - p[i]) * (1 - 2 * p[i]) * kInputs[3 * i + j] * kInputs[3 * i + k];
  check_values("hessian, closed form", h, {4, 3, 3}, want, 1e-12, 1e-12);

  // jacrev of jacfwd is the same Hessian.
  Tensor h2 = ravel::jacrev(ravel::jacfwd(predict_w))(Wt);
  check_values("jacrev(jacfwd) == hessian", h2, {4, 3, 3}, want, 1e-12, 1e-12);

  // The Hessian of the (scalar) loss is [3, 3] and matches finite differences of its gradient.
  UnaryFn loss_w = [bb](const Tensor& w) { return loss(w, bb); };
  Tensor hl = ravel::hessian(loss_w)(Wt);
  BOOST_REQUIRE(hl.shape() == (Shape{3, 3}));
  std::vector<double> fdl(9);
  for (int k = 0; k < 3; ++k) {
    auto wp = W, wm = W;
    wp[k] += kEps;
    wm[k] -= kEps;
    std::vector<double> gp = values(ravel::grad(loss_w)(host(wp, {3})));
    std::vector<double> gm = values(ravel::grad(loss_w)(host(wm, {3})));
    for (int j = 0; j < 3; ++j) fdl[3 * j + k] = (gp[j] - gm[j]) / (2 * kEps);
  }
  check_values("hessian(loss) vs finite differences of grad", hl, {3, 3}, fdl);
}

// The cookbook's training loop: 100 steps of gradient descent, mirrored in plain doubles with
// the closed-form gradient; the two trajectories agree and the loss goes down.
BOOST_FIXTURE_TEST_CASE(gradient_descent, Fixture) {
  auto f = [](const std::vector<Tensor>& a) { return loss(a[0], a[1]); };
  Tensor w = Wt, bias = bt;
  std::vector<double> hw = W;
  double hb = b;
  for (int step = 0; step < 100; ++step) {
    auto [l, g] = ravel::value_and_grad(f, {w, bias});
    BOOST_CHECK_CLOSE(l.item<double>(), loss_host(hw, hb), 1e-8);
    w = host(values(w - 0.1 * g[0]), {3});
    bias = host(values(bias - 0.1 * g[1]), {});
    std::vector<double> p = predict_host(hw, hb);
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 3; ++j) hw[j] += 0.1 * (kTargets[i] - p[i]) * kInputs[3 * i + j];
      hb += 0.1 * (kTargets[i] - p[i]);
    }
  }
  check_values("W after 100 steps", w, {3}, hw, 1e-9, 1e-9);
  check_values("b after 100 steps", bias, {}, {hb}, 1e-9, 1e-9);
  BOOST_TEST_MESSAGE("loss " << loss_host(W, b) << " -> " << loss_host(hw, hb));
  BOOST_CHECK_LT(loss(w, bias).item<double>(), loss_host(W, b));
}

}  // namespace
