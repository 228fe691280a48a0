// The familiar (PyTorch-style) autograd API: requires_grad_ on leaves and computed tensors,
// backward accumulating, zero_grad, grad() before backward, the errors, NoGradGuard, detach /
// stop_gradient, assign in an SGD loop; and the documented tie rule of max (Note [Gradient of
// max] in core/src/autodiff/rules.cpp).
#include <thread>
#include <type_traits>
#include <utility>

#include "gradcheck.hpp"

using namespace adtest;

namespace {

using WeakNode = std::remove_cvref_t<decltype(std::declval<Tensor>().node())>::weak_type;

std::vector<double> scaled(const std::vector<double>& v, double s) {
  std::vector<double> out(v);
  for (auto& x : out) x *= s;
  return out;
}

const std::vector<double> kX = {1.5, -2.0, 0.25};

BOOST_AUTO_TEST_CASE(requires_grad_on_a_leaf_and_backward_accumulates) {
  Tensor x = host(kX, {3});
  BOOST_CHECK(!x.requires_grad());
  BOOST_CHECK(&x.requires_grad_() == &x);  // returns *this, for chaining
  BOOST_CHECK(x.requires_grad());
  BOOST_CHECK(!x.grad().defined());  // undefined before any backward
  Tensor y = (x * x).sum();
  BOOST_CHECK(y.requires_grad());  // computed from a leaf that requires grad
  y.backward();
  check_values("after one backward", x.grad(), {3}, scaled(kX, 2), 1e-12, 1e-12);
  y.backward();  // the same graph again: accumulates
  check_values("after two backward", x.grad(), {3}, scaled(kX, 4), 1e-12, 1e-12);
  (x * 3.0).sum().backward();  // another graph: accumulates as well
  std::vector<double> want = scaled(kX, 4);
  for (auto& w : want) w += 3;
  check_values("after a third backward", x.grad(), {3}, want, 1e-12, 1e-12);
  x.zero_grad();
  BOOST_CHECK(!x.grad().defined());
  BOOST_CHECK(x.requires_grad());  // zero_grad does not turn requires_grad off
  y.backward();
  check_values("after zero_grad and backward", x.grad(), {3}, scaled(kX, 2), 1e-12, 1e-12);
  // requires_grad_(false) turns it off again.
  x.requires_grad_(false);
  BOOST_CHECK(!x.requires_grad());
  BOOST_CHECK_THROW((x * x).sum().backward(), ravel::ValueError);
}

BOOST_AUTO_TEST_CASE(requires_grad_on_a_computed_tensor_makes_a_leaf) {
  Tensor a = host(kX, {3});
  Tensor z = a * 2.0 + 1.0;
  z.requires_grad_();
  BOOST_CHECK(z.requires_grad());
  BOOST_CHECK(!a.requires_grad());
  check_values("its values are kept", z, {3}, {4.0, -3.0, 1.5}, 0, 0);
  (z * z).sum().backward();
  check_values("z.grad()", z.grad(), {3}, {8.0, -6.0, 3.0}, 1e-12, 1e-12);
  BOOST_CHECK(!a.grad().defined());

  // A computed tensor of a grad-requiring leaf becomes a leaf of its own: backward through it
  // stops there.
  Tensor w = host(kX, {3});
  w.requires_grad_();
  Tensor h = w.sin();
  h.requires_grad_();
  (h * 2.0).sum().backward();
  check_values("h.grad()", h.grad(), {3}, {2.0, 2.0, 2.0}, 1e-12, 1e-12);
  BOOST_CHECK(!w.grad().defined());

  // A view (not contiguous) becomes a leaf too, with the view's values.
  Tensor m = host({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor mt = m.transpose();
  mt.requires_grad_();
  check_values("transposed leaf", mt, {3, 2}, {1, 4, 2, 5, 3, 6}, 0, 0);
  (mt * host({1, 2, 3, 4, 5, 6}, {3, 2})).sum().backward();
  check_values("transposed leaf grad", mt.grad(), {3, 2}, {1, 2, 3, 4, 5, 6}, 0, 0);
}

BOOST_AUTO_TEST_CASE(backward_errors) {
  Tensor x = host(kX, {3});
  // Nothing requires grad.
  BOOST_CHECK_THROW((x * x).sum().backward(), ravel::ValueError);
  BOOST_CHECK_THROW(Tensor::ones({1}, DType::F64).backward(), ravel::ValueError);
  x.requires_grad_();
  // A non-scalar output needs a cotangent.
  BOOST_CHECK_THROW((x * 3.0).backward(), ravel::ShapeError);
  BOOST_CHECK(!x.grad().defined());  // the failed call left nothing behind
  // With one, it works: d(3x)^T u = 3u.
  (x * 3.0).backward(host({1.0, 2.0, -1.0}, {3}));
  check_values("with a cotangent", x.grad(), {3}, {3.0, 6.0, -3.0}, 1e-12, 1e-12);
  // A cotangent of the wrong shape.
  BOOST_CHECK_THROW((x * 3.0).backward(host({1.0, 2.0}, {2})), ravel::ShapeError);
  // Only float tensors can require grad.
  Tensor i = Tensor::from_vector<int64_t>({1, 2}, {2});
  BOOST_CHECK_THROW(i.requires_grad_(), ravel::DTypeError);
  // Undefined tensors.
  BOOST_CHECK_THROW(Tensor().backward(), ravel::Error);
  // gradients(): an integer output, a cotangent of the wrong shape, a non-scalar without one.
  BOOST_CHECK_THROW(ravel::gradients((i * 2).sum(), {i}), ravel::DTypeError);
  BOOST_CHECK_THROW(ravel::gradients(x * 2.0, {x}, host({1.0}, {1})), ravel::ShapeError);
  BOOST_CHECK_THROW(ravel::gradients(x * 2.0, {x}), ravel::ShapeError);
  // grad() of a function with a non-scalar result; jvp with the wrong tangents.
  auto f = [](const std::vector<Tensor>& a) { return a[0] * 2.0; };
  BOOST_CHECK_THROW(ravel::grad(f)({x}), ravel::ShapeError);
  BOOST_CHECK_THROW(ravel::jvp(f, {x}, {}), ravel::ValueError);
  BOOST_CHECK_THROW(ravel::jvp(f, {x}, {host({1.0}, {1})}), ravel::ShapeError);
}

BOOST_AUTO_TEST_CASE(integer_inputs_get_no_gradient) {
  Tensor x = host(kX, {3});
  Tensor i = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  Tensor y = (x * i).sum();  // promotes i to f64
  std::vector<Tensor> g = ravel::gradients(y, {x, i});
  check_values("float input", g[0], {3}, {1.0, 2.0, 3.0}, 0, 0);
  BOOST_CHECK(g[1].shape() == (Shape{3}));
  std::vector<double> gi = g[1].to_vector<double>();
  for (double v : gi) BOOST_CHECK_EQUAL(v, 0.0);
}

BOOST_AUTO_TEST_CASE(no_grad_guard) {
  Tensor x = host(kX, {3});
  x.requires_grad_();
  BOOST_CHECK(ravel::grad_enabled());
  Tensor y;
  {
    ravel::NoGradGuard guard;
    BOOST_CHECK(!ravel::grad_enabled());
    {
      ravel::NoGradGuard nested;
      BOOST_CHECK(!ravel::grad_enabled());
    }
    BOOST_CHECK(!ravel::grad_enabled());  // still inside the outer guard
    bool other_thread = false;
    std::thread([&] { other_thread = ravel::grad_enabled(); }).join();
    BOOST_CHECK(other_thread);  // the guard is per thread
    y = (x * 2.0).exp().log().reshape({3, 1}).squeeze();  // elementwise, composite and movement ops
    BOOST_CHECK(!y.requires_grad());
  }
  BOOST_CHECK(ravel::grad_enabled());
  check_values("values are computed as usual", y, {3}, scaled(kX, 2), 1e-12, 1e-12);
  BOOST_CHECK(!y.requires_grad());
  // backward through only no-grad results reaches nothing.
  BOOST_CHECK_THROW(y.sum().backward(), ravel::ValueError);
  // y is a constant to later ops: d/dx sum(y * x) = y = 2x, not 4x.
  (y * x).sum().backward();
  check_values("x.grad()", x.grad(), {3}, scaled(kX, 2), 1e-12, 1e-12);
  // gradients() sees zeros through it too.
  check_values("gradients through a no-grad result", ravel::gradients(y.sum(), {x})[0], {3}, {0, 0, 0}, 0, 0);
}

BOOST_AUTO_TEST_CASE(detach_and_stop_gradient) {
  Tensor x = host(kX, {3});
  check_values("x * x.detach()", ravel::gradients((x * x.detach()).sum(), {x})[0], {3}, kX, 1e-12, 1e-12);
  check_values("x * stop_gradient(x)", ravel::gradients((x * ravel::stop_gradient(x)).sum(), {x})[0], {3}, kX,
               1e-12, 1e-12);
  check_values("stop_gradient(x) alone", ravel::gradients(ravel::stop_gradient(x).sum(), {x})[0], {3}, {0, 0, 0}, 0, 0);
  check_values("detach keeps the values", x.detach(), {3}, kX, 0, 0);
  // A stop_gradient in the middle of a chain cuts everything below it.
  Tensor h = (x * 2.0).sin();
  check_values("through stop_gradient(sin(2x)) * 3", ravel::gradients((ravel::stop_gradient(h) * 3.0).sum(), {x})[0], {3},
               {0, 0, 0}, 0, 0);
  // The familiar API: a detached result does not require grad.
  x.requires_grad_();
  BOOST_CHECK(!x.detach().requires_grad());
  BOOST_CHECK(!ravel::stop_gradient(x * 2.0).requires_grad());
  (x.detach() * x).sum().backward();
  check_values("backward through x.detach() * x", x.grad(), {3}, kX, 1e-12, 1e-12);
  // jvp sees no tangent through stop_gradient.
  auto [y, t] = ravel::jvp([](const std::vector<Tensor>& a) { return ravel::stop_gradient(a[0]) * a[0]; }, {x},
                           {host({1.0, 1.0, 1.0}, {3})});
  check_values("jvp of stop_gradient(x) * x", t, {3}, kX, 1e-12, 1e-12);
}

// stop_gradient, detach and NoGradGuard results must stay blocked when a later movement op
// happens to compose to the identity view (flip twice, transpose twice): the result is then
// the same view as the blocked tensor, but the block must not be skipped.
BOOST_AUTO_TEST_CASE(blocks_survive_identity_view_compositions) {
  Tensor x = host(kX, {3});
  Tensor m = host({1, 2, 3, 4, 5, 6}, {2, 3});
  check_values("stop_gradient(x).flip().flip()",
               ravel::gradients((ravel::stop_gradient(x).flip().flip() * x).sum(), {x})[0], {3}, kX, 0, 0);
  check_values("stop_gradient(m).transpose().transpose()",
               ravel::gradients(ravel::stop_gradient(m).transpose().transpose().sum(), {m})[0], {2, 3},
               {0, 0, 0, 0, 0, 0}, 0, 0);
  check_values("x.detach().flip().flip()", ravel::gradients((x.detach().flip().flip() * x).sum(), {x})[0], {3}, kX,
               0, 0);
  x.requires_grad_();
  BOOST_CHECK(!x.detach().flip().flip().requires_grad());
  // A no-grad view of a graph-connected tensor, flipped back outside the guard.
  Tensor z = x * 2.0, zt;
  {
    ravel::NoGradGuard guard;
    zt = z.flip();
  }
  BOOST_CHECK(!zt.requires_grad());
  BOOST_CHECK(!zt.flip().requires_grad());
  check_values("(no-grad z.flip()).flip()", ravel::gradients(zt.flip().sum(), {x})[0], {3}, {0, 0, 0}, 0, 0);
  BOOST_CHECK_THROW(zt.flip().sum().backward(), ravel::ValueError);
}

// SGD with assign() on a convex quadratic: loss = sum(c * (w - target)^2). Every step's graph is
// released (assign makes w a fresh leaf, backward keeps only values), w keeps requires_grad, and
// the loss goes to 0. No timing: a growing graph shows up as the weak references below staying
// alive.
BOOST_AUTO_TEST_CASE(sgd_with_assign) {
  Tensor w = host({3.0, -1.0, 0.5, 2.0}, {4});
  w.requires_grad_();
  const Tensor target = host({1.0, 2.0, -0.5, 0.0}, {4});
  const Tensor c = host({1.0, 0.5, 2.0, 0.25}, {4});
  double prev = 1e300;
  bool decreasing = true;
  WeakNode previous_loss, previous_w;
  for (int step = 0; step < 1000; ++step) {
    // Nothing holds the previous step's graph (its loss, and the w before the update) any more.
    if (step > 0) {
      BOOST_REQUIRE_MESSAGE(previous_loss.expired(), "step " << step << ": the previous loss graph is still alive");
      BOOST_REQUIRE_MESSAGE(previous_w.expired(), "step " << step << ": the previous value of w is still alive");
    }
    Tensor loss = (c * (w - target).square()).sum();
    double l = loss.item<double>();
    decreasing = decreasing && (l <= prev);
    prev = l;
    loss.backward();
    previous_loss = loss.node();
    previous_w = w.node();
    {
      ravel::NoGradGuard guard;
      w.assign(w - 0.1 * w.grad());
    }
    w.zero_grad();
    BOOST_REQUIRE(w.requires_grad());
    BOOST_REQUIRE(w.is_realized());
    BOOST_REQUIRE(!w.grad().defined());
  }
  BOOST_CHECK(decreasing);
  BOOST_TEST_MESSAGE("final loss " << prev);
  BOOST_CHECK_SMALL(prev, 1e-20);
  check_values("w converged to the target", w, {4}, values(target), 0, 1e-10);

  // assign keeps the dtype (casting the value) and checks the shape.
  w.assign(Tensor::ones({4}, DType::F32));
  BOOST_CHECK(w.dtype() == DType::F64);
  check_values("assigned ones", w, {4}, {1, 1, 1, 1}, 0, 0);
  BOOST_CHECK_THROW(w.assign(Tensor::ones({3}, DType::F64)), ravel::ShapeError);
  // assign outside a NoGradGuard: the value is realized and the graph behind it dropped.
  WeakNode behind;
  {
    Tensor v = w * 2.0 + 1.0;
    behind = v.node();
    w.assign(v);
  }
  BOOST_CHECK(behind.expired());
  BOOST_CHECK(w.requires_grad());
  check_values("assigned 2w + 1", w, {4}, {3, 3, 3, 3}, 0, 0);
}

// ---- Note [Gradient of max]: ties share the gradient equally ------------------------------------
BOOST_AUTO_TEST_CASE(max_ties_share_the_gradient) {
  Tensor x = host(kX, {3});
  // maximum(x, x) = x: each side gets half, 0.5 + 0.5 = 1.
  check_values("maximum(x, x)", ravel::gradients(x.maximum(x).sum(), {x})[0], {3}, {1, 1, 1}, 0, 0);
  check_values("minimum(x, x)", ravel::gradients(x.minimum(x).sum(), {x})[0], {3}, {1, 1, 1}, 0, 0);
  // Two different tensors with equal values: 0.5 each.
  Tensor a = host({1.0, 2.0, 3.0}, {3}), b = host({1.0, 5.0, 3.0}, {3});
  std::vector<Tensor> g = ravel::gradients(a.maximum(b), {a, b}, host({2.0, 2.0, 4.0}, {3}));
  check_values("maximum(a, b) d/da", g[0], {3}, {1.0, 0.0, 2.0}, 0, 0);
  check_values("maximum(a, b) d/db", g[1], {3}, {1.0, 2.0, 2.0}, 0, 0);
  // relu at 0: 0 (torch.relu and jax.nn.relu; docs/autodiff.md "Conventions"); abs at 0 (maximum(x, -x) tie): 0.5 - 0.5 = 0.
  Tensor z = host({0.0, 1.0, -1.0}, {3});
  check_values("relu'", ravel::gradients(z.relu().sum(), {z})[0], {3}, {0.0, 1.0, 0.0}, 0, 0);
  check_values("abs'", ravel::gradients(z.abs().sum(), {z})[0], {3}, {0.0, 1.0, -1.0}, 0, 0);
  // Row max with two (or three) equal maxima: each gets g / count.
  Tensor m = host({1, 3, 3, 2, 5, 0, 5, 5}, {2, 4});
  Tensor gm = host({2.0, 3.0}, {2});
  check_values("max(1) ties", ravel::gradients(m.max(1), {m}, gm)[0], {2, 4}, {0, 1, 1, 0, 1, 0, 1, 1}, 1e-15, 0);
  check_values("max(1, keepdim) ties", ravel::gradients(m.max(1, true), {m}, gm.reshape({2, 1}))[0], {2, 4},
               {0, 1, 1, 0, 1, 0, 1, 1}, 1e-15, 0);
  check_values("min(1) ties", ravel::gradients((-m).min(1), {m}, gm)[0], {2, 4}, {0, -1, -1, 0, -1, 0, -1, -1}, 1e-15, 0);
  check_values("max() over all, three ties", ravel::gradients(m.max(), {m}, host({6.0}, {}))[0], {2, 4},
               {0, 0, 0, 0, 2, 0, 2, 2}, 1e-15, 0);
  Tensor q = host({1, 4, 3, 4}, {2, 2});
  check_values("max(0) ties down a column", ravel::gradients(q.max(0), {q}, host({1, 1}, {2}))[0], {2, 2},
               {0, 0.5, 1, 0.5}, 1e-15, 0);
  // Forward mode agrees: the tangent of maximum(x, x) along t is t.
  auto [y, t] = ravel::jvp([](const std::vector<Tensor>& v) { return v[0].maximum(v[0]); }, {x},
                           {host({1.0, -2.0, 3.0}, {3})});
  check_values("jvp maximum(x, x)", t, {3}, {1.0, -2.0, 3.0}, 0, 0);
  // Through the familiar API as well.
  Tensor p = host({4.0, 4.0, 1.0}, {3});
  p.requires_grad_();
  p.max().backward();
  check_values("backward of max with a tie", p.grad(), {3}, {0.5, 0.5, 0.0}, 0, 0);
}

}  // namespace
