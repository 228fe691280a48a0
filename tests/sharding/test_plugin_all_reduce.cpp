// The all-reduce tbb_cpu runs across its own devices (ABI 1.9 all_reduce; Note [Plugin
// all-reduce] in core/src/runtime/plugin_collective.hpp) as the core uses it: on 2, 3, 4 and 8
// devices, for every collective op and many dtypes, at odd and block-crossing sizes, against a
// host loop and bit for bit against the composition of copies and adds it replaces
// (RAVEL_PLUGIN_COLLECTIVES=0 forces that one), with gradients, a Jit replay, uneven and empty
// shards of a reduction over the split axis, and the setting's errors.
#include <cstdlib>
#include <optional>
#include <string>

#include "../core/expect_error.hpp"
#include "sharding_common.hpp"

using namespace stest;
using ravel::CollectiveOp;

// Named, not anonymous: the suite is a unity build, and test_collectives.cpp has helpers of these names.
namespace plugin_ar {

using stest::CollectivesEnv;

// Device k's part: `len` elements, distinct per device, exact in every dtype (small integers,
// quarters for floats; prod stays in range for 8 devices of i8).
Tensor device_parts(size_t n, int64_t len, DType dt) {
  return parts_on_mesh(n, len, dt, [dt](int64_t k, int64_t i) {
    const int64_t r = (i * 13 + k * 29) % 7;
    return dt == DType::Bool ? double(r % 2) : ravel::is_float(dt) ? double(r - 3) / 4.0 : double(r % 2 + 1);
  });
}

const DType kDTypes[] = {DType::Bool, DType::U8, DType::I8, DType::I16, DType::U16, DType::I32, DType::U32,
                         DType::I64, DType::U64, DType::F16, DType::BF16, DType::F32, DType::F64};

}  // namespace plugin_ar

using namespace plugin_ar;

BOOST_AUTO_TEST_CASE(the_plugin_all_reduce_equals_a_host_loop_and_the_composition_bit_for_bit) {
  for (size_t n : {2u, 3u, 4u, 8u})
    for (DType dt : plugin_ar::kDTypes)
      for (CollectiveOp op : kCollectiveOps)
        for (int64_t len : {1, 7, 4097, 20011}) {
          if (len > 7 && n > 2 && dt != DType::F32 && dt != DType::I64) continue;  // enough large cases
          if (op == CollectiveOp::Prod && n == 8 && !ravel::is_float(dt)) continue;  // 2^8 wraps
          BOOST_TEST_CONTEXT(n << " devices, " << ravel::dtype_name(dt) << " x " << len << ", op " << int(op)) {
            Tensor x = device_parts(n, len, dt);
            Tensor fast, slow;
            {
              CollectivesEnv env("1");
              fast = ravel::all_reduce(x, op);
              // The plugin's results are realized leaves when all_reduce returns (the
              // composition's are lazy nodes): the evidence that this path ran.
              for (const Tensor& p : fast.shards()) BOOST_TEST(p.is_realized());
            }
            {
              CollectivesEnv env("0");
              slow = ravel::all_reduce(x, op);
              for (const Tensor& p : slow.shards()) BOOST_TEST(!p.is_realized());
            }
            BOOST_TEST(fast.sharding().value().replicated());
            // A host loop over the parts, in mesh order.
            const std::vector<double> all = x.to_vector<double>();
            std::vector<double> want(all.begin(), all.begin() + len);
            for (size_t k = 1; k < n; ++k)
              for (int64_t i = 0; i < len; ++i) want[i] = host_combine(want[i], all[k * len + i], op);
            if (dt == DType::Bool)
              for (auto& w : want) w = w != 0;
            const std::vector<Tensor> fs = fast.shards(), ss = slow.shards();
            // Exact but for halves, whose products round (the composition rounds the same way).
            const double tol = dt == DType::F16 || dt == DType::BF16 ? 1e-2 : 0;
            for (size_t k = 0; k < n; ++k) {
              BOOST_TEST(fs[k].device() == mesh(n)[k]);
              check_exact(fs[k], ss[k]);  // the same fold in the same order: the same bits
              std::vector<double> got = fs[k].to_vector<double>();
              for (int64_t i = 0; i < len; ++i)
                if (!(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])))) {
                  BOOST_ERROR("device " << k << ", element " << i << ": got " << got[i] << ", want " << want[i]);
                  break;
                }
            }
          }
        }
}

