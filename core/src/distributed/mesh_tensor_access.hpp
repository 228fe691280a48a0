// What the global-view MeshTensor files share (mesh_tensor.cpp: layout, movement across ranks;
// mesh_ops.cpp: how ops propagate).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ravel/mesh_tensor.hpp"

namespace ravel::distributed {

struct MeshTensorAccess {
  // A MeshTensor on m's mesh with this local part, split axis (with the ranks' bounds along it)
  // and global shape.
  static MeshTensor make(const MeshTensor& m, Tensor local, std::optional<int64_t> axis, std::vector<int64_t> bounds,
                         Shape shape) {
    return make(m.devices_, m.ranks_, m.rank_, std::move(local), axis, std::move(bounds), std::move(shape));
  }
  static MeshTensor replicated(const MeshTensor& m, Tensor local, Shape shape) {
    return make(m, std::move(local), std::nullopt, {}, std::move(shape));
  }
  static MeshTensor make(const std::vector<Device>& devices, int ranks, int rank, Tensor local,
                         std::optional<int64_t> axis, std::vector<int64_t> bounds, Shape shape) {
    MeshTensor out;
    out.devices_ = devices;
    out.ranks_ = ranks;
    out.rank_ = rank;
    out.local_ = std::move(local);
    out.axis_ = axis;
    out.bounds_ = axis ? std::move(bounds) : std::vector<int64_t>{};
    out.shape_ = std::move(shape);
    return out;
  }
  static const std::vector<Device>& devices(const MeshTensor& m) { return m.devices_; }
  static int ranks(const MeshTensor& m) { return m.ranks_; }
  static int rank(const MeshTensor& m) { return m.rank_; }
};

namespace mesh_detail {

// A tensor on one device replicated on the local devices (moved there for a mesh of one device).
Tensor replicated_locally(const Tensor& t, const std::vector<Device>& devices);
// This rank's part on the first local device (the local gather, or fold of local partials).
Tensor local_on_one(const MeshTensor& m);
// numpy.array_split's offsets of n rows over the ranks (the first n % ranks one longer).
std::vector<int64_t> even_rank_bounds(int64_t n, int ranks);
// Rank `rank`'s block [bounds[rank], bounds[rank + 1]) of `axis` of a value on every rank.
Tensor rank_block(const Tensor& whole, int64_t axis, const std::vector<int64_t>& bounds, int rank);
// The replicated value (on one device) cut to this rank's block of `axis` for use by this rank's
// part: rank_enter, then the slice (Note [Global-view derivatives]).
Tensor entered_block(const MeshTensor& replicated, int64_t axis, const std::vector<int64_t>& bounds);
// ValueError naming both shardings unless a and b lie on the same mesh.
void check_same_mesh(const MeshTensor& a, const MeshTensor& b, const char* what);
std::string shape_str(const Shape& s);

}  // namespace mesh_detail
}  // namespace ravel::distributed
