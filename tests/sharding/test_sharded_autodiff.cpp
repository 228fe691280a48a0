// Autodiff through sharded programs against the same program on one device: gradients with
// respect to split and replicated arguments (the latter all-reduced), second order, jacrev,
// the PyTorch-style tape, and data-parallel SGD whose losses match the single-device run.
#include "sharding_common.hpp"

using namespace stest;

namespace {

// A small two-layer network's mean loss: x [B, 6], w1 [6, 8], w2 [8, 3], targets [B].
Tensor loss_of(const Tensor& x, const Tensor& w1, const Tensor& w2, const Tensor& t) {
  return ravel::nn::cross_entropy(x.matmul(w1).tanh().matmul(w2), t);
}

Tensor targets(int64_t b) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < b; ++i) v.push_back((i * 7) % 3);
  return Tensor::from_vector<int64_t>(v, {b});
}

}  // namespace

BOOST_AUTO_TEST_CASE(gradients_of_replicated_parameters_are_all_reduced) {
  Tensor x = data({12, 6}, 1, DType::F64), w1 = data({6, 8}, 2, DType::F64) * 0.3, w2 = data({8, 3}, 3, DType::F64) * 0.3;
  Tensor t = targets(12);
  auto f = [&](const std::vector<Tensor>& a) { return loss_of(a[0], a[1], a[2], a[3]); };
  const std::vector<Tensor> want = ravel::grad(f, {0, 1, 2})({x, w1, w2, t});
  for (size_t n : {2u, 3u, 4u, 8u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const auto m = mesh(n);
      Tensor xs = x.shard(m, 0), ts = t.shard(m, 0), r1 = w1.replicate(m), r2 = w2.replicate(m);
      auto [value, g] = ravel::value_and_grad(f, {xs, r1, r2, ts}, std::vector<int64_t>{0, 1, 2});
      check_close(value, f({x, w1, w2, t}), 1e-12);
      BOOST_TEST(g[0].sharding().value() == xs.sharding().value());  // split like the argument
      BOOST_TEST(g[1].sharding().value().replicated());         // all-reduced onto every replica
      for (size_t k = 0; k < 3; ++k) check_close(g[k], want[k], 1e-12);
      for (const Tensor& rep : g[2].shards()) check_close(rep, want[2], 1e-12);
      // Parameters on one device used by a split batch: gradients come back to that device.
      std::vector<Tensor> g1 = ravel::grad(f, {1, 2})({xs, w1, w2, ts});
      BOOST_TEST(!g1[0].sharding().has_value());
      check_close(g1[0], want[1], 1e-12);
      check_close(g1[1], want[2], 1e-12);
    }
  }
}

// Note [Gradient buckets]: ravel::grad and the optimizers all-reduce the replicated parameters'
// gradients together (laid end to end, reduced once, viewed apart); the tape's per-parameter
// Tensor::grad reduces each on its own. Both are the same sums in the same order: bitwise equal.
// Float32 and a mesh of 3, so that a different order of the additions would show.
BOOST_AUTO_TEST_CASE(bucketed_gradients_equal_parameter_by_parameter_ones_bitwise) {
  Tensor x = data({12, 6}, 1), w1 = data({6, 8}, 2) * 0.3, b1 = data({8}, 5), w2 = data({8, 3}, 3) * 0.3;
  const auto m = mesh(3);
  Tensor xs = x.shard(m, 0);
  Tensor r1 = w1.replicate(m), rb = b1.replicate(m), r2 = w2.replicate(m);
  auto loss = [&](const Tensor& a, const Tensor& c, const Tensor& d) {
    return (xs.matmul(a) + c).tanh().matmul(d).log_softmax(-1).sum() * -0.5;
  };
  for (Tensor* p : {&r1, &rb, &r2}) p->requires_grad_();
  loss(r1, rb, r2).backward();
  const std::vector<Tensor> one_by_one = {r1.grad(), rb.grad(), r2.grad()};  // three separate reductions
  const std::vector<Tensor> bucketed = ravel::grad(
      [&](const std::vector<Tensor>& a) { return loss(a[0], a[1], a[2]); }, {0, 1, 2})({r1, rb, r2});
  for (size_t k = 0; k < 3; ++k) {
    BOOST_TEST(bucketed[k].sharding().value().replicated());
    const auto a = bucketed[k].shards(), b = one_by_one[k].shards();
    for (size_t d = 0; d < a.size(); ++d) {
      const std::vector<float> va = a[d].to_vector<float>(), vb = b[d].to_vector<float>();
      BOOST_TEST((va == vb), "parameter " << k << " on " << m[d] << ": bucketed differs from one by one");
    }
  }
  // SGD steps with the bucketed gradients: the update each replica gets is p - lr * grad.
  ravel::nn::SGD opt({&r1, &rb, &r2}, 0.5);
  const std::vector<float> before = r2.shards()[2].to_vector<float>(), g = one_by_one[2].shards()[2].to_vector<float>();
  opt.step();
  const std::vector<float> after = r2.shards()[2].to_vector<float>();
  for (size_t i = 0; i < before.size(); ++i) BOOST_TEST(after[i] == before[i] - g[i] * 0.5f);
}

