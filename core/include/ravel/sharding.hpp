// Tensors over several devices: how one is split (ravel::Sharding) and the collectives between
// its parts (docs/sharding.md).
//
// A sharded tensor is one logical tensor whose parts live on a mesh of devices, split along one
// axis (Tensor::shard) or held whole on each (Tensor::replicate). Code written for one device runs
// on it unchanged: every op is applied part by part, and where an op needs data of other parts
// (a reduction over the split axis, operands split differently) the core inserts the copies and
// the collective itself. The collectives below are also offered to users, with the semantics of
// the tinygrad specification Ravel grew from: each device's part is that device's value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ravel/device.hpp"

namespace ravel {

class Tensor;

// How the parts are combined by all_reduce, reduce_scatter and reduce.
enum class CollectiveOp : uint8_t { Sum, Max, Min, Prod };

// How a tensor is laid out over devices. A tensor on one device has no Sharding
// (Tensor::sharding() is empty).
struct Sharding {
  std::vector<Device> devices;  // the mesh, in part order
  // The split axis; empty when every device holds the whole tensor (replicated).
  std::optional<int64_t> axis;
  // When split: devices.size() + 1 offsets along `axis`; part i holds [bounds[i], bounds[i+1]).
  // Sizes that do not divide evenly are split as numpy.array_split does (the first parts one
  // longer); a part may be empty.
  std::vector<int64_t> bounds;
  // Set when the parts are partial results (DTensor's Partial): each device holds a whole-shaped
  // part and the tensor's value is the parts combined by this op (a sum over the split axis, or
  // the row-parallel matmul's partial sums). `axis` is then empty. The combine is deferred to the
  // consumer: an all-reduce where it needs the value, a reduce-scatter where it wants a split, a
  // reduce where it wants one device; linear ops stay partial (docs/sharding.md, "Partial results").
  std::optional<CollectiveOp> partial;
  bool replicated() const { return !axis.has_value() && !partial.has_value(); }
  // "split axis 0 over tbb_cpu:0 [0, 3), tbb_cpu:1 [3, 5)", "replicated over tbb_cpu:0, tbb_cpu:1"
  // or "partial sum over tbb_cpu:0, tbb_cpu:1".
  std::string str() const;
  bool operator==(const Sharding&) const = default;
};

// ---- collectives (each device's part is that device's value) -------------------------------
// All of them are compositions of copies between devices and ordinary ops (graph nodes, so
// autodiff, Jit and fusion see them like any other op), except that all_reduce, reduce_scatter
// and all_gather over devices of one plugin that runs them itself (ABI 1.9 / 1.12: tbb_cpu) are
// that plugin's collective from 16 Ki elements per part (RAVEL_PLUGIN_COLLECTIVES; docs/sharding.md),
// with the same values and derivatives. A tensor on one device is a mesh of one.

// The parts of a tensor split along axis a (equal sizes, else ShapeError) combined elementwise
// by `op`; the result has the shape of one part and is replicated on every device of the mesh.
// A replicated tensor's parts are its replicas; a partial tensor's are its partial results (so
// all_reduce by its own op is its value, and reduce_scatter its split). Large tensors on more
// than two devices are reduced in chunks, each device reducing one (reduce-scatter, then
// all-gather; docs/sharding.md).
Tensor all_reduce(const Tensor& t, CollectiveOp op = CollectiveOp::Sum);
// The whole tensor on every device of its mesh (replicated).
Tensor all_gather(const Tensor& t);
// all_reduce, but the result stays split along the same axis: each device keeps its slice.
Tensor reduce_scatter(const Tensor& t, CollectiveOp op = CollectiveOp::Sum);
// The parts combined by `op` onto one device (a tensor on `device`, not sharded).
Tensor reduce(const Tensor& t, const Device& device, CollectiveOp op = CollectiveOp::Sum);
// ---- placement as data: the config's mesh (ravel::Runtime::mesh, docs/sharding.md) ----------
// `batch` split along the config's parallel.batch_axis over its mesh: data parallelism without
// code changes. Itself when the config names no mesh (or a mesh of one device, where it is moved
// there). ConfigError naming $.parallel.mesh when the mesh does not divide the batch axis (data
// parallelism gives every device the same number of examples; Tensor::shard splits any size).
Tensor shard_batch(const Tensor& batch);
// `t` on every device of the config's mesh (parameters of data-parallel training); itself when
// the config names no mesh.
Tensor replicate_on_mesh(const Tensor& t);

// A tensor on one device copied whole to every device of `devices` (= t.replicate(devices)).
Tensor broadcast(const Tensor& t, const std::vector<Device>& devices);
// A tensor split along `axis` over `devices` (= t.shard(devices, axis)).
Tensor scatter(const Tensor& t, const std::vector<Device>& devices, int64_t axis = 0);
// The whole tensor on `device` (= t.to(device)).
Tensor gather(const Tensor& t, const Device& device);

}  // namespace ravel
