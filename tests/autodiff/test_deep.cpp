// Deep graphs: a chain of 100,000 elementwise ops differentiates (reverse mode walks the graph
// iteratively, not recursively), gives the analytic result, and the forward and gradient graphs
// are freed afterwards without overflowing the stack in the destructors.
#include <memory>
#include <type_traits>
#include <utility>

#include "gradcheck.hpp"

using namespace adtest;

namespace {

// A weak reference to a tensor's graph node, to see whether anything still holds the graph.
using WeakNode = std::remove_cvref_t<decltype(std::declval<Tensor>().node())>::weak_type;

constexpr int kDepth = 100000;
constexpr double kFactor = 1.00001;

// dy/dx of y = x * 1.00001 applied kDepth times, accumulated in the same order in doubles.
double analytic() {
  double r = 1;
  for (int i = 0; i < kDepth; ++i) r *= kFactor;
  return r;
}

BOOST_AUTO_TEST_CASE(chain_of_100k_muls_gradients) {
  WeakNode forward_root, gradient_root;
  {
    Tensor x = host({0.5, -2.0}, {2});
    Tensor y = x;
    for (int i = 0; i < kDepth; ++i) y = y * kFactor;
    forward_root = y.node();
    std::vector<Tensor> g = ravel::gradients(y.sum(), {x});
    gradient_root = g[0].node();
    const double want = analytic();
    BOOST_TEST_MESSAGE("1.00001^100000 = " << want);
    // 100,000 roundings of ~1e-16 each: agreement to 1e-9 relative is ample.
    check_values("dy/dx", g[0], {2}, {want, want}, 1e-9, 0);
    check_values("y", y, {2}, {0.5 * want, -2.0 * want}, 1e-9, 0);
  }
  // Nothing outside the block held the graphs: both are gone (and destroying them did not crash).
  BOOST_CHECK(forward_root.expired());
  BOOST_CHECK(gradient_root.expired());
}

BOOST_AUTO_TEST_CASE(chain_of_100k_muls_backward) {
  Tensor x = host({1.0, 3.0, -0.25}, {3});
  x.requires_grad_();
  WeakNode root;
  {
    Tensor y = x;
    for (int i = 0; i < kDepth; ++i) y = y * kFactor;
    root = y.node();
    y.sum().backward();
  }
  BOOST_CHECK(root.expired());  // backward keeps only the gradient's values, not the graph
  const double want = analytic();
  check_values("x.grad()", x.grad(), {3}, {want, want, want}, 1e-9, 0);
}

// A deep chain alternating movement ops and arithmetic (view chains are freed iteratively too):
// y = (y * 1.00001).flip() 50,000 times.
BOOST_AUTO_TEST_CASE(chain_of_views_and_ops) {
  WeakNode root;
  {
    Tensor x = host({0.1, 0.2, 0.3, 0.4}, {4});
    Tensor y = x;
    const int n = kDepth / 2;
    for (int i = 0; i < n; ++i) y = (y * kFactor).flip();
    root = y.node();
    Tensor u = host({1.0, 2.0, 3.0, 4.0}, {4});
    std::vector<Tensor> g = ravel::gradients(y, {x}, u);
    // n is even, so y is x scaled, in the original order.
    double want = 1;
    for (int i = 0; i < n; ++i) want *= kFactor;
    check_values("gradient", g[0], {4}, {want, 2 * want, 3 * want, 4 * want}, 1e-9, 0);
  }
  BOOST_CHECK(root.expired());
}

// Forward mode on a deep chain (jvp differentiates the reverse-mode graph once more).
BOOST_AUTO_TEST_CASE(jvp_of_a_deep_chain) {
  Tensor x = host({2.0}, {1}), t = host({3.0}, {1});
  auto [y, ty] = ravel::jvp([](const std::vector<Tensor>& a) {
    Tensor v = a[0];
    for (int i = 0; i < kDepth; ++i) v = v * kFactor;
    return v;
  }, {x}, {t});
  const double want = analytic();
  check_values("jvp tangent", ty, {1}, {3.0 * want}, 1e-9, 0);
  check_values("jvp primal", y, {1}, {2.0 * want}, 1e-9, 0);
}

}  // namespace
