// The reduce-scatter and all-gather tbb_cpu runs across its own devices (ABI 1.12; Note [Plugin
// reduce-scatter and all-gather] in core/src/tensor/collectives.cpp) as the core uses them: on
// 1, 2, 3, 4 and 8 devices, for every collective op and many dtypes, at odd and block-crossing
// sizes, against a host loop and bit for bit against the composition it replaces
// (RAVEL_PLUGIN_COLLECTIVES=0), with gradients to second order, a Jit replay, the splits it does
// not take (uneven, empty, an inner axis) still right, and the threshold.
#include <cstdlib>
#include <optional>
#include <string>

#include "../core/expect_error.hpp"
#include "sharding_common.hpp"

using namespace stest;
using ravel::CollectiveOp;

// Named, not anonymous: the suite is a unity build (test_plugin_all_reduce.cpp has helpers of these names).
namespace plugin_sg {

using stest::CollectivesEnv;

// Device k's part: `len` elements, distinct per device, exact in every dtype.
Tensor sg_parts(size_t n, int64_t len, DType dt) {
  return parts_on_mesh(n, len, dt, [dt](int64_t k, int64_t i) {
    const int64_t r = (i * 13 + k * 29) % 7;
    return dt == DType::Bool ? double(r % 2) : ravel::is_float(dt) ? double(r - 3) / 4.0 : double(r % 2 + 1);
  });
}

const DType kDTypes[] = {DType::Bool, DType::U8, DType::I8, DType::I16, DType::U16, DType::I32, DType::U32,
                         DType::I64, DType::U64, DType::F16, DType::BF16, DType::F32, DType::F64};

// f(x) with the plugin's path and with the composition; checks which one ran (on several
// devices: a mesh of one is the tensor itself, realized or not as it came).
template <class F>
std::pair<Tensor, Tensor> both_ways(F f, const Tensor& x, bool several) {
  Tensor fast, slow;
  {
    CollectivesEnv env("1");
    fast = f(x);
    // The plugin's results are realized leaves when the call returns (the composition's are
    // lazy nodes): the evidence that its path ran.
    if (several)
      for (const Tensor& p : fast.shards()) BOOST_TEST(p.is_realized());
  }
  {
    CollectivesEnv env("0");
    slow = f(x);
    if (several)
      for (const Tensor& p : slow.shards()) BOOST_TEST(!p.is_realized());
  }
  return {fast, slow};
}

}  // namespace plugin_sg

using namespace plugin_sg;

BOOST_AUTO_TEST_CASE(the_plugin_reduce_scatter_equals_a_host_loop_and_the_composition_bit_for_bit) {
  for (size_t n : {1u, 2u, 3u, 4u, 8u})
    for (DType dt : plugin_sg::kDTypes)
      for (CollectiveOp op : kCollectiveOps)
        for (int64_t len : {1, 7, 4097}) {  // elements per chunk: each part holds n of them
          if (len > 7 && n > 2 && dt != DType::F32 && dt != DType::I64) continue;  // enough large cases
          if (op == CollectiveOp::Prod && n == 8 && !ravel::is_float(dt)) continue;  // 2^8 wraps
          BOOST_TEST_CONTEXT(n << " devices, " << ravel::dtype_name(dt) << " x " << len << " per chunk, op " << int(op)) {
            const int64_t part = static_cast<int64_t>(n) * len;
            Tensor x = sg_parts(n, part, dt);
            auto [fast, slow] = both_ways([op](const Tensor& t) { return ravel::reduce_scatter(t, op); }, x, n > 1);
            BOOST_TEST(fast.shape() == Shape{part});
            BOOST_TEST(fast.sharding().has_value() == (n > 1));
            if (n > 1) BOOST_TEST(fast.sharding().value() == slow.sharding().value());
            // A host loop: chunk k of every part, folded in mesh order.
            const std::vector<double> all = x.to_vector<double>();
            const std::vector<Tensor> fs = fast.shards(), ss = slow.shards();
            const double tol = dt == DType::F16 || dt == DType::BF16 ? 1e-2 : 0;
            for (size_t k = 0; k < n; ++k) {
              std::vector<double> want(all.begin() + static_cast<std::ptrdiff_t>(k * len),
                                       all.begin() + static_cast<std::ptrdiff_t>((k + 1) * len));
              for (size_t j = 1; j < n; ++j)
                for (int64_t i = 0; i < len; ++i) want[i] = host_combine(want[i], all[j * part + k * len + i], op);
              if (dt == DType::Bool)
                for (auto& w : want) w = w != 0;
              BOOST_TEST(fs[k].device() == mesh(n)[k]);
              check_exact(fs[k], ss[k]);  // the same fold in the same order: the same bits
              const std::vector<double> got = fs[k].to_vector<double>();
              BOOST_TEST_REQUIRE(got.size() == want.size());
              for (int64_t i = 0; i < len; ++i)
                if (!(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])))) {
                  BOOST_ERROR("device " << k << ", element " << i << ": got " << got[i] << ", want " << want[i]);
                  break;
                }
            }
          }
        }
}

