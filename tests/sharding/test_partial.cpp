// Partial results (Note [Partial results] in core/src/tensor/sharded.hpp; decision 62): a sum,
// max or min over the split axis, and the row-parallel matmul, leave per-device partials that
// are combined where they are consumed. Every rule against the same program on one device; the
// combine a consumer gets bit for bit against the all-reduce it replaces; a split wanted of a
// partial moving the bytes of a reduce-scatter (the transfer counter), not of an all-reduce;
// uneven and empty parts; Jit replays. Gradients: test_partial_gradients.cpp.
#include <functional>
#include <string>

#include "../core/expect_error.hpp"
#include "partial_common.hpp"

using namespace stest;
using ravel::CollectiveOp;

using namespace partial_t;

// Named, not anonymous: the suite is a unity build.
namespace partial_rules {

enum class Kind { Partial, Replicas, Split0 };

struct Rule {
  std::string name;
  std::function<Tensor(const Tensor& p, const Tensor& r, size_t n)> f;  // r: on one device
  Kind kind;
};

}  // namespace partial_rules

using namespace partial_rules;

BOOST_AUTO_TEST_CASE(linear_ops_keep_partial_sums_and_every_result_equals_one_device) {
  const Tensor x = data({6, 7}, 1), w = data({7, 5}, 2), r = data({6, 5}, 3);
  const Tensor want = x.matmul(w);
  // What each op makes of a partial sum p (r, one device; rep(r), replicas; split: rows split).
  auto rep = [](const Tensor& t, size_t n) { return t.replicate(mesh(n)); };
  const std::vector<Rule> rules = {
      {"p", [](const Tensor& p, const Tensor&, size_t) { return p; }, Kind::Partial},
      {"p + p", [](const Tensor& p, const Tensor&, size_t) { return p + p; }, Kind::Partial},
      {"-p", [](const Tensor& p, const Tensor&, size_t) { return -p; }, Kind::Partial},
      {"p - p * 0.25", [](const Tensor& p, const Tensor&, size_t) { return p - p * 0.25; }, Kind::Partial},
      {"p / 4", [](const Tensor& p, const Tensor&, size_t) { return p / 4.0; }, Kind::Partial},
      {"p * r", [](const Tensor& p, const Tensor& t, size_t) { return p * t; }, Kind::Partial},
      {"p * rep(r)", [&](const Tensor& p, const Tensor& t, size_t n) { return rep(t, n) * p; }, Kind::Partial},
      {"sum 0", [](const Tensor& p, const Tensor&, size_t) { return p.sum(0); }, Kind::Partial},
      {"sum", [](const Tensor& p, const Tensor&, size_t) { return p.sum(); }, Kind::Partial},
      {"mean 1", [](const Tensor& p, const Tensor&, size_t) { return p.mean(1); }, Kind::Partial},
      {"reshape", [](const Tensor& p, const Tensor&, size_t) { return p.reshape({3, 10}); }, Kind::Partial},
      {"permute", [](const Tensor& p, const Tensor&, size_t) { return p.permute({1, 0}); }, Kind::Partial},
      {"pad", [](const Tensor& p, const Tensor&, size_t) { return p.pad({{1, 0}, {0, 2}}); }, Kind::Partial},
      {"shrink", [](const Tensor& p, const Tensor&, size_t) { return p.shrink({{1, 4}, {2, 5}}); }, Kind::Partial},
      {"reshape 1", [](const Tensor& p, const Tensor&, size_t) { return p.reshape({1, 6, 5}); }, Kind::Partial},
      {"contiguous", [](const Tensor& p, const Tensor&, size_t) { return p.permute({1, 0}).contiguous(); },
       Kind::Partial},
      // Not linear, or not exact: combined first (p + r is not partial(p_i + r)).
      {"p + r", [](const Tensor& p, const Tensor& t, size_t) { return p + t; }, Kind::Replicas},
      {"p + rep(r)", [&](const Tensor& p, const Tensor& t, size_t n) { return p + rep(t, n); }, Kind::Replicas},
      {"p + 1", [](const Tensor& p, const Tensor&, size_t) { return p + 1.0; }, Kind::Replicas},
      {"p * p", [](const Tensor& p, const Tensor&, size_t) { return p * p; }, Kind::Replicas},
      {"expand", [](const Tensor& p, const Tensor&, size_t) { return p.reshape({1, 6, 5}).expand({2, 6, 5}); },
       Kind::Replicas},
      {"exp", [](const Tensor& p, const Tensor&, size_t) { return (p * 0.1).exp(); }, Kind::Replicas},
      {"max 0", [](const Tensor& p, const Tensor&, size_t) { return p.max(0); }, Kind::Replicas},
      {"cast f64", [](const Tensor& p, const Tensor&, size_t) { return p.cast(DType::F64); }, Kind::Replicas},
      {"pad 1.5", [](const Tensor& p, const Tensor&, size_t) { return p.pad({{1, 1}, {0, 0}}, 1.5); }, Kind::Replicas},
      // A split operand: the partial is reduce-scattered to its layout.
      {"p + split(r)", [](const Tensor& p, const Tensor& t, size_t n) { return t.shard(mesh(n), 0) + p; }, Kind::Split0},
      {"p * split(r)", [](const Tensor& p, const Tensor& t, size_t n) { return p * t.shard(mesh(n), 0); }, Kind::Split0},
      {"shard 0", [](const Tensor& p, const Tensor&, size_t n) { return p.shard(mesh(n), 0); }, Kind::Split0},
  };
  for (size_t n : {2u, 3u, 4u}) {  // k = 7: uneven parts (4+3, 3+2+2, 2+2+2+1)
    const Tensor p = row_parallel(x, w, n);
    BOOST_TEST_REQUIRE(partial_is(p, CollectiveOp::Sum));
    BOOST_TEST(p.sharding()->str().rfind("partial sum over tbb_cpu:0, tbb_cpu:1", 0) == 0, p.sharding()->str());
    for (const Rule& rule : rules) {
      BOOST_TEST_CONTEXT(n << " devices, " << rule.name) {
        const Tensor got = rule.f(p, r, n);
        const Tensor ref = rule.f(want, r, 1);
        if (rule.kind == Kind::Partial) BOOST_TEST(partial_is(got, CollectiveOp::Sum), got.sharding()->str());
        if (rule.kind == Kind::Replicas) BOOST_TEST(replicas(got), got.sharding()->str());
        if (rule.kind == Kind::Split0) BOOST_TEST(split_on(got, 0), got.sharding()->str());
        check_close(got, ref);
        // Every part of a combined result holds the value (not n times a replica).
        if (rule.kind == Kind::Replicas)
          for (const Tensor& part : got.shards()) check_close(part, ref);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(max_and_min_over_the_split_axis_stay_partial) {
  const Tensor x = data({7, 5}, 4);
  for (size_t n : {2u, 3u, 4u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const Tensor s = x.shard(mesh(n), 0);
      BOOST_TEST(partial_is(s.max(0), CollectiveOp::Max));
      check_exact(s.max(0), x.max(0));
      // Negation turns a max into a min (min is -max(-x)): exact.
      BOOST_TEST(partial_is(-s.max(0), CollectiveOp::Min));
      check_exact(-s.max(0), -x.max(0));
      BOOST_TEST(partial_is(s.min(0), CollectiveOp::Min));
      check_exact(s.min(0), x.min(0));
      BOOST_TEST(s.min(0).sharding()->str().rfind("partial min over", 0) == 0);
      // A max of a max partial stays partial; a sum of it, or a scale, does not.
      BOOST_TEST(partial_is(s.max(0).max(), CollectiveOp::Max));
      check_exact(s.max(0).max(), x.max());
      BOOST_TEST(replicas(s.max(0).sum()));
      check_close(s.max(0).sum(), x.max(0).sum());
      BOOST_TEST(replicas(s.max(0) * 2.0));
      check_close(s.max(0) * -2.0, x.max(0) * -2.0);
      BOOST_TEST(replicas(s.max(0) + s.max(0)));
      check_close(s.max(0) + s.max(0), x.max(0) * 2.0);
      // A split wanted of it: a reduce-scatter by max.
      const Tensor sc = s.max(0).shard(mesh(n), 0);
      BOOST_TEST(split_on(sc, 0));
      check_exact(sc, x.max(0));
      check_exact(s.min(0).shard(mesh(n), 0), x.min(0));
      // Integers: exact too.
      const Tensor xi = data({7, 5}, 4, DType::I32);
      check_exact(xi.shard(mesh(n), 0).max(0), xi.max(0));
      check_exact(xi.shard(mesh(n), 0).sum(0) * 3, xi.sum(0) * 3);
      // Integer negation wraps, so it does not turn a max into a min: combined first.
      const Tensor u = Tensor::from_vector<double>({0, 0, 0, 0, 0, 0, 0, 7}, {8}).cast(DType::U8);
      BOOST_TEST(replicas(-u.shard(mesh(n), 0).max(0)));
      check_exact(-u.shard(mesh(n), 0).max(0), -u.max(0));
      BOOST_TEST(replicas(-xi.shard(mesh(n), 0).max(0)));
      check_exact(-xi.shard(mesh(n), 0).max(0), -xi.max(0));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_consumer_gets_the_all_reduce_it_replaces_bit_for_bit) {
  const Tensor x = data({6, 40}, 5), w = data({40, 9}, 6);
  for (const char* plugin : {"0", "1"}) {
    CollectivesEnv env(plugin);
    for (size_t n : {2u, 3u, 4u}) {
      BOOST_TEST_CONTEXT(n << " devices, RAVEL_PLUGIN_COLLECTIVES=" << plugin) {
        const Tensor p = row_parallel(x, w, n);
        // The user's all_reduce of the device values (the partials) is what the eager
        // reduction produced before; every way of consuming p gives it bit for bit.
        const std::vector<Tensor> before = ravel::all_reduce(p).shards();
        const std::vector<Tensor> reps = p.replicate(mesh(n)).shards();
        // Every consumer that needs the value shares one combine (the plugin's collective runs
        // when it is built: two consumers would otherwise run it twice).
        BOOST_TEST(reps[0].node() == p.replicate(mesh(n)).shards()[0].node());
        BOOST_TEST(reps[n - 1].node() == ravel::all_gather(p).shards()[n - 1].node());
        const std::vector<Tensor> gathered = ravel::all_gather(p).shards();
        for (size_t k = 0; k < n; ++k) {
          check_exact(reps[k], before[k]);
          check_exact(gathered[k], before[k]);
          check_exact(p.to(mesh(n)[k]), before[k]);  // a reduce onto device k
          check_exact(ravel::reduce(p, mesh(n)[k]), before[k]);
        }
        // A host read (to_vector, item) is the reduce onto the first device.
        check_exact(p, before[0]);
        BOOST_TEST(p.sum().item<float>() == ravel::all_reduce(p.sum()).shards()[0].item<float>());
        // A split of it equals the slices of the all-reduce, bit for bit.
        const Tensor sc = p.shard(mesh(n), 0);
        const Tensor ref = ravel::all_reduce(p).shard(mesh(n), 0);
        BOOST_TEST(sc.sharding().value() == ref.sharding().value());
        for (size_t k = 0; k < n; ++k) check_exact(sc.shards()[k], ref.shards()[k]);
        check_exact(ravel::reduce_scatter(p), ref);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_split_of_a_row_parallel_output_moves_the_bytes_of_a_reduce_scatter) {
  CollectivesEnv env("0");  // the composition: every byte between devices is a counted transfer
  const Tensor x = data({8, 12}, 7), w = data({12, 16}, 8);
  const int64_t bytes = 8 * 16 * 4;  // one partial result, f32
  for (size_t n : {2u, 4u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const Tensor xs = x.shard(mesh(n), 1), ws = w.shard(mesh(n), 0);
      const Tensor p = xs.matmul(ws);
      ravel::realize({p});  // the partials: local kernels
      for (int64_t axis : {0, 1}) {
        ravel::reset_stats();
        const Tensor rs = p.shard(mesh(n), axis);
        ravel::realize({rs});
        const int64_t rs_bytes = ravel::cumulative_stats().bytes_transferred;
        ravel::reset_stats();
        const Tensor ar = ravel::all_reduce(p).shard(mesh(n), axis);  // what it replaced
        ravel::realize({ar});
        const int64_t ar_bytes = ravel::cumulative_stats().bytes_transferred;
        // Each device receives slice k of the n - 1 other partials: (n - 1)/n of one partial
        // each, against n - 1 whole partials each for the all-reduce.
        BOOST_TEST(rs_bytes == static_cast<int64_t>(n - 1) * bytes);
        BOOST_TEST(ar_bytes == static_cast<int64_t>(n * (n - 1)) * bytes);
        check_exact(rs, ar);
        check_close(rs, x.matmul(w));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_broadcast_partial_is_combined_before_it_is_expanded) {
  CollectivesEnv env("0");
  // Softmax's shift over a split feature axis: the max is a [B, 1] partial broadcast against the
  // split x. The broadcast combines the [B, 1] partials (n - 1 of B floats into each device) and
  // expands locally, where a reduce-scatter of the expanded [B, F] would move (n - 1)/n of B F
  // floats into each.
  const int64_t b = 8, f = 64;
  const Tensor x = data({b, f}, 80);
  for (size_t n : {2u, 4u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const Tensor xs = x.shard(mesh(n), 1).realize();
      ravel::reset_stats();
      const Tensor y = xs - xs.max(1, true);
      ravel::realize({y});
      BOOST_TEST(ravel::cumulative_stats().bytes_transferred == static_cast<int64_t>(n * (n - 1)) * b * 4);
      BOOST_TEST(split_on(y, 1));
      check_exact(y, x - x.max(1, true));
      check_close(xs.softmax(1), x.softmax(1));
      check_close(xs.sum(1, true) * xs, x.sum(1, true) * x);  // a sum partial expanded, then multiplied
      check_close((xs.sum(1, true) + 1.0).expand({b, f}), (x.sum(1, true) + 1.0).expand({b, f}));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_plugin_reduce_scatter_takes_an_even_row_split_of_a_partial) {
  CollectivesEnv env("1");
  const Tensor x = data({8, 12}, 7), w = data({12, 16}, 8);
  for (size_t n : {2u, 4u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const Tensor p = row_parallel(x, w, n);
      const Tensor rs = p.shard(mesh(n), 0);
      // The plugin's results are realized leaves when the call returns: its path ran.
      for (const Tensor& part : rs.shards()) BOOST_TEST(part.is_realized());
      CollectivesEnv composed("0");
      check_exact(rs, p.shard(mesh(n), 0));
      check_close(rs, x.matmul(w));
    }
  }
}

BOOST_AUTO_TEST_CASE(uneven_and_empty_parts) {
  // Rows of the result split unevenly (7 over 3, 2 over 3: an empty part) from a partial.
  for (int64_t m : {7, 2, 0}) {
    const Tensor x = data({m, 6}, 9), w = data({6, 4}, 10);
    const Tensor p = row_parallel(x, w, 3);
    BOOST_TEST_CONTEXT(m << " rows") {
      BOOST_TEST(partial_is(p, CollectiveOp::Sum));
      check_close(p.shard(mesh(3), 0), x.matmul(w));
      check_close(p.shard(mesh(3), 1) * 2.0, x.matmul(w) * 2.0);
    }
  }
  // A contraction axis with an empty part (k = 2 over 3 devices) has no partial sum there:
  // combined at once into replicas, as before.
  const Tensor x = data({5, 2}, 11), w = data({2, 3}, 12);
  const Tensor p = row_parallel(x, w, 3);
  BOOST_TEST(replicas(p));
  check_close(p, x.matmul(w));
  // A whole empty contraction axis: zeros.
  const Tensor e =
      Tensor::zeros({4, 0}, DType::F32).shard(mesh(2), 1).matmul(Tensor::zeros({0, 3}, DType::F32).shard(mesh(2), 0));
  check_close(e, Tensor::zeros({4, 3}, DType::F32));
  // A partial scalar cannot be split: the reduce_scatter's typed error.
  const Tensor scalar = row_parallel(data({4, 6}), data({6, 3}), 2).sum();
  BOOST_TEST(partial_is(scalar, CollectiveOp::Sum));
  rtest::expect_error<ravel::ShapeError>("reduce_scatter of a partial scalar",
                                         [&] { (void)ravel::reduce_scatter(scalar); }, {"scalar"});
}

BOOST_AUTO_TEST_CASE(a_jit_replays_a_step_with_partial_results_and_combines_its_outputs) {
  const std::vector<Device> m = mesh(2);
  auto step = [&m](const std::vector<Tensor>& in) {
    const Tensor p = in[0].matmul(in[1]);
    return std::vector<Tensor>{p.shard(m, 0).tanh(), (p * 2.0).sum(0), p};
  };
  ravel::Jit jitted(step);
  for (int s = 0; s < 3; ++s) {
    BOOST_TEST_CONTEXT("call " << s) {
      const Tensor x = data({4, 6}, 20 + s), w = data({6, 5}, 30 + s);
      const std::vector<Tensor> got = jitted({x.shard(m, 1), w.shard(m, 0)});
      BOOST_TEST(split_on(got[0], 0));
      // Partial outputs come combined, inside the replayed step (Note [Sharded Jit]).
      BOOST_TEST(replicas(got[1]));
      BOOST_TEST(replicas(got[2]));
      check_close(got[0], x.matmul(w).tanh());
      check_close(got[1], (x.matmul(w) * 2.0).sum(0));
      check_close(got[2], x.matmul(w));
    }
  }
  BOOST_TEST(jitted.captures() == 1);
  BOOST_TEST(jitted.replays() == 2);
  // A partial input: its layout is part of the signature, and the step's reduce-scatter replays.
  ravel::Jit split([&m](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].shard(m, 0) * 2.0}; });
  for (int s = 0; s < 3; ++s) {
    const Tensor x = data({4, 6}, 40 + s), w = data({6, 5}, 50 + s);
    const Tensor p = row_parallel(x, w, 2).realize();
    BOOST_TEST_REQUIRE(partial_is(p, CollectiveOp::Sum));
    const Tensor got = split({p})[0];
    BOOST_TEST(split_on(got, 0));
    check_close(got, x.matmul(w) * 2.0);
  }
  BOOST_TEST(split.captures() == 1);
  BOOST_TEST(split.replays() == 2);
  // The same parts as replicas are another signature (a new capture), and another value.
  const Tensor p = row_parallel(data({4, 6}, 60), data({6, 5}, 61), 2);
  const Tensor as_replicas = ravel::all_reduce(p);
  check_close(split({as_replicas})[0], data({4, 6}, 60).matmul(data({6, 5}, 61)) * 2.0);
  BOOST_TEST(split.captures() == 2);
}
