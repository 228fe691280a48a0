// Global-view MeshTensors (ravel/mesh_tensor.hpp, decision 69): tensors split across the ranks
// of a distributed::Mesh, each rank's block over its local tbb_cpu devices. Every result is
// compared with the same computation on the whole tensor in one process on one device (every
// rank has all the data, so each computes the reference itself). Runs as a world of one, and
// under mpirun -np 2 and -np 4 with RAVEL_TBB_DEVICES=2 (tests/distributed/CMakeLists.txt).
#include <cmath>

#include "ravel/autodiff.hpp"
#include "ravel/distributed.hpp"
#include "ravel/jit.hpp"
#include "ravel/mesh_tensor.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

namespace mesh_tensor_test {  // named: the suite is a unity build

namespace dist = ravel::distributed;
using dist::MeshTensor;
using ravel::Device;
using ravel::Shape;
using ravel::Tensor;

const Device kOne{"tbb_cpu", 0};

std::vector<Device> local_devices() {
  std::vector<Device> out;
  for (const auto& d : ravel::Runtime::get().devices())
    if (d.device.backend() == "tbb_cpu" && out.size() < 2) out.push_back(d.device);
  return out;
}

// The largest difference between two tensors of the same shape (infinity when shapes differ).
double diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  const auto va = a.to(kOne).to_vector<double>(), vb = b.to(kOne).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vb[i]));
  return worst;
}

// This rank's block of `whole` along `axis` (the reference for a split part).
Tensor block(const Tensor& whole, int64_t axis) {
  const int64_t rows = whole.shape()[static_cast<size_t>(axis)] / dist::world_size();
  return whole.slice(axis, dist::rank() * rows, (dist::rank() + 1) * rows);
}

// `got` equals `want` (whole, one device) and lies as expected: split along `axis` or replicated.
void check(const MeshTensor& got, const Tensor& want, std::optional<int64_t> axis, const char* what) {
  BOOST_TEST_CONTEXT(what << ": " << got.sharding().str()) {
    BOOST_TEST(got.shape() == want.shape());
    BOOST_TEST(got.axis().value_or(-1) == axis.value_or(-1));
    BOOST_TEST(diff(got.to(kOne), want) < 1e-5);
    BOOST_TEST(diff(got.local(), axis ? block(want, *axis) : want) < 1e-5);  // the part itself, no rank step
  }
}

}  // namespace mesh_tensor_test

using namespace mesh_tensor_test;

BOOST_AUTO_TEST_SUITE(distributed_mesh_tensor)

BOOST_AUTO_TEST_CASE(shard_and_from_local_parts_say_how_they_lie) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t n = 2 * mesh.size();
  const Tensor whole = Tensor::randn({3, n}, 7);
  BOOST_TEST_MESSAGE("mesh " << mesh.str());
  const MeshTensor x = mesh.shard(whole, 1);
  const dist::MeshSharding s = x.sharding();
  BOOST_TEST(s.ranks == mesh.ranks());
  BOOST_TEST(s.devices.size() == static_cast<size_t>(mesh.size()));
  BOOST_TEST(s.axis.value_or(-1) == 1);
  BOOST_TEST(s.rank_bounds.size() == static_cast<size_t>(mesh.ranks() + 1));
  BOOST_TEST(s.rank_bounds.back() == n);
  BOOST_TEST(s.local.has_value() == (local.size() > 1));
  BOOST_TEST(s.str().find("across " + std::to_string(mesh.ranks()) + " ranks") != std::string::npos, s.str());
  check(x, whole, 1, "shard");
  const MeshTensor y = mesh.from_local_parts(block(whole, 1), 1);
  check(y, whole, 1, "from_local_parts");
  BOOST_TEST(mesh.as_replicated(whole).sharding().replicated());
}