// Only gradients under 16 Ki elements share a bucket (Note [Replica gradient buckets]): a larger
// one is all-reduced on its own (the plugin's collective where there is one), the small ones
// still together. Every gradient is the tape's per-parameter one (to rounding: the plugin's
// collective is a host operation, and its inputs are realized in a pass of their own, so the
// small gradients' reductions may fuse otherwise), and the same bits on every device.
BOOST_AUTO_TEST_CASE(a_large_gradient_reduced_alone_beside_a_bucket_equals_the_per_parameter_one) {
  Tensor x = data({12, 6}, 1), w1 = data({6, 3000}, 2) * 0.03, b1 = data({3000}, 5), w2 = data({3000, 3}, 3) * 0.03;
  for (size_t n : {2u, 3u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const auto m = mesh(n);
      Tensor xs = x.shard(m, 0);
      Tensor r1 = w1.replicate(m), rb = b1.replicate(m), r2 = w2.replicate(m);  // 18000, 3000, 9000
      auto loss = [&](const Tensor& a, const Tensor& c, const Tensor& d) {
        return (xs.matmul(a) + c).tanh().matmul(d).log_softmax(-1).sum() * -0.5;
      };
      for (Tensor* p : {&r1, &rb, &r2}) p->requires_grad_();
      loss(r1, rb, r2).backward();
      const std::vector<Tensor> one_by_one = {r1.grad(), rb.grad(), r2.grad()};
      const std::vector<Tensor> bucketed = ravel::grad(
          [&](const std::vector<Tensor>& a) { return loss(a[0], a[1], a[2]); }, {0, 1, 2})({r1, rb, r2});
      for (size_t k = 0; k < 3; ++k) {
        const auto a = bucketed[k].shards(), b = one_by_one[k].shards();
        for (size_t d = 0; d < a.size(); ++d) {
          check_close(a[d], b[d], 1e-5);
          BOOST_TEST((a[d].to_vector<float>() == a[0].to_vector<float>()), "parameter " << k << ": replicas differ");
        }
      }
    }
  }
}