BOOST_AUTO_TEST_CASE(the_plugin_all_gather_equals_the_whole_tensor_and_the_composition_bit_for_bit) {
  for (size_t n : {1u, 2u, 3u, 4u, 8u})
    for (DType dt : plugin_sg::kDTypes)
      for (int64_t len : {1, 7, 4097, 20011}) {
        if (len > 7 && n > 2 && dt != DType::F32 && dt != DType::I64 && dt != DType::F16) continue;
        BOOST_TEST_CONTEXT(n << " devices, " << ravel::dtype_name(dt) << " x " << len) {
          Tensor x = sg_parts(n, len, dt);
          auto [fast, slow] = both_ways([](const Tensor& t) { return ravel::all_gather(t); }, x, n > 1);
          const Tensor whole = x.to(mesh(1)[0]);
          const std::vector<Tensor> fs = fast.shards(), ss = slow.shards();
          BOOST_TEST_REQUIRE(fs.size() == n);
          for (size_t k = 0; k < n; ++k) {
            BOOST_TEST(fs[k].device() == mesh(n)[k]);
            check_exact(fs[k], whole);
            check_exact(fs[k], ss[k]);
          }
          if (n > 1) BOOST_TEST(fast.sharding().value().replicated());
        }
      }
}

BOOST_AUTO_TEST_CASE(rows_split_along_the_outer_axis_go_to_the_plugin_an_inner_axis_or_uneven_split_does_not) {
  CollectivesEnv env("1");
  for (size_t n : {2u, 3u, 4u}) {
    const auto ni = static_cast<int64_t>(n);
    BOOST_TEST_CONTEXT(n << " devices") {
      // Rows along axis 0 (the chunks are whole rows): the plugin, in both directions.
      Tensor whole = data({ni * 3, 5}, 2);
      Tensor g = ravel::all_gather(whole.shard(mesh(n), 0));
      for (const Tensor& p : g.shards()) {
        BOOST_TEST(p.is_realized());
        check_exact(p, whole);
      }
      Tensor rs = ravel::reduce_scatter(whole.replicate(mesh(n)));
      for (const Tensor& p : rs.shards()) BOOST_TEST(p.is_realized());
      check_close(rs.to(mesh(1)[0]), whole * static_cast<double>(n), 1e-6);
      // A leading axis of size 1 keeps the chunks contiguous: the plugin too.
      Tensor row = data({1, ni * 4}, 3);
      Tensor g1 = ravel::all_gather(row.shard(mesh(n), 1));
      for (const Tensor& p : g1.shards()) {
        BOOST_TEST(p.is_realized());
        check_exact(p, row);
      }
      // An inner axis under longer rows: slices, not chunks; the composition, same values.
      Tensor cols = data({3, ni * ni * 2}, 4);
      Tensor g2 = ravel::all_gather(cols.shard(mesh(n), 1));
      for (const Tensor& p : g2.shards()) {
        BOOST_TEST(!p.is_realized());
        check_exact(p, cols);
      }
      // Parts of {3, 2n}: device k gets columns [2k, 2k + 2) of every part, summed.
      Tensor rs2 = ravel::reduce_scatter(cols.shard(mesh(n), 1));
      BOOST_TEST(!rs2.shards()[0].is_realized());
      check_close(rs2.to(mesh(1)[0]), cols.reshape({3, ni, ni * 2}).sum(1), 1e-6);
      // Uneven and empty parts (numpy.array_split): the composition.
      for (int64_t rows : {ni + 1, ni - 1}) {
        Tensor u = data({rows, 2}, 5);
        Tensor gu = ravel::all_gather(u.shard(mesh(n), 0));
        for (const Tensor& p : gu.shards()) check_exact(p, u);
      }
    }
  }
  // Zero elements: nothing to move, the right shapes.
  Tensor empty = Tensor::zeros({0, 3}, DType::F32).shard(mesh(3), 0);
  BOOST_TEST(ravel::all_gather(empty).shape() == (Shape{0, 3}));
  BOOST_TEST(ravel::reduce_scatter(Tensor::zeros({0}, DType::F32).replicate(mesh(3))).shape() == Shape{0});
}

