// Global-view data parallelism: the entered parameters' all-reduces in buckets (Note [Entered
// gradient buckets], core/src/distributed/entered_buckets.cpp), against the same program with one
// all-reduce per entered value and against the whole computation on one device.
#include <chrono>
#include <cmath>
#include <thread>

#include "distributed/entered_buckets.hpp"
#include "ravel/autodiff.hpp"
#include "ravel/distributed.hpp"
#include "ravel/jit.hpp"
#include "ravel/mesh_tensor.hpp"
#include "ravel/ravel.hpp"
#include "mesh_support.hpp"
#include "test_support.hpp"

namespace entered_buckets_test {  // named: the suite is a unity build

namespace dist = ravel::distributed;
using dist::MeshTensor;
using ravel::Device;
using ravel::Tensor;

using mesh_support::diff;
using mesh_support::kOne;
using mesh_support::local_devices;

// Restores the default (Options' bucket size, buckets on) however a test ends.
struct BucketSetting {
  BucketSetting(bool on, size_t bytes) { dist::detail::set_entered_buckets(on, bytes); }
  ~BucketSetting() { dist::detail::set_entered_buckets(true, 0); }
};

// A data-parallel MLP in the global view: x and the target split by batch across the ranks,
// every parameter replicated (so entered), tanh, mean squared error.
struct Mlp {
  Tensor x, y;
  std::vector<Tensor> p;  // w1 [in, hidden], b1 [hidden], w2 [hidden, out], b2 [out]
};
Mlp make_mlp(int64_t batch, int seed) {
  const int64_t in = 6, hidden = 12, out = 3;
  return Mlp{Tensor::randn({batch, in}, seed), Tensor::randn({batch, out}, seed + 1),
             {Tensor::randn({in, hidden}, seed + 2) * 0.5, Tensor::randn({hidden}, seed + 3) * 0.1,
              Tensor::randn({hidden, out}, seed + 4) * 0.5, Tensor::randn({out}, seed + 5) * 0.1}};
}
Tensor mlp_loss(const Tensor& x, const Tensor& y, const std::vector<Tensor>& p) {
  const Tensor d = (x.matmul(p[0]) + p[1]).tanh().matmul(p[2]) + p[3] - y;
  return (d * d).mean();
}
MeshTensor mesh_mlp_loss(const MeshTensor& x, const MeshTensor& y, const std::vector<MeshTensor>& p) {
  const MeshTensor d = (x.matmul(p[0]) + p[1]).tanh().matmul(p[2]) + p[3] - y;
  return (d * d).mean();
}

// The gradients of the global loss on this rank, with `bytes` buckets (0: none).
std::vector<Tensor> mesh_gradients(const dist::Mesh& mesh, const Mlp& m, size_t bytes) {
  BucketSetting setting(bytes > 0, bytes);
  std::vector<MeshTensor> placed;
  std::vector<Tensor> parts;
  for (const Tensor& t : m.p) placed.push_back(mesh.as_replicated(mesh.replicate(t))), parts.push_back(placed.back().local());
  const MeshTensor x = mesh.shard(m.x, 0), y = mesh.shard(m.y, 0);
  auto [loss, g] = ravel::value_and_grad(
      [&](const std::vector<Tensor>& q) {
        std::vector<MeshTensor> p;
        for (size_t i = 0; i < q.size(); ++i) p.push_back(placed[i].with_local(q[i]));
        return mesh_mlp_loss(x, y, p).local();
      },
      parts);
  // Read back: the first readers, so every bucket has begun and ended here (realize() alone is
  // not a reader: a result already on kOne is a pending leaf it leaves as it is).
  for (Tensor& t : g) t = Tensor::from_vector(t.to(kOne).to_vector<float>(), t.shape());
  return g;
}

BOOST_AUTO_TEST_SUITE(distributed_entered_buckets)

BOOST_AUTO_TEST_CASE(bucketed_gradients_equal_one_all_reduce_each) {
  dist::Mesh mesh(local_devices());
  const Mlp m = make_mlp(2 * mesh.size(), 300);
  const auto [ref_loss, ref] = ravel::value_and_grad([&](const std::vector<Tensor>& p) { return mlp_loss(m.x, m.y, p); }, m.p);
  const bool ranks = dist::world_size() > 1;
  const auto unbucketed = mesh_gradients(mesh, m, 0);
  size_t before = dist::detail::entered_buckets_begun();
  // The loss's combine (a mean over the split batch) and the four entered cotangents: one bucket.
  const auto one = mesh_gradients(mesh, m, size_t{1} << 20);
  BOOST_TEST(dist::detail::entered_buckets_begun() - before == (ranks ? 1u : 0u));
  before = dist::detail::entered_buckets_begun();
  const auto each = mesh_gradients(mesh, m, 1);  // each alone passes 1 byte: a bucket each
  BOOST_TEST(dist::detail::entered_buckets_begun() - before == (ranks ? 5u : 0u));
  for (size_t i = 0; i < ref.size(); ++i) {
    BOOST_TEST_CONTEXT("parameter " << i) {
      BOOST_TEST(diff(unbucketed[i], ref[i]) < 1e-5);
      BOOST_TEST(diff(one[i], unbucketed[i]) < 1e-6);
      BOOST_TEST(diff(each[i], unbucketed[i]) < 1e-6);
    }
  }
}

// A sum over ranks that reads a bucketed result still waiting: the loss's combine reads the first
// combine's (a sum over the split batch); v's cotangent reads the sum of the entered tanh's. Each
// registration begins the waiting buckets first (a pass that read a result before its bucket
// began would hang or fail), so the three sums go in three buckets, begun in program order.
BOOST_AUTO_TEST_CASE(a_cotangent_reading_a_waiting_result_begins_it_first) {
  dist::Mesh mesh(local_devices());
  const int64_t b = 2 * mesh.size(), n = 5;
  const Tensor z = Tensor::randn({b, n}, 310), z2 = Tensor::randn({b, n}, 311), v = Tensor::randn({n}, 312);
  const auto want = ravel::gradients((z2 * (z * v).sum(0).tanh()).sum(), {v});
  const MeshTensor mz = mesh.shard(z, 0), mz2 = mesh.shard(z2, 0), mv = mesh.as_replicated(mesh.replicate(v));
  const size_t before = dist::detail::entered_buckets_begun();
  const Tensor vl = mv.local();
  const MeshTensor loss = (mz2 * (mz * mv.with_local(vl)).sum(0).tanh()).sum();
  // The loss's combine reads the first combine's result: that one's bucket began first.
  BOOST_TEST(dist::detail::entered_buckets_begun() - before == (dist::world_size() > 1 ? 1u : 0u));
  const auto got = ravel::gradients(loss.local(), {vl});
  // v's cotangent reads the entered tanh's sum, waiting with the loss's: they began before it.
  BOOST_TEST(dist::detail::entered_buckets_begun() - before == (dist::world_size() > 1 ? 2u : 0u));
  BOOST_TEST(diff(got[0], want[0]) < 1e-5);  // the first reader: v's bucket begins
  BOOST_TEST(dist::detail::entered_buckets_begun() - before == (dist::world_size() > 1 ? 3u : 0u));
}

// Gradients of gradients through bucketed results: a gradient-norm penalty of the MLP's replicated
// parameters (the first derivative's buckets still waiting when the second one registers).
BOOST_AUTO_TEST_CASE(second_order_through_buckets_equals_one_device) {
  dist::Mesh mesh(local_devices());
  const Mlp m = make_mlp(2 * mesh.size(), 320);
  auto penalty = [](const std::vector<Tensor>& g) {
    Tensor s = (g[0] * g[0]).sum();
    for (size_t i = 1; i < g.size(); ++i) s = s + (g[i] * g[i]).sum();
    return s;
  };
  const auto want = ravel::gradients(penalty(ravel::gradients(mlp_loss(m.x, m.y, m.p), m.p)), m.p);
  std::vector<MeshTensor> placed;
  std::vector<Tensor> parts;
  for (const Tensor& t : m.p) placed.push_back(mesh.as_replicated(mesh.replicate(t))), parts.push_back(placed.back().local());
  std::vector<MeshTensor> p;
  for (size_t i = 0; i < parts.size(); ++i) p.push_back(placed[i].with_local(parts[i]));
  const auto g = ravel::gradients(mesh_mlp_loss(mesh.shard(m.x, 0), mesh.shard(m.y, 0), p).local(), parts);
  const auto got = ravel::gradients(penalty(g), parts);  // replicated: no rank step begins the first buckets
  double scale = 1.0;
  for (const Tensor& w : want) scale = std::max(scale, diff(w, Tensor::zeros_like(w)));
  for (size_t i = 0; i < want.size(); ++i)
    BOOST_TEST(diff(got[i], want[i]) < 1e-5 * scale, "d/dp" << i << " differs by " << diff(got[i], want[i]));
}

// A Jit captures the pass, the buckets' begins between its kernels and the members' ends, and
// replays them with new values (new batches; the parameters are the step's state): captured
// once, on one local device per rank and on two (Note [Sharded Jit]: the parameters are then
// replicated bundles, the batch split over both devices).
void check_jit_replays_the_buckets(const std::vector<Device>& devices) {
  dist::Mesh mesh(devices);
  const Mlp first = make_mlp(2 * mesh.size(), 330);
  std::vector<MeshTensor> placed;
  std::vector<Tensor> params;
  for (const Tensor& t : first.p) placed.push_back(mesh.as_replicated(mesh.replicate(t))), params.push_back(placed.back().local());
  ravel::realize(params);
  const MeshTensor xs = mesh.shard(first.x, 0), ys = mesh.shard(first.y, 0);
  ravel::Jit step([&](const std::vector<Tensor>& in) {  // in: x, y
    auto [loss, g] = ravel::value_and_grad(
        [&](const std::vector<Tensor>& q) {
          std::vector<MeshTensor> p;
          for (size_t i = 0; i < q.size(); ++i) p.push_back(placed[i].with_local(q[i]));
          return mesh_mlp_loss(xs.with_local(in[0]), ys.with_local(in[1]), p).local();
        },
        params);
    std::vector<Tensor> out{loss.to(kOne)};
    for (const Tensor& t : g) out.push_back(t.to(kOne));
    return out;
  }, {&params[0], &params[1], &params[2], &params[3]});
  const size_t before = dist::detail::entered_buckets_begun();
  const int calls = 4;
  for (int call = 0; call < calls; ++call) {
    const Mlp m = make_mlp(2 * mesh.size(), 340 + 10 * call);
    const auto [ref_loss, ref] =
        ravel::value_and_grad([&](const std::vector<Tensor>& p) { return mlp_loss(m.x, m.y, p); }, first.p);
    const auto got = step({mesh.shard(m.x, 0).local(), mesh.shard(m.y, 0).local()});
    BOOST_TEST(diff(got[0], ref_loss) < 1e-5);
    for (size_t i = 0; i < ref.size(); ++i) BOOST_TEST(diff(got[i + 1], ref[i]) < 1e-5, "call " << call << ", parameter " << i);
  }
  BOOST_TEST(step.captures() == 1, devices.size() << " local device(s): " << step.captures() << " captures");
  BOOST_TEST(step.replays() == calls - 1);
  BOOST_TEST(dist::detail::entered_buckets_begun() - before == (dist::world_size() > 1 ? size_t(calls) : 0u));
}

BOOST_AUTO_TEST_CASE(a_jit_replays_the_buckets) { check_jit_replays_the_buckets({kOne}); }
BOOST_AUTO_TEST_CASE(a_jit_replays_the_buckets_over_two_local_devices) {
  const auto local = local_devices();
  if (local.size() < 2) return;  // RAVEL_TBB_DEVICES=2 in every CTest run of this suite
  check_jit_replays_the_buckets(local);
}

// Ranks whose buckets differ (a program that diverged: here rank 1 sums a longer tensor) get the
// argument check's typed error at the first reader, on every rank, and the world stays usable.
BOOST_AUTO_TEST_CASE(mismatched_buckets_are_a_typed_error_on_every_rank) {
  if (dist::world_size() == 1) return;  // nothing is bucketed
  const int64_t n = dist::rank() == 1 ? 4 : 3;
  const Tensor sum = dist::detail::bucketed_rank_sum(Tensor::ones({n}).to(kOne) * 1.0);
  BOOST_CHECK_THROW(sum.to_vector<float>(), ravel::Error);
  BOOST_CHECK_THROW(sum.to_vector<float>(), ravel::Error);  // again: never the unwritten bytes
  const Tensor ok = dist::detail::bucketed_rank_sum(Tensor::ones({3}).to(kOne) * 2.0);
  BOOST_TEST(ok.to_vector<float>() == std::vector<float>(3, 2.0f * dist::world_size()), boost::test_tools::per_element());
}

// Note [Realize starts, the reader waits]: realizing a bucketed result begins every waiting
// bucket, in the order they were made, and waits for none; its first reader waits. Here the
// ranks then diverge: rank 0 reads at once while the others work 0.3 s before reading, and
// realizing again, or another result of a bucket already begun, begins nothing more.
BOOST_AUTO_TEST_CASE(realize_begins_the_waiting_buckets_without_waiting) {
  if (dist::world_size() == 1) return;  // nothing is bucketed
  {  // two buckets of 12 bytes
    BucketSetting setting(true, 16);
    const size_t before = dist::detail::entered_buckets_begun();
    const Tensor a = dist::detail::bucketed_rank_sum(Tensor::ones({3}).to(kOne) * double(dist::rank() + 1));
    const Tensor b = dist::detail::bucketed_rank_sum(Tensor::ones({3}).to(kOne) * 2.0);
    BOOST_TEST(dist::detail::entered_buckets_begun() - before == 0u);
    b.realize();  // the second result: both buckets begin, the first first
    BOOST_TEST(dist::detail::entered_buckets_begun() - before == 2u);
    ravel::realize({a, b});
    BOOST_TEST(dist::detail::entered_buckets_begun() - before == 2u);
    if (dist::rank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const float n = static_cast<float>(dist::world_size());
    BOOST_TEST(a.to_vector<float>() == std::vector<float>(3, n * (n + 1) / 2), boost::test_tools::per_element());
    BOOST_TEST(b.to_vector<float>() == std::vector<float>(3, 2 * n), boost::test_tools::per_element());
  }
  // A gradient of the global view, realized on every rank, then read after a rank-local pause.
  const dist::Mesh mesh({kOne});
  const Mlp m = make_mlp(2 * mesh.size(), 360);
  std::vector<MeshTensor> placed;
  std::vector<Tensor> parts;
  for (const Tensor& t : m.p) placed.push_back(mesh.as_replicated(mesh.replicate(t))), parts.push_back(placed.back().local());
  const size_t mid = dist::detail::entered_buckets_begun();
  const auto g = ravel::gradients(mesh_mlp_loss(mesh.shard(m.x, 0), mesh.shard(m.y, 0),
                                                {placed[0].with_local(parts[0]), placed[1].with_local(parts[1]),
                                                 placed[2].with_local(parts[2]), placed[3].with_local(parts[3])})
                                      .local(),
                                  parts);
  BOOST_TEST(dist::detail::entered_buckets_begun() - mid == 0u);
  ravel::realize(g);
  BOOST_TEST(dist::detail::entered_buckets_begun() - mid == 1u);  // the loss's combine and four cotangents: one bucket
  if (dist::rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto want = ravel::gradients(mlp_loss(m.x, m.y, m.p), m.p);
  for (size_t i = 0; i < want.size(); ++i) BOOST_TEST(diff(g[i], want[i]) < 1e-5, "parameter " << i);
}

// Realizing results whose buckets differ across the ranks is the argument check's typed error on
// every rank, there, and again at the read; the world stays usable.
BOOST_AUTO_TEST_CASE(realizing_mismatched_buckets_is_a_typed_error_on_every_rank) {
  if (dist::world_size() == 1) return;  // nothing is bucketed
  const int64_t n = dist::rank() == 1 ? 5 : 3;
  const Tensor sum = dist::detail::bucketed_rank_sum(Tensor::ones({n}).to(kOne) * 1.0);
  BOOST_CHECK_THROW(sum.realize(), ravel::Error);
  BOOST_CHECK_THROW(sum.to_vector<float>(), ravel::Error);
  ravel::Jit twice([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0}; });
  BOOST_CHECK_NO_THROW(twice({Tensor::ones({2}).to(kOne)}));  // the failed result is not ended again there
  const Tensor ok = dist::detail::bucketed_rank_sum(Tensor::ones({2}).to(kOne) * 3.0);
  ok.realize();
  BOOST_TEST(ok.to_vector<float>() == std::vector<float>(2, 3.0f * dist::world_size()), boost::test_tools::per_element());
}

// RAVEL_DIST_ENTER_BUCKET_BYTES: a positive decimal number of bytes; anything else is a
// ConfigError naming the variable and the value (never a silent zero or a wrapped negative).
BOOST_AUTO_TEST_CASE(the_bucket_size_variable_is_checked) {
  BOOST_TEST(dist::detail::bucket_bytes_from_environment("4096") == 4096u);
  for (const char* bad : {"", "0", "-5", "abc", "12kb", "1e6", " 64", "99999999999999999999999"})
    BOOST_CHECK_EXCEPTION(dist::detail::bucket_bytes_from_environment(bad), ravel::ConfigError,
                          [&](const ravel::ConfigError& e) {
                            const std::string m = e.what();
                            return m.find(std::string("RAVEL_DIST_ENTER_BUCKET_BYTES=") + bad) != std::string::npos &&
                                   m.find("is not a positive number of bytes") != std::string::npos;
                          });
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace entered_buckets_test