// ravel::gradients with respect to replicas built outside the differentiated code: replica k is
// a Transfer of replica 0's node, and the gradient must not flow from one replica into another
// (it did: device k's share was counted twice). Realized or not, on 2 and 3 devices.
BOOST_AUTO_TEST_CASE(gradients_of_replicas_made_outside_count_each_device_once) {
  Tensor x = data({12, 5}, 1, DType::F64), w = data({5, 3}, 2, DType::F64);
  auto f = [](const Tensor& a, const Tensor& b) { return a.matmul(b).tanh().sum(); };
  const Tensor want = ravel::gradients(f(x, w), {w})[0];
  for (size_t n : {2u, 3u}) {
    for (bool realized : {false, true}) {
      BOOST_TEST_CONTEXT(n << " devices, replicas " << (realized ? "realized" : "lazy")) {
        const auto m = mesh(n);
        Tensor xs = x.shard(m, 0), wr = w.replicate(m);
        if (realized) xs.realize(), wr.realize();
        const Tensor g = ravel::gradients(f(xs, wr), {wr})[0];
        BOOST_TEST(g.sharding().value().replicated());
        for (const Tensor& rep : g.shards()) check_close(rep, want, 1e-12);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(tensor_parallel_gradients) {
  Tensor x = data({5, 6}, 1, DType::F64), w = data({6, 4}, 2, DType::F64);
  auto f = [](const std::vector<Tensor>& a) { return (a[0].matmul(a[1]).tanh() * 1.5).sum(); };
  const std::vector<Tensor> want = ravel::grad(f, {0, 1})({x, w});
  for (size_t n : {2u, 3u}) {
    const auto m = mesh(n);
    std::vector<Tensor> g = ravel::grad(f, {0, 1})({x.shard(m, 1), w.shard(m, 0)});
    check_close(g[0], want[0], 1e-12);
    check_close(g[1], want[1], 1e-12);
    BOOST_TEST(g[1].sharding().value().axis.value() == 0);
  }
}

BOOST_AUTO_TEST_CASE(second_order_and_jacobians) {
  Tensor x = data({6}, 4, DType::F64);
  auto f = [](const std::vector<Tensor>& a) { return (a[0].sin() * a[0]).sum() + a[0].square().sum().square(); };
  const Tensor want_h = ravel::hessian(f, 0)({x});
  auto jf = [](const std::vector<Tensor>& a) { return (a[0].exp() * a[0].sum()); };
  const Tensor want_j = ravel::jacrev(jf, 0)({x});
  // grad of grad, written out: d/dx (g(x) . v) = H v.
  Tensor v = data({6}, 9, DType::F64);
  auto gv = [&](const std::vector<Tensor>& a) { return (ravel::grad(f, 0)({a[0]}) * v).sum(); };
  const Tensor want_hv = ravel::grad(gv, 0)({x});
  for (size_t n : {2u, 3u, 4u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      Tensor xs = x.shard(mesh(n), 0);
      check_close(ravel::hessian(f, 0)({xs}), want_h, 1e-12);
      check_close(ravel::jacrev(jf, 0)({xs}), want_j, 1e-12);
      check_close(ravel::grad(gv, 0)({xs}), want_hv, 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_tape_api_accumulates_per_part_and_assembles) {
  Tensor x = data({8, 6}, 1, DType::F64), w1 = data({6, 8}, 2, DType::F64) * 0.3, w2 = data({8, 3}, 3, DType::F64) * 0.3;
  Tensor t = targets(8);
  Tensor a1 = w1, a2 = w2;
  a1.requires_grad_();
  a2.requires_grad_();
  loss_of(x, a1, a2, t).backward();
  const auto m = mesh(4);
  Tensor r1 = w1.replicate(m), r2 = w2.replicate(m);
  r1.requires_grad_();
  r2.requires_grad_();
  BOOST_TEST(r1.requires_grad());
  loss_of(x.shard(m, 0), r1, r2, t.shard(m, 0)).backward();
  BOOST_TEST(r1.grad().sharding().value().replicated());
  check_close(r1.grad(), a1.grad(), 1e-12);
  check_close(r2.grad(), a2.grad(), 1e-12);
  r1.zero_grad();
  BOOST_TEST(!r1.grad().defined());
}

BOOST_AUTO_TEST_CASE(data_parallel_sgd_matches_one_device) {
  // The same global batch each step, split over the devices; parameters replicated and updated
  // by nn::SGD with momentum: the losses of every step agree with the single-device run.
  auto train = [&](const std::vector<Device>& devices) {
    ravel::nn::MLP mlp({6, 16, 3}, ravel::nn::Activation::Tanh, 5);
    std::vector<Tensor*> params = mlp.parameters();
    if (devices.size() > 1)
      for (Tensor* p : params) p->assign(p->replicate(devices));
    ravel::nn::SGD opt(params, 0.2, 0.9);
    std::vector<double> losses;
    for (int step = 0; step < 6; ++step) {
      Tensor x = data({24, 6}, step), t = targets(24);
      if (devices.size() > 1) x = x.shard(devices, 0), t = t.shard(devices, 0);
      Tensor loss = ravel::nn::cross_entropy(mlp(x), t);
      opt.zero_grad();
      loss.backward();
      opt.step({loss});
      losses.push_back(loss.item<double>());
    }
    for (Tensor* p : params)
      if (devices.size() > 1) {
        BOOST_TEST_REQUIRE(p->sharding().has_value());
        BOOST_TEST(p->sharding().value().replicated());
      }
    return losses;
  };
  const std::vector<double> one = train(mesh(1));
  BOOST_TEST(one.back() < one.front());  // it trains at all
  for (size_t n : {2u, 3u, 4u}) {
    const std::vector<double> many = train(mesh(n));
    for (size_t s = 0; s < one.size(); ++s) BOOST_TEST(std::fabs(many[s] - one[s]) <= 1e-5, "step " << s << ", " << n << " devices: " << many[s] << " vs " << one[s]);
  }
}

BOOST_AUTO_TEST_CASE(user_custom_derivatives_hold_on_sharded_inputs) {
  // Rules that differ from the primitives' derivative (a straight-through estimator scaled by 3,
  // and a reduction whose rule spreads the cotangent unevenly): the sharded gradient must be the
  // rule's, exactly as on one device, whatever the layout.
  auto ste = [](const std::vector<Tensor>& a) {
    Tensor y = ravel::custom_vjp((a[0] * 4.0).trunc() / 4.0, {a[0]},
                                 [](const std::vector<Tensor>&, const Tensor&, const Tensor& g) {
                                   return std::vector<Tensor>{g * 3.0};
                                 });
    return (y * a[0]).sum();
  };
  auto spread = [](const std::vector<Tensor>& a) {
    Tensor s = ravel::custom_vjp(a[0].sum(), {a[0]}, [](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
      return std::vector<Tensor>{(ravel::Tensor::arange(0, double(in[0].numel()), 1, DType::F64) * g)
                                     .reshape(in[0].shape())};
    });
    return s * 2.0;
  };
  Tensor x = data({6}, 3, DType::F64);
  const Tensor want_ste = ravel::grad(ste, 0)({x}), want_spread = ravel::grad(spread, 0)({x});
  for (size_t n : {2u, 3u}) {
    Tensor xs = x.shard(mesh(n), 0);
    check_close(ravel::grad(ste, 0)({xs}), want_ste, 1e-12);
    check_close(ravel::grad(spread, 0)({xs}), want_spread, 1e-12);
    check_close(ravel::grad(spread, 0)({x.replicate(mesh(n))}), want_spread, 1e-12);
  }
}

// Decision 67 left open whether a custom rule that closes over a split tensor works: a rule that
// is not elementwise runs on whole tensors gathered onto the mesh's first device (Note [Sharded
// custom derivatives]), and the tensor it captured is still the split bundle, so its gradients
// mix a gathered input with split values. Here the captured tensor is also an input of the rule
// (so it gets a gradient too); the gradients and second derivatives are those of the same program
// on one device, where the same closure holds the unsplit tensor.
BOOST_AUTO_TEST_CASE(a_custom_rule_that_captures_a_split_tensor) {
  // f(x, c) = sum(x^2 c) with the rule's derivatives written out, c read from the closure in the
  // x derivative and from the arguments in the c derivative.
  auto f_with = [](const Tensor& captured) {
    return [captured](const std::vector<Tensor>& a) {
      Tensor y = ravel::custom_vjp((a[0] * a[0] * a[1]).sum(), {a[0], a[1]},
                                   [captured](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
                                     return std::vector<Tensor>{g * 2.0 * in[0] * captured, g * in[0] * in[0]};
                                   });
      return y * 3.0;
    };
  };
  Tensor x = data({6, 2}, 3, DType::F64), c = data({6, 2}, 4, DType::F64);
  const std::vector<Tensor> want = ravel::grad(f_with(c), {0, 1})({x, c});
  // Second order: the derivative of sum(df/dx * v) with respect to x and c: 6 c v, through the
  // captured tensor, and 0 (df/dx reads c from the closure, a constant to the differentiation).
  Tensor v = data({6, 2}, 5, DType::F64);
  auto second_with = [&](const Tensor& captured) {
    return [&, captured](const std::vector<Tensor>& a) {
      return (ravel::grad(f_with(captured), 0)({a[0], a[1]}) * a[2]).sum();
    };
  };
  const std::vector<Tensor> want2 = ravel::grad(second_with(c), {0, 1})({x, c, v});
  BOOST_TEST_CONTEXT("the references against closed forms") {
    check_close(want[0], x * c * 6.0, 1e-12);
    check_close(want2[0], c * v * 6.0, 1e-12);
    check_close(want2[1], x * 0.0, 1e-12);
  }
  for (size_t n : {2u, 3u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const auto m = mesh(n);
      Tensor xs = x.shard(m, 0), cs = c.shard(m, 0), vs = v.shard(m, 0);
      const std::vector<Tensor> g = ravel::grad(f_with(cs), {0, 1})({xs, cs});
      BOOST_TEST_CONTEXT("first order") {
        check_close(g[0], want[0], 1e-12);
        check_close(g[1], want[1], 1e-12);
      }
      const std::vector<Tensor> g2 = ravel::grad(second_with(cs), {0, 1})({xs, cs, vs});
      BOOST_TEST_CONTEXT("second order") {
        check_close(g2[0], want2[0], 1e-12);
        check_close(g2[1], want2[1], 1e-12);
      }
      // The closure holding a replica and the arguments split, and the other way round.
      check_close(ravel::grad(f_with(c.replicate(m)), {0, 1})({xs, cs})[0], want[0], 1e-12);
      check_close(ravel::grad(f_with(cs), {0, 1})({x.replicate(m), c})[0], want[0], 1e-12);
    }
  }
}
