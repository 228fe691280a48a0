// ravel::distributed::MeshTensor: one logical tensor over a whole distributed::Mesh (ranks x
// local devices), split along one axis across the ranks or replicated on all of them: JAX's
// global view of a multi-process mesh (docs/distributed.md, "Global view: tensors split across
// ranks"; decision 69).
//
//   distributed::Mesh mesh(local_devices);
//   MeshTensor x = mesh.shard(global_x, 0);           // rank r keeps its rows, over its devices
//   MeshTensor w = mesh.shard(global_w, 0);           // a K-split weight (Megatron row-parallel)
//   MeshTensor y = x.gathered().matmul(w);            // partial sums combined across the ranks
//   MeshTensor total = x.sum();                       // local partial combine, then the rank all-reduce
//   Tensor whole = x.to(Device{"tbb_cpu", 0});        // local gather, then the rank all-gather
//
// On each rank a MeshTensor holds local(): this rank's block (split axis) or the whole value
// (replicated), itself an ordinary tensor on the rank's local devices (split over them or
// replicated), so every op runs through the local rules of docs/sharding.md. Where an op needs
// other ranks' data the rank collective is inserted where the op is built (a host operation: it
// realizes its input when called, and a Jit captures and replays it): a reduction over the
// split axis combines across ranks, operands split differently are resharded (a rank
// all-gather), a replicated operand is cut to this rank's block.
// Derivatives are those of the ONE global loss (Note [Global-view derivatives] in
// core/src/distributed/mesh_rank_steps.cpp), not decision 60's sum of the ranks' losses.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ravel/distributed.hpp"
#include "ravel/sharding.hpp"
#include "ravel/tensor.hpp"

namespace ravel::distributed {

// How a MeshTensor lies on its mesh. The same on every rank except `rank` and `local`.
struct MeshSharding {
  std::vector<MeshDevice> devices;  // the mesh, rank-major
  int ranks = 1;
  int rank = 0;                 // this rank: whose `local` this is
  Shape shape;                  // the global shape
  std::optional<int64_t> axis;  // the axis split across the ranks; empty: replicated on every rank
  // When split: ranks + 1 offsets along `axis`; rank r holds [rank_bounds[r], rank_bounds[r + 1]).
  // Mesh::shard splits as numpy.array_split (the first ranks one longer); from_local_parts
  // takes each rank's size.
  std::vector<int64_t> rank_bounds;
  // How this rank's part lies on its local devices (empty: on one device).
  std::optional<Sharding> local;
  bool replicated() const { return !axis.has_value(); }
  // "split axis 0 of [8, 3] across 2 ranks [0, 4) [4, 8); on rank 1: split axis 0 over
  // tbb_cpu:0 [0, 2), tbb_cpu:1 [2, 4)"
  std::string str() const;
};

class MeshTensor {
 public:
  MeshTensor() = default;
  bool defined() const { return local_.defined(); }
  const Shape& shape() const { return shape_; }  // global
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  DType dtype() const { return local_.dtype(); }
  // This rank's part: its block of the split axis, or the whole value when replicated.
  const Tensor& local() const { return local_; }
  std::optional<int64_t> axis() const { return axis_; }
  // When split: ranks + 1 offsets along the axis; rank r holds [b[r], b[r + 1]).
  const std::vector<int64_t>& rank_bounds() const { return bounds_; }
  bool replicated() const { return !axis_.has_value(); }
  MeshSharding sharding() const;
  // The same layout with another local part of the same shape (a parameter inside
  // value_and_grad: the traced local tensor wrapped again). No communication.
  MeshTensor with_local(const Tensor& local) const;

  // ---- elementwise: the result is split like a split operand; a replicated operand is cut to
  // this rank's block; operands split along different axes: the second is gathered (resharded).
  friend MeshTensor operator+(const MeshTensor& a, const MeshTensor& b);
  friend MeshTensor operator-(const MeshTensor& a, const MeshTensor& b);
  friend MeshTensor operator*(const MeshTensor& a, const MeshTensor& b);
  friend MeshTensor operator/(const MeshTensor& a, const MeshTensor& b);
  friend MeshTensor operator*(const MeshTensor& a, double s);
  friend MeshTensor operator+(const MeshTensor& a, double s);
  MeshTensor tanh() const;
  MeshTensor exp() const;
  MeshTensor relu() const;
  MeshTensor operator-() const;
  // Any elementwise function of one tensor (element i of the result depends on element i only;
  // not checked: a non-elementwise fn gives each rank's block its own answer).
  MeshTensor map_elementwise(const std::function<Tensor(const Tensor&)>& fn) const;

  // ---- movement: permute follows the split axis; reshape keeps it where the rank boundaries
  // survive (splitting or merging axes after it, the old and new split axes multiples of the
  // ranks), else gathers first (the result is then replicated).
  MeshTensor permute(std::vector<int64_t> order) const;
  MeshTensor reshape(Shape shape) const;

  // ---- reductions over one axis or all (axis empty). Over the split axis: each rank reduces
  // its block (the local rules combine its devices' partials), then the rank all-reduce: the
  // result is replicated on the whole mesh. Otherwise local, and the split stays.
  MeshTensor sum(std::optional<int64_t> axis = {}, bool keepdim = false) const;
  MeshTensor max(std::optional<int64_t> axis = {}, bool keepdim = false) const;
  MeshTensor min(std::optional<int64_t> axis = {}, bool keepdim = false) const;
  MeshTensor mean(std::optional<int64_t> axis = {}, bool keepdim = false) const;

  // [..., M, K] x [K, N] (b 2-D). a split on K (its last axis) with b split on K (axis 0):
  // Megatron's row-parallel layer, partial sums combined by the rank all-reduce (replicated
  // result). a split on a batch or M axis with b replicated: local, split like a. a replicated
  // with b split on N: local, split on the last axis (column-parallel). One side split on K and
  // the other replicated: the replicated one is cut to this rank's K block. Any other pair: b
  // (else a) is gathered first.
  MeshTensor matmul(const MeshTensor& b) const;

  // The whole value replicated on every device of every rank (rank all-gather where split).
  MeshTensor gathered() const;
  // The same value split along `axis` across the ranks (replicated where empty): JAX's
  // with_sharding_constraint. From replicated: each rank cuts its block (entered: no
  // communication forward, an all-reduce of the cotangent backward); split along another axis:
  // gathered first. The blocks are numpy.array_split's, as Mesh::shard makes them.
  MeshTensor resharded(std::optional<int64_t> axis) const;
  // The whole value on `device` on every rank: this rank's block gathered onto its first local
  // device, then one rank all-gather of the blocks (then moved to `device`).
  Tensor to(const Device& device) const;

 private:
  friend class Mesh;
  friend struct MeshTensorAccess;
  std::vector<Device> devices_;  // the mesh's local devices
  int ranks_ = 1, rank_ = 0;
  Tensor local_;
  std::optional<int64_t> axis_;
  std::vector<int64_t> bounds_;  // ranks + 1 offsets along axis_ when split
  Shape shape_;
};

}  // namespace ravel::distributed
