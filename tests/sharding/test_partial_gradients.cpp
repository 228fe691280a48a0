// Autodiff through partial results (Note [Partial results] in core/src/tensor/sharded.hpp): grad,
// second order, the tape and jvp through a partial sum, its reduce-scatter and its combine,
// against the same program on one device and central finite differences; gradients with respect
// to a partial (of its value, on every device).
#include <cmath>
#include <functional>
#include <vector>

#include "partial_common.hpp"

using namespace partial_t;

BOOST_AUTO_TEST_CASE(gradients_through_partials_equal_one_device_and_finite_differences) {
  const Tensor x = data({6, 7}, 13, DType::F64), w = data({7, 8}, 14, DType::F64), r = data({6, 8}, 15, DType::F64);
  for (size_t n : {2u, 3u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const std::vector<Device> m = mesh(n);
      // Three consumers: the partial itself as the loss (root), a split of it (reduce-scatter)
      // feeding a non-linear op, and a combine (p + r) feeding one.
      const std::vector<std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>> losses = {
          [](const Tensor& a, const Tensor& b, const Tensor& t) { return (a.matmul(b) * t).sum() * 0.5; },
          [&m](const Tensor& a, const Tensor& b, const Tensor& t) {
            const Tensor y = a.matmul(b);
            return (m.size() > 1 && y.sharding() ? y.shard(m, 0) : y).tanh().sum() + (y * t).mean();
          },
          [](const Tensor& a, const Tensor& b, const Tensor& t) { return ((a.matmul(b) + t) * 0.3).sin().sum(); },
      };
      for (size_t i = 0; i < losses.size(); ++i) {
        BOOST_TEST_CONTEXT("loss " << i) {
          const auto& f = losses[i];
          auto sharded = [&](const std::vector<Tensor>& v) { return f(v[0], v[1], r); };
          auto one = [&](const std::vector<Tensor>& v) { return f(v[0], v[1], r); };
          const Tensor xs = x.shard(m, 1), ws = w.shard(m, 0);
          if (i == 0) BOOST_TEST(partial_is(sharded({xs, ws}), CollectiveOp::Sum));
          auto [value, g] = ravel::value_and_grad(sharded, {xs, ws});
          auto [value1, g1] = ravel::value_and_grad(one, {x, w});
          check_close(value, value1, 1e-12);
          BOOST_TEST(split_on(g[0], 1));
          BOOST_TEST(split_on(g[1], 0));
          check_close(g[0], g1[0], 1e-12);
          check_close(g[1], g1[1], 1e-12);
          // Central differences of the sharded program at a few entries of x.
          const std::vector<double> gx = g[0].to_vector<double>(), xv = x.to_vector<double>();
          for (size_t j : {0u, 9u, 41u}) {
            const double h = 1e-5;
            std::vector<double> up = xv, down = xv;
            up[j] += h, down[j] -= h;
            const double fu = sharded({Tensor::from_vector<double>(up, x.shape()).shard(m, 1), ws}).item<double>();
            const double fd = sharded({Tensor::from_vector<double>(down, x.shape()).shard(m, 1), ws}).item<double>();
            BOOST_TEST(std::fabs((fu - fd) / (2 * h) - gx[j]) < 1e-6 * (1 + std::fabs(gx[j])), "entry " << j);
          }
        }
      }
      // Second order: the gradient of <grad(x), v> through a partial and its reduce-scatter.
      const Tensor v = data({6, 7}, 16, DType::F64);
      auto second = [&](const Tensor& xx, const Tensor& ww, const Tensor& vv) {
        auto inner = [&](const std::vector<Tensor>& a) { return losses[1](a[0], ww, r); };
        return ravel::grad(ravel::TensorFn([&](const std::vector<Tensor>& a) {
          return (ravel::grad(ravel::TensorFn(inner), 0)({a[0]}) * vv).sum();
        }), 0)({xx});
      };
      check_close(second(x.shard(m, 1), w.shard(m, 0), v.shard(m, 1)), second(x, w, v), 1e-10);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_tape_jvp_and_gradients_with_respect_to_a_partial) {
  const Tensor x = data({6, 7}, 70, DType::F64), w = data({7, 5}, 71, DType::F64), r = data({6, 5}, 72, DType::F64);
  for (size_t n : {2u, 3u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const std::vector<Device> m = mesh(n);
      // The tape: backward() from a partial loss.
      Tensor xs = x.shard(m, 1), ws = w.shard(m, 0);
      xs.requires_grad_();
      ws.requires_grad_();
      const Tensor loss = (xs.matmul(ws) * r).sum();
      BOOST_TEST(partial_is(loss, CollectiveOp::Sum));
      loss.backward();
      auto [v1, g1] = ravel::value_and_grad([&](const std::vector<Tensor>& a) { return (a[0].matmul(a[1]) * r).sum(); },
                                            {x, w});
      check_close(loss, v1, 1e-12);
      check_close(xs.grad(), g1[0], 1e-12);
      check_close(ws.grad(), g1[1], 1e-12);
      // Forward mode (a vjp transposed) through a partial output.
      const Tensor tx = data({6, 7}, 73, DType::F64), tw = data({7, 5}, 74, DType::F64);
      auto f = [](const std::vector<Tensor>& a) { return a[0].matmul(a[1]) * 2.0; };
      auto [y, t] = ravel::jvp(f, {x.shard(m, 1), w.shard(m, 0)}, {tx.shard(m, 1), tw.shard(m, 0)});
      auto [y1, t1] = ravel::jvp(f, {x, w}, {tx, tw});
      check_close(y, y1, 1e-12);
      check_close(t, t1, 1e-12);
      // Gradients with respect to a partial: of its value, on every device.
      const Tensor p = row_parallel(x, w, n).realize();
      const Tensor want = x.matmul(w) * r * 2.0;  // d/dp sum(p * p * r)
      const Tensor gp = ravel::grad([&](const std::vector<Tensor>& a) { return (a[0] * a[0] * r).sum(); })({p})[0];
      BOOST_TEST(replicas(gp));
      for (const Tensor& part : gp.shards()) check_close(part, want, 1e-12);
      const Tensor pm = x.shard(m, 0).max(0).realize();  // a max partial: its value's gradient is c
      const Tensor c = data({7}, 75, DType::F64);
      const Tensor gm = ravel::grad([&](const std::vector<Tensor>& a) { return (a[0] * c).sum(); })({pm})[0];
      BOOST_TEST(replicas(gm));
      for (const Tensor& part : gm.shards()) check_close(part, c, 1e-12);
    }
  }
}
