// distributed::Mesh: one mesh over ranks x local devices. Data-parallel training on it (each
// rank's share of the batch split over its local tbb_cpu devices, gradients summed locally then
// across ranks) equals the single-process, single-device run on the whole batch. Under
// `mpirun -np 2` with RAVEL_TBB_DEVICES=2 (tests/distributed/CMakeLists.txt) that is 2 ranks x 2
// devices; as a world of one it is 1 x (the local devices there are, at most 2). Every rank
// computes the reference itself (it has all the data), so the comparison needs no stored values.
#include <cmath>

#include "ravel/autodiff.hpp"
#include "ravel/distributed.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

namespace dist = ravel::distributed;
namespace nn = ravel::nn;
using ravel::Device;
using ravel::Tensor;

namespace mesh_test {  // named: the suite is a unity build with test_data_parallel.cpp

constexpr int64_t kMeshBatch = 8, kMeshIn = 4, kMeshHidden = 8, kMeshOut = 3;
constexpr double kMeshLr = 0.2;
constexpr int kMeshSteps = 4;

Tensor mesh_x(int step) { return Tensor::randn({kMeshBatch, kMeshIn}, 300 + step); }
Tensor mesh_y(int step) {
  std::vector<int64_t> y(kMeshBatch);
  for (int64_t i = 0; i < kMeshBatch; ++i) y[i] = (i * 7 + step) % kMeshOut;
  return Tensor::from_vector(y, {kMeshBatch});
}

// A two-layer classifier as a function of its parameters {w1, b1, w2, b2}.
Tensor mesh_logits(const std::vector<Tensor>& p, const Tensor& x) {
  return (x.matmul(p[0]) + p[1]).tanh().matmul(p[2]) + p[3];
}

std::vector<Tensor> initial_parameters() {
  return {Tensor::randn({kMeshIn, kMeshHidden}, 11) * 0.5, Tensor::randn({kMeshHidden}, 12) * 0.1,
          Tensor::randn({kMeshHidden, kMeshOut}, 13) * 0.5, Tensor::randn({kMeshOut}, 14) * 0.1};
}

// Up to two tbb_cpu devices of this process.
std::vector<Device> local_tbb_devices() {
  std::vector<Device> out;
  for (const auto& d : ravel::Runtime::get().devices())
    if (d.device.backend() == "tbb_cpu" && out.size() < 2) out.push_back(d.device);
  return out;
}

double worst_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto va = a[i].to(Device{"tbb_cpu", 0}).to_vector<double>();
    const auto vb = b[i].to(Device{"tbb_cpu", 0}).to_vector<double>();
    for (size_t k = 0; k < va.size(); ++k) worst = std::max(worst, std::abs(va[k] - vb[k]));
  }
  return worst;
}

}  // namespace mesh_test

using namespace mesh_test;

BOOST_AUTO_TEST_SUITE(distributed_mesh)

BOOST_AUTO_TEST_CASE(mesh_lists_rank_major_devices) {
  const std::vector<Device> local = local_tbb_devices();
  dist::Mesh mesh(local);
  BOOST_TEST(mesh.ranks() == dist::world_size());
  BOOST_TEST(mesh.size() == dist::world_size() * static_cast<int64_t>(local.size()));
  const auto all = mesh.devices();
  BOOST_REQUIRE(static_cast<int64_t>(all.size()) == mesh.size());
  for (size_t i = 0; i < all.size(); ++i) {
    BOOST_TEST(all[i].rank == static_cast<int>(i / local.size()));
    BOOST_TEST(all[i].device.str() == local[i % local.size()].str());
  }
}

BOOST_AUTO_TEST_CASE(shard_batch_gives_each_rank_its_rows_over_its_devices) {
  const std::vector<Device> local = local_tbb_devices();
  dist::Mesh mesh(local);
  const int64_t n = 4 * mesh.size();
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  Tensor part = mesh.shard_batch(Tensor::from_vector(v, {n}));
  const int64_t rows = n / mesh.ranks(), lo = rows * mesh.rank();
  if (local.size() > 1) {
    BOOST_REQUIRE(part.sharding().has_value());
    BOOST_TEST(part.sharding()->devices.size() == local.size());
  }
  const auto got = part.to(local[0]).to_vector<float>();
  BOOST_REQUIRE(static_cast<int64_t>(got.size()) == rows);
  for (int64_t i = 0; i < rows; ++i) BOOST_TEST(got[i] == static_cast<float>(lo + i));
  // A batch the mesh does not divide: the same ShapeError on every rank, before any communication.
  BOOST_CHECK_THROW(mesh.shard_batch(Tensor::zeros({mesh.size() + 1})), ravel::ShapeError);
}

