// A parameter stored split and all-gathered for the computation (FSDP / ZeRO-3; Note [Group
// derivatives] in core/src/tensor/custom_vjp.hpp): its gradient, split like it, is one
// reduce-scatter of the replicas' cotangents, the plugin's (ABI 1.12) where its all_gather ran.
// On 1-4 tbb_cpu devices against the same program on one device (a host reference of the
// unsharded math) and against the composition (RAVEL_PLUGIN_COLLECTIVES=0), to second order,
// with cotangents that reach only some replicas, and through a Jit replay.
#include <cstdlib>
#include <optional>
#include <string>

#include "sharding_common.hpp"

using namespace stest;

// Named, not anonymous: the suite is a unity build.
namespace gathered_param {

using stest::CollectivesEnv;

// The loss of a batch x [B, 12] through weights w [12, 5]: a batch split, the weights gathered.
Tensor loss(const Tensor& x, const Tensor& w) { return (x.matmul(w).tanh() - 0.25).square().mean(); }

}  // namespace gathered_param

using namespace gathered_param;

BOOST_AUTO_TEST_CASE(a_gathered_parameters_gradient_is_the_reduce_scatter_of_its_replicas_cotangents) {
  const Tensor x = data({12, 12}, 1, DType::F64), w = data({12, 5}, 2, DType::F64) * 0.3;
  // One device, no collectives: the reference.
  auto f1 = [](const std::vector<Tensor>& a) { return loss(a[0], a[1]); };
  auto h1 = [&](const std::vector<Tensor>& a) { return (ravel::grad(f1, 1)(a) * a[1]).sum(); };
  const Tensor want = ravel::grad(f1, 1)({x, w}), want2 = ravel::grad(h1, 1)({x, w});
  auto f = [](const std::vector<Tensor>& a) { return loss(a[0], ravel::all_gather(a[1])); };
  auto h = [&](const std::vector<Tensor>& a) { return (ravel::grad(f, 1)(a) * a[1]).sum(); };
  for (size_t n : {1u, 2u, 3u, 4u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const auto m = mesh(n);
      const Tensor xs = x.shard(m, 0), ws = w.shard(m, 0);
      Tensor g_plugin, g_composed, h_plugin, h_composed;
      {
        CollectivesEnv env("1");
        g_plugin = ravel::grad(f, 1)({xs, ws});
        h_plugin = ravel::grad(h, 1)({xs, ws});
      }
      {
        CollectivesEnv env("0");
        g_composed = ravel::grad(f, 1)({xs, ws});
        h_composed = ravel::grad(h, 1)({xs, ws});
      }
      if (n > 1) {
        BOOST_TEST(g_plugin.sharding().value() == ws.sharding().value());  // split like the parameter
        // The plugin's reduce-scatter returns realized parts (Note [Plugin reduce-scatter and
        // all-gather]); the composition's are lazy: which path the backward pass took.
        for (const Tensor& p : g_plugin.shards()) BOOST_TEST(p.is_realized());
        for (const Tensor& p : g_composed.shards()) BOOST_TEST(!p.is_realized());
      }
      check_close(g_plugin, want, 1e-12);
      check_close(g_composed, want, 1e-12);
      check_close(g_plugin, g_composed, 1e-12);
      check_close(h_plugin, want2, 1e-12);
      check_close(h_composed, want2, 1e-12);
    }
  }
}

// Cotangents that reach only some replicas (undefined for the others: zeros in the group rule):
// the loss reads replica 0 alone, so d/dw sum(w^2) = 2 w, split like w, on every path.
BOOST_AUTO_TEST_CASE(replicas_no_cotangent_reaches_contribute_nothing) {
  const Tensor w = data({8, 3}, 4, DType::F64);
  for (size_t n : {2u, 4u})
    for (const char* path : {"1", "0"}) {
      BOOST_TEST_CONTEXT(n << " devices, RAVEL_PLUGIN_COLLECTIVES=" << path) {
        CollectivesEnv env(path);
        const Tensor ws = w.shard(mesh(n), 0);
        auto f = [](const std::vector<Tensor>& a) { return ravel::all_gather(a[0]).shards()[0].square().sum(); };
        const Tensor g = ravel::grad(f)({ws})[0];
        BOOST_TEST(g.sharding().value() == ws.sharding().value());
        check_exact(g.to(mesh(1)[0]), w * 2.0);
      }
    }
}

// A Jit capturing the gradient step replays the plugin's all_gather and the reduce_scatter of its
// backward pass with each call's values.
BOOST_AUTO_TEST_CASE(a_jit_replays_the_gathered_parameters_gradient) {
  CollectivesEnv env("1");
  for (size_t n : {2u, 4u}) {
    const auto m = mesh(n);
    ravel::Jit step([](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{
          ravel::grad([](const std::vector<Tensor>& a) { return loss(a[0], ravel::all_gather(a[1])); }, 1)(in)};
    });
    for (int call = 0; call < 4; ++call) {
      BOOST_TEST_CONTEXT(n << " devices, call " << call) {
        const Tensor x = data({12, 12}, 10 + call), w = data({12, 5}, 20 + call) * 0.3;
        const Tensor want = ravel::grad([](const std::vector<Tensor>& a) { return loss(a[0], a[1]); }, 1)({x, w});
        const Tensor got = step({x.shard(m, 0), w.shard(m, 0)})[0];
        BOOST_TEST(got.sharding().value() == w.shard(m, 0).sharding().value());
        check_close(got, want, 1e-5);
      }
    }
    BOOST_TEST(step.replays() >= 2);
  }
}