BOOST_AUTO_TEST_CASE(inexact_float_sums_agree_with_one_device_within_rounding) {
  CollectivesEnv env("1");
  const int64_t len = 30001;
  for (size_t n : {2u, 3u, 4u, 8u}) {
    Tensor whole = data({static_cast<int64_t>(n), len}, 3) * 1.37;
    Tensor r = ravel::all_reduce(whole.reshape({static_cast<int64_t>(n) * len}).shard(mesh(n), 0));
    const Tensor want = whole.sum(0);
    for (const Tensor& p : r.shards()) check_close(p, want, 1e-5);
    Tensor m = ravel::all_reduce(whole.reshape({static_cast<int64_t>(n) * len}).shard(mesh(n), 0), CollectiveOp::Max);
    check_exact(m.shards()[n - 1], whole.max(0));
  }
}

// Past 8 MiB per part tbb_cpu streams the results past the cache (Note [Streaming the results]),
// with ordinary stores for an unaligned tail: the same bits as the composition.
BOOST_AUTO_TEST_CASE(large_parts_streamed_to_the_results_agree_bit_for_bit) {
  const int64_t len = (int64_t{1} << 21) + 7;  // 8 MiB + 28 bytes of f32
  for (size_t n : {2u, 3u}) {
    Tensor x = Tensor::rand({static_cast<int64_t>(n) * len}, 11).shard(mesh(n), 0);
    Tensor fast, slow;
    {
      CollectivesEnv env("1");
      fast = ravel::all_reduce(x);
    }
    {
      CollectivesEnv env("0");
      slow = ravel::all_reduce(x);
    }
    for (size_t k = 0; k < n; ++k) check_exact(fast.shards()[k], slow.shards()[k]);
  }
}

BOOST_AUTO_TEST_CASE(a_reduction_over_uneven_and_empty_shards_uses_it_and_agrees) {
  CollectivesEnv env("1");
  for (size_t n : {2u, 3u, 4u, 8u})
    for (int64_t rows : {int64_t(n) + 3, int64_t(n) - 1, int64_t(1)}) {  // uneven; some shards empty
      BOOST_TEST_CONTEXT(n << " devices, " << rows << " rows") {
        Tensor x = data({rows, 9}, 5);
        Tensor s = x.shard(mesh(n), 0);
        check_close(s.sum(0).to(mesh(1)[0]), x.sum(0));
        check_exact(s.max(0).to(mesh(1)[0]), x.max(0));
      }
    }
  // Zero elements per part: nothing to reduce, zeros on every device.
  Tensor empty = Tensor::zeros({0}, DType::F32).replicate(mesh(3));
  Tensor r = ravel::all_reduce(empty);
  BOOST_TEST(r.shape() == Shape{0});
  BOOST_TEST(r.shards().size() == 3u);
}