BOOST_AUTO_TEST_CASE(their_gradients_are_the_compositions_to_second_order) {
  for (size_t n : {2u, 3u}) {
    const int64_t len = 4;  // per chunk
    const auto part = static_cast<int64_t>(n) * len;
    Tensor x = sg_parts(n, part, DType::F64) + 0.125;  // ties between parts remain (max/min rule)
    std::vector<double> wv;
    for (int64_t i = 0; i < part; ++i) wv.push_back(double(i % 5) - 1.5);
    Tensor w = Tensor::from_vector<double>(wv, {part});
    for (CollectiveOp op : kCollectiveOps) {
      BOOST_TEST_CONTEXT(n << " devices, op " << int(op)) {
        auto f = [&](const std::vector<Tensor>& a) { return (ravel::reduce_scatter(a[0], op) * w).sum(); };
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
    CollectivesEnv env("1");
    // Closed forms. reduce_scatter (sum): every part's gradient is w (its adjoint gathers the
    // cotangents); all_gather: the gradient of sum(w * gathered) is w, split as x is.
    auto rs = [&](const std::vector<Tensor>& a) { return (ravel::reduce_scatter(a[0]) * w).sum(); };
    std::vector<double> tiled;
    for (size_t k = 0; k < n; ++k) tiled.insert(tiled.end(), wv.begin(), wv.end());
    check_exact(ravel::grad(rs)({x})[0].to(mesh(1)[0]), Tensor::from_vector<double>(tiled, {static_cast<int64_t>(n) * part}));
    Tensor wt = Tensor::from_vector<double>(tiled, {static_cast<int64_t>(n) * part});
    auto ag = [&](const std::vector<Tensor>& a) { return (ravel::all_gather(a[0]) * wt * wt).sum(); };
    auto ag2 = [&](const std::vector<Tensor>& a) { return (ravel::grad(ag)(a)[0] * a[0]).sum(); };
    Tensor ga = ravel::grad(ag)({x})[0];
    BOOST_TEST(ga.sharding().value() == x.sharding().value());
    check_exact(ga.to(mesh(1)[0]), wt * wt);
    check_exact(ravel::grad(ag2)({x})[0].to(mesh(1)[0]), wt * wt);
  }
}

BOOST_AUTO_TEST_CASE(a_jit_replays_them_with_each_calls_values) {
  CollectivesEnv env("1");
  for (size_t n : {2u, 4u}) {
    const auto ni = static_cast<int64_t>(n);
    const int64_t len = 6000;  // per chunk
    ravel::Jit f([](const std::vector<Tensor>& in) {
      Tensor rs = ravel::reduce_scatter(in[0] * 2.0);
      return std::vector<Tensor>{rs + 1.0, ravel::all_gather(rs * 3.0)};
    });
    for (int call = 0; call < 4; ++call) {
      BOOST_TEST_CONTEXT(n << " devices, call " << call) {
        Tensor whole = data({ni, ni * len}, call);
        Tensor x = whole.reshape({ni * ni * len}).shard(mesh(n), 0);
        std::vector<Tensor> out = f({x});
        const Tensor sum = (whole * 2.0).sum(0);
        check_close(out[0].to(mesh(1)[0]), sum + 1.0, 1e-5);
        for (const Tensor& p : out[1].shards()) check_close(p, sum * 3.0, 1e-5);
      }
    }
    BOOST_TEST(f.replays() >= 2);
  }
}

BOOST_AUTO_TEST_CASE(auto_takes_them_from_the_threshold) {
  CollectivesEnv env("auto");
  BOOST_TEST(!ravel::all_gather(sg_parts(2, 100, DType::F32)).shards()[0].is_realized());
  BOOST_TEST(ravel::all_gather(sg_parts(2, 16 * 1024, DType::F32)).shards()[0].is_realized());
  BOOST_TEST(!ravel::reduce_scatter(sg_parts(2, 100, DType::F32)).shards()[0].is_realized());
  BOOST_TEST(ravel::reduce_scatter(sg_parts(2, 16 * 1024, DType::F32)).shards()[0].is_realized());
}

// Run by CTest with RAVEL_TBB_TEST_FAULT (a queued kernel fails) and RAVEL_PLUGIN_COLLECTIVES=1:
// the plugin's collective is queued behind the failed kernel on every device, and the error
// reaches the caller as a DeviceError, with no hang.
BOOST_AUTO_TEST_CASE(a_failing_device_inside_a_plugin_reduce_scatter_is_a_device_error, *boost::unit_test::disabled()) {
  BOOST_TEST_REQUIRE(std::getenv("RAVEL_TBB_TEST_FAULT") != nullptr);
  Tensor s = sg_parts(4, 4000, DType::F32);
  rtest::expect_error<ravel::DeviceError>("fault", [&] { ravel::reduce_scatter(s).to_vector<float>(); },
                                          {"queued work failed"});
}

BOOST_AUTO_TEST_CASE(a_failing_device_inside_a_plugin_all_gather_is_a_device_error, *boost::unit_test::disabled()) {
  BOOST_TEST_REQUIRE(std::getenv("RAVEL_TBB_TEST_FAULT") != nullptr);
  Tensor s = sg_parts(4, 1000, DType::F32);
  rtest::expect_error<ravel::DeviceError>("fault", [&] { ravel::all_gather(s).to_vector<float>(); },
                                          {"queued work failed"});
}