BOOST_AUTO_TEST_CASE(ops_propagate_as_on_one_device) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t n = 2 * mesh.size();
  const Tensor a = Tensor::randn({n, 3}, 1), b = Tensor::randn({n, 3}, 2), c = Tensor::randn({3}, 3);
  const MeshTensor xa = mesh.shard(a, 0), xb = mesh.shard(b, 0), xc = mesh.as_replicated(c);
  const MeshTensor rb = mesh.as_replicated(b), tb = mesh.shard(b.transpose(0, 1).contiguous(), 1);
  check(xa + xb, a + b, 0, "split + split");
  check(xa * rb, a * b, 0, "split * replicated (cut to the block)");
  check(rb - xa, b - a, 0, "replicated - split");
  check(xa / (xc + 3.0).exp(), a / (c + 3.0).exp(), 0, "split / broadcast replicated");
  check(xa + tb.permute({1, 0}), a + b, 0, "split + permuted split");
  check(xa.tanh() * 2.0, a.tanh() * 2.0, 0, "tanh, scale");
  check((-xa).relu(), (-a).relu(), 0, "neg, relu");
  check(xa.permute({1, 0}), a.permute({1, 0}), 1, "permute");
  check(xa.reshape({n * 3}), a.reshape({n * 3}), 0, "reshape merging after the split");
  check(xa.reshape({n, 3, 1}), a.reshape({n, 3, 1}), 0, "reshape adding an axis");
  const auto moved = mesh.ranks() == 1 ? std::optional<int64_t>(0) : std::nullopt;  // one rank: no boundary
  check(xa.reshape({3, n}), a.reshape({3, n}), moved, "reshape moving the boundary: gathered");
  check(xa.sum(1), a.sum(1), 0, "sum over a kept axis");
  check(xa.sum(0), a.sum(0), std::nullopt, "sum over the split axis");
  check(xa.sum(), a.sum(), std::nullopt, "global sum");
  check(xa.mean(0, true), a.mean(0, true), std::nullopt, "mean, keepdim");
  check(xa.max(), a.max(), std::nullopt, "global max");
  check(xa.min(0), a.min(0), std::nullopt, "min over the split axis");
  check(xa.permute({1, 0}).max(1), a.max(0), std::nullopt, "max over the permuted split axis");
  check(xa.gathered(), a, std::nullopt, "gathered");
  BOOST_TEST(diff(xa.to(kOne), a) == 0.0);  // a gather moves values exactly
}

BOOST_AUTO_TEST_CASE(matmuls_over_split_operands) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t k = 2 * mesh.size(), m = 2 * mesh.size();
  const Tensor x = Tensor::randn({m, k}, 4), w = Tensor::randn({k, 5}, 5), v = Tensor::randn({k, k}, 6);
  // Megatron's row-parallel layer: both split on K, partial sums combined across the ranks.
  check(mesh.shard(x, 1).matmul(mesh.shard(w, 0)), x.matmul(w), std::nullopt, "row-parallel");
  check(mesh.shard(x, 1).matmul(mesh.as_replicated(w)), x.matmul(w), std::nullopt, "K-split x replicated");
  check(mesh.as_replicated(x).matmul(mesh.shard(w, 0)), x.matmul(w), std::nullopt, "replicated x K-split");
  check(mesh.shard(x, 0).matmul(mesh.as_replicated(w)), x.matmul(w), 0, "batch-split");
  check(mesh.as_replicated(x).matmul(mesh.shard(v, 1)), x.matmul(v), 1, "column-parallel");
  // Split differently: resharded, never a silent wrong answer.
  check(mesh.shard(x, 0).matmul(mesh.shard(w, 0)), x.matmul(w), 0, "batch-split x K-split");
  check(mesh.shard(x, 0).matmul(mesh.shard(v, 1)), x.matmul(v), 0, "batch-split x N-split");
  check(mesh.shard(x, 1).matmul(mesh.shard(v, 1)), x.matmul(v), std::nullopt, "K-split x N-split");
}

BOOST_AUTO_TEST_SUITE_END()