BOOST_AUTO_TEST_CASE(its_gradients_are_the_compositions_to_second_order) {
  const size_t n = 3;
  const int64_t len = 5;
  Tensor x = device_parts(n, len, DType::F64) + 0.125;  // ties between parts remain (max/min rule)
  Tensor w = Tensor::from_vector<double>({1, -2, 3, 0.5, 4}, {len});
  for (CollectiveOp op : kCollectiveOps) {
    BOOST_TEST_CONTEXT("op " << int(op)) {
      auto f = [&](const std::vector<Tensor>& a) { return (ravel::all_reduce(a[0], op) * w).sum(); };
      // Second order: the gradient of <grad f(x), v>.
      auto h = [&](const std::vector<Tensor>& a) { return (ravel::grad(f)(a)[0] * a[0]).sum(); };
      Tensor g1, g2, h1, h2;
      {
        CollectivesEnv env("1");
        g1 = ravel::grad(f)({x})[0];
        h1 = ravel::grad(h)({x})[0];
      }
      {
        CollectivesEnv env("0");
        g2 = ravel::grad(f)({x})[0];
        h2 = ravel::grad(h)({x})[0];
      }
      BOOST_TEST(g1.sharding().value() == x.sharding().value());
      check_close(g1.to(mesh(1)[0]), g2.to(mesh(1)[0]), 1e-12);
      check_close(h1.to(mesh(1)[0]), h2.to(mesh(1)[0]), 1e-12);
    }
  }
  // The sum's gradient in closed form: w on every part.
  CollectivesEnv env("1");
  auto f = [&](const std::vector<Tensor>& a) { return (ravel::all_reduce(a[0]) * w).sum(); };
  std::vector<double> want;
  for (size_t k = 0; k < n; ++k) want.insert(want.end(), {1, -2, 3, 0.5, 4});
  check_exact(ravel::grad(f)({x})[0].to(mesh(1)[0]), Tensor::from_vector<double>(want, {int64_t(n) * len}));
}

BOOST_AUTO_TEST_CASE(a_jit_replays_it_with_each_calls_values) {
  CollectivesEnv env("1");
  const size_t n = 4;
  const int64_t len = 20000;
  ravel::Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ravel::all_reduce(in[0] * 2.0) + 1.0}; });
  for (int call = 0; call < 4; ++call) {
    BOOST_TEST_CONTEXT("call " << call) {
      Tensor whole = data({static_cast<int64_t>(n), len}, call);
      Tensor out = f({whole.reshape({static_cast<int64_t>(n) * len}).shard(mesh(n), 0)})[0];
      const Tensor want = (whole * 2.0).sum(0) + 1.0;
      for (const Tensor& p : out.shards()) check_close(p, want, 1e-5);
    }
  }
  BOOST_TEST(f.replays() >= 2);
}

// Note [Host steps in lanes]: with a host thread per device (RAVEL_JIT_LANES=1) the all-reduce
// runs in the first lane, after the other lanes made its inputs, and they wait for its results.
BOOST_AUTO_TEST_CASE(a_replay_with_a_thread_per_device_runs_it_in_a_lane) {
  CollectivesEnv env("1");
  setenv("RAVEL_JIT_LANES", "1", 1);
  for (size_t n : {2u, 3u, 8u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const int64_t len = 5000;
      ravel::Jit f([](const std::vector<Tensor>& in) {
        Tensor s = ravel::all_reduce((in[0] * 3.0).exp());
        return std::vector<Tensor>{ravel::all_reduce(s * s, CollectiveOp::Max) - 1.0};
      });
      for (int call = 0; call < 3; ++call) {
        Tensor whole = data({static_cast<int64_t>(n), len}, call + 7);
        Tensor out = f({whole.reshape({static_cast<int64_t>(n) * len}).shard(mesh(n), 0)})[0];
        const Tensor s = (whole * 3.0).exp().sum(0);
        const Tensor want = s * s - 1.0;
        for (const Tensor& p : out.shards()) check_close(p, want, 1e-5);
      }
      BOOST_TEST(f.replays() == 2);
    }
  }
  unsetenv("RAVEL_JIT_LANES");
}

BOOST_AUTO_TEST_CASE(auto_takes_it_from_the_threshold_and_a_bad_setting_is_an_error) {
  {
    CollectivesEnv env("auto");
    Tensor small = ravel::all_reduce(device_parts(2, 100, DType::F32));
    BOOST_TEST(!small.shards()[0].is_realized());
    Tensor large = ravel::all_reduce(device_parts(2, 16 * 1024, DType::F32));
    BOOST_TEST(large.shards()[0].is_realized());
  }
  CollectivesEnv env("yes");
  rtest::expect_error<ravel::ValueError>("bad setting", [&] { ravel::all_reduce(device_parts(2, 3, DType::F32)); },
                                         {"RAVEL_PLUGIN_COLLECTIVES='yes'", "expected 0", "auto"});
}
