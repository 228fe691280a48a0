// One mesh over ranks x local devices (distributed::Mesh; ravel/distributed.hpp).
//
// Note [Multi-controller mesh]
// JAX's multi-controller model: every process runs the same program and addresses only its own
// devices; a global array is, on each process, the shards that live there. Ravel already has both
// halves: a sharded tensor over the local devices (a Multi bundle, docs/sharding.md: ops run part
// by part, reductions over the split axis and replica gradients are combined across the local
// devices inside the lazy graph) and collectives over ranks (host operations). A Mesh joins them
// without a new node kind: on each rank a mesh tensor *is* the local sharded tensor, and the one
// step that crosses ranks is explicit and hierarchical, as NCCL/Horovod's hierarchical
// all-reduce is: (1) the local devices' gradients are summed inside the graph (the replica
// gradient buckets of docs/sharding.md, one all-reduce per mesh and dtype), (2) one replica per
// tensor crosses ranks in DataParallel's buckets, (3) the sum is replicated back onto the local
// devices. So only 1/L of the per-device gradient bytes leave the rank, and the local reduction
// is the same code that runs without ranks. Ops whose operands are split *across ranks*, with
// the collectives placed by the core, are the global view's (ravel/mesh_tensor.hpp: Mesh::shard,
// Note [Global view over ranks] in mesh_tensor.cpp); here a reduction over a batch split over
// ranks is the user's explicit all_reduce (batch_share() scaling makes the sum the global mean).
#include <algorithm>
#include <utility>

#include "ravel/distributed.hpp"
#include "ravel/error.hpp"

namespace ravel::distributed {

namespace {

// `t` on `devices`: replicas, or the tensor itself moved there for a mesh of one device.
Tensor on_local_devices(const Tensor& t, const std::vector<Device>& devices) {
  return devices.size() == 1 ? t.to(devices[0]) : t.replicate(devices);
}

std::string device_list(const std::vector<Device>& devices) {
  std::string s = "[";
  for (size_t i = 0; i < devices.size(); ++i) s += (i ? ", " : "") + devices[i].str();
  return s + "]";
}

}  // namespace

Mesh::Mesh(std::vector<Device> local_devices, DataParallelConfig config)
    : local_(std::move(local_devices)), buckets_({}, config) {
  RAVEL_CHECK(!local_.empty(), DeviceError, "distributed::Mesh: no local devices (each rank names at least one)");
  for (size_t i = 0; i < local_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      RAVEL_CHECK(!(local_[i] == local_[j]), DeviceError, "distributed::Mesh: local device ", local_[i].str(),
                  " is named twice in ", device_list(local_));
  rank_ = distributed::rank();
  ranks_ = world_size();
  if (ranks_ == 1) return;
  // Every rank's device count, seen by every rank: the same verdict (and error) everywhere.
  const Tensor mine = Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(local_.size())}, {1});
  const std::vector<int64_t> counts = distributed::all_gather(mine).to_vector<int64_t>();
  for (int r = 1; r < ranks_; ++r)
    RAVEL_CHECK(counts[r] == counts[0], ShapeError, "distributed::Mesh: the ranks name different numbers of local ",
                "devices: rank 0 has ", counts[0], ", rank ", r, " has ", counts[r], " (seen on rank ", rank_,
                "); every rank of a mesh needs the same count");
}

std::vector<MeshDevice> Mesh::devices() const {
  std::vector<MeshDevice> out;
  for (int r = 0; r < ranks_; ++r)
    for (const Device& d : local_) out.push_back(MeshDevice{r, d});
  return out;
}

std::string Mesh::str() const { return std::to_string(ranks_) + " ranks x " + device_list(local_); }

Tensor Mesh::shard_batch(const Tensor& global, int64_t axis) const {
  RAVEL_CHECK(global.defined(), ValueError, "distributed::Mesh::shard_batch: the tensor is undefined");
  const int64_t ndim = static_cast<int64_t>(global.shape().size());
  RAVEL_CHECK(axis >= -ndim && axis < ndim, IndexError, "distributed::Mesh::shard_batch: axis ", axis,
              " is out of range for a tensor of rank ", ndim);
  if (axis < 0) axis += ndim;
  const int64_t n = global.shape()[static_cast<size_t>(axis)];
  RAVEL_CHECK(n % size() == 0, ShapeError, "distributed::Mesh::shard_batch: axis ", axis, " has ", n,
              " rows, which the mesh's ", size(), " devices (", str(), ") do not divide; every device takes the same ",
              "number of rows");
  const int64_t rows = n / ranks_;
  Tensor mine = ranks_ == 1 ? global : global.slice(axis, rank_ * rows, (rank_ + 1) * rows);
  return local_.size() == 1 ? mine.to(local_[0]) : mine.shard(local_, axis);
}

Tensor Mesh::replicate(const Tensor& t) const {
  RAVEL_CHECK(t.defined(), ValueError, "distributed::Mesh::replicate: the tensor is undefined");
  RAVEL_CHECK(!t.sharding(), ValueError, "distributed::Mesh::replicate: the tensor is already on a mesh (",
              t.sharding()->str(), "); pass the tensor on one device");
  return on_local_devices(ranks_ == 1 ? t : distributed::broadcast(t, 0), local_);
}

std::vector<Tensor> Mesh::all_reduce(const std::vector<Tensor>& local_sums, double scale) const {
  std::vector<Tensor> first(local_sums.size());
  for (size_t i = 0; i < local_sums.size(); ++i) {
    const Tensor& g = local_sums[i];
    RAVEL_CHECK(g.defined(), ValueError, "distributed::Mesh::all_reduce: tensor ", i, " is undefined");
    const auto sharding = g.sharding();
    RAVEL_CHECK(!sharding || sharding->replicated(), ValueError, "distributed::Mesh::all_reduce: tensor ", i,
                " is ", sharding ? sharding->str() : "", "; a gradient summed over the local devices is replicated");
    first[i] = sharding ? g.shards()[0] : g;  // the replicas are one value: one crosses the ranks
  }
  std::vector<Tensor> summed = buckets_.reduce_gradients(first, scale);
  for (Tensor& s : summed) s = on_local_devices(s, local_);
  return summed;
}

}  // namespace ravel::distributed