BOOST_AUTO_TEST_CASE(replicate_gives_rank_zeros_values_everywhere) {
  const std::vector<Device> local = local_tbb_devices();
  dist::Mesh mesh(local);
  Tensor mine = Tensor::full({3}, 10.0 + dist::rank());
  Tensor r = mesh.replicate(mine);
  for (const Tensor& part : r.shards())
    for (float x : part.to(local[0]).to_vector<float>()) BOOST_TEST(x == 10.0f);
}

BOOST_AUTO_TEST_CASE(data_parallel_training_over_ranks_and_devices_equals_one_device) {
  const std::vector<Device> local = local_tbb_devices();
  dist::Mesh mesh(local);
  BOOST_TEST_MESSAGE("mesh " << mesh.str());

  // The reference: one process, one device, the whole batch, plain SGD.
  std::vector<Tensor> ref = initial_parameters();
  std::vector<double> ref_losses;
  std::vector<std::vector<Tensor>> ref_after;  // the parameters after each step
  for (int step = 0; step < kMeshSteps; ++step) {
    auto [loss, g] = ravel::value_and_grad(
        [&](const std::vector<Tensor>& p) { return nn::cross_entropy(mesh_logits(p, mesh_x(step)), mesh_y(step)); },
        ref);
    ref_losses.push_back(loss.item<double>());
    ravel::NoGradGuard no_grad;
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = (ref[i] - g[i] * kMeshLr).contiguous();
    ravel::realize(ref);
    ref_after.push_back(ref);
  }

  // The mesh: parameters replicated on every device of every rank, this rank's rows split over
  // its devices, the loss scaled by the rank's share, gradients summed locally (autodiff) and then
  // across ranks (Mesh::all_reduce); the loss summed across ranks to print the global mean.
  std::vector<Tensor> p;
  for (const Tensor& t : initial_parameters()) p.push_back(mesh.replicate(t));
  for (int step = 0; step < kMeshSteps; ++step) {
    const Tensor x = mesh.shard_batch(mesh_x(step)), y = mesh.shard_batch(mesh_y(step));
    auto [loss, g] = ravel::value_and_grad(
        [&](const std::vector<Tensor>& q) { return nn::cross_entropy(mesh_logits(q, x), y) * mesh.batch_share(); },
        p);
    for (const Tensor& gi : g) BOOST_TEST(gi.sharding().has_value() == (local.size() > 1));  // replicated locally
    const std::vector<Tensor> total = mesh.all_reduce(g);
    const double global_loss = dist::all_reduce(loss.to(local[0])).item<double>();
    BOOST_TEST(std::abs(global_loss - ref_losses[step]) < 1e-5, "step " << step << ": loss " << global_loss
                                                                  << " against " << ref_losses[step]);
    ravel::NoGradGuard no_grad;
    for (size_t i = 0; i < p.size(); ++i) p[i] = (p[i] - total[i] * kMeshLr).contiguous();
    ravel::realize(p);
    const double diff = worst_difference(p, ref_after[static_cast<size_t>(step)]);
    BOOST_TEST(diff < 1e-5, "step " << step << ": parameters differ by " << diff);
  }
  // Every rank holds the same parameters: its replicas agree with rank 0's.
  for (const Tensor& t : p) {
    const Tensor part = t.shards().back().to(local[0]);
    const Tensor from_zero = dist::broadcast(part, 0);
    BOOST_TEST(worst_difference({part}, {from_zero}) == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(mesh_errors) {
  const std::vector<Device> local = local_tbb_devices();
  BOOST_CHECK_THROW(dist::Mesh(std::vector<Device>{}), ravel::DeviceError);
  BOOST_CHECK_THROW(dist::Mesh(std::vector<Device>{local[0], local[0]}), ravel::DeviceError);
  dist::Mesh mesh(local);
  Tensor split = Tensor::zeros({2 * static_cast<int64_t>(local.size())}).shard(local, 0);
  if (local.size() > 1) BOOST_CHECK_THROW(mesh.all_reduce({split}), ravel::ValueError);
  // Ranks naming different numbers of local devices: the same ShapeError on every rank, and the
  // world usable after.
  if (dist::world_size() > 1 && local.size() > 1) {
    const std::vector<Device> mine = dist::rank() == 1 ? std::vector<Device>{local[0]} : local;
    BOOST_CHECK_THROW(dist::Mesh{mine}, ravel::ShapeError);
    BOOST_TEST(dist::all_reduce(Tensor::full({1}, 1.0)).item<float>() == static_cast<float>(dist::world_size()));
  }
}

BOOST_AUTO_TEST_SUITE_END()
