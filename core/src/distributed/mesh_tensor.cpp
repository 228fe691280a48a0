// Global-view tensors on a distributed::Mesh (ravel/mesh_tensor.hpp): how one is made and laid
// out, and how a split one becomes whole (the rank all-gather). The op rules are mesh_ops.cpp.
//
// Note [Global view over ranks]
// A MeshTensor is, on each rank, an ordinary tensor (its block of the split axis, or the whole
// replicated value) on the rank's local devices, plus the global facts every rank agrees on:
// the global shape, the split axis, the mesh. Ops run on the local part through the local rules
// (docs/sharding.md: a bundle over the local devices, partial results combined inside the
// graph); only where those rules would need another rank's data does an op take one of three
// rank steps (mesh_rank_steps.hpp): combine (a reduction over the split axis), gather (a
// reshard, to(device)), enter (a replicated value used by this rank's block). Those are the
// rank collectives: host operations, not lazy graph nodes, so each realizes its input where
// the op is built (enter's forward is the identity and communicates only in the backward
// pass), and a Jit captures and replays them between its kernels. Every rank makes the same
// steps in the same order because the decision depends only on the global facts: the ranks
// never disagree on a layout or an error. Why a separate type, not a Sharding over (rank,
// device) pairs on Tensor itself: the core's Multi bundle holds every part in the graph of one
// process, and a rank's parts live in other processes; giving Tensor parts it cannot hold would
// touch every chokepoint of the core for what this layer does at its three steps (decision 69).
#include <algorithm>

#include "distributed/mesh_rank_steps.hpp"
#include "distributed/mesh_tensor_access.hpp"
#include "ravel/error.hpp"

namespace ravel::distributed {

namespace mesh_detail {

Tensor replicated_locally(const Tensor& t, const std::vector<Device>& devices) {
  return devices.size() == 1 ? t.to(devices[0]) : t.replicate(devices);
}

Tensor local_on_one(const MeshTensor& m) { return m.local().to(MeshTensorAccess::devices(m)[0]); }

std::vector<int64_t> even_rank_bounds(int64_t n, int ranks) {
  std::vector<int64_t> b{0};
  for (int r = 0; r < ranks; ++r) b.push_back(b.back() + n / ranks + (r < n % ranks ? 1 : 0));
  return b;
}

Tensor rank_block(const Tensor& whole, int64_t axis, const std::vector<int64_t>& bounds, int rank) {
  if (bounds.size() == 2) return whole;  // one rank
  return whole.slice(axis, bounds[static_cast<size_t>(rank)], bounds[static_cast<size_t>(rank) + 1]);
}

Tensor entered_block(const MeshTensor& replicated, int64_t axis, const std::vector<int64_t>& bounds) {
  const Tensor entered = distributed::detail::rank_enter(local_on_one(replicated));
  return rank_block(entered, axis, bounds, MeshTensorAccess::rank(replicated));
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

void check_same_mesh(const MeshTensor& a, const MeshTensor& b, const char* what) {
  RAVEL_CHECK(MeshTensorAccess::devices(a) == MeshTensorAccess::devices(b) &&
                  MeshTensorAccess::ranks(a) == MeshTensorAccess::ranks(b),
              ValueError, "MeshTensor::", what, ": the operands lie on different meshes (", a.sharding().str(), "; ",
              b.sharding().str(), ")");
}

}  // namespace mesh_detail

using namespace mesh_detail;

namespace {

int64_t normalized_axis(int64_t axis, int64_t ndim, const char* what) {
  RAVEL_CHECK(axis >= -ndim && axis < ndim, IndexError, what, ": axis ", axis,
              " is out of range for a tensor of rank ", ndim);
  return axis < 0 ? axis + ndim : axis;
}

// Every rank's block (on one device, the split axis in front) concatenated in rank order, on
// every rank. Uneven blocks are padded to the longest for the all-gather and cut back after.
Tensor gather_blocks(const Tensor& block, const std::vector<int64_t>& bounds) {
  const size_t ranks = bounds.size() - 1;
  int64_t longest = 0;
  bool even = true;
  for (size_t r = 0; r < ranks; ++r) {
    longest = std::max(longest, bounds[r + 1] - bounds[r]);
    even = even && bounds[r + 1] - bounds[r] == bounds[1] - bounds[0];
  }
  if (even) return distributed::detail::rank_gather(block);
  std::vector<std::pair<int64_t, int64_t>> widths(static_cast<size_t>(block.ndim()), {0, 0});
  widths[0].second = longest - block.shape()[0];
  const Tensor all = distributed::detail::rank_gather(block.pad(widths));  // [ranks * longest, ...]
  std::vector<Tensor> pieces;
  for (size_t r = 0; r < ranks; ++r) {
    const int64_t at = static_cast<int64_t>(r) * longest;
    pieces.push_back(all.slice(0, at, at + bounds[r + 1] - bounds[r]));
  }
  return Tensor::concatenate(pieces, 0);
}

// `block` (this rank's part, any layout) split along `axis` over the local devices.
Tensor split_locally(const Tensor& block, const std::vector<Device>& devices, int64_t axis) {
  if (devices.size() == 1) return block.to(devices[0]);
  const auto s = block.sharding();
  if (s && s->devices == devices && s->axis == axis) return block;
  return block.to(devices[0]).shard(devices, axis);
}

}  // namespace

std::string MeshSharding::str() const {
  std::string s = axis ? "split axis " + std::to_string(*axis) + " of " + shape_str(shape) + " across " +
                             std::to_string(ranks) + " ranks"
                       : "replicated " + shape_str(shape) + " on " + std::to_string(ranks) + " ranks";
  for (size_t r = 0; axis && r + 1 < rank_bounds.size(); ++r)
    s += " [" + std::to_string(rank_bounds[r]) + ", " + std::to_string(rank_bounds[r + 1]) + ")";
  s += "; on rank " + std::to_string(rank) + ": ";
  s += local ? local->str() : devices.empty() ? std::string("?") : "on " + devices[0].device.str();
  return s;
}

MeshSharding MeshTensor::sharding() const {
  MeshSharding s;
  for (int r = 0; r < ranks_; ++r)
    for (const Device& d : devices_) s.devices.push_back(MeshDevice{r, d});
  s.ranks = ranks_;
  s.rank = rank_;
  s.shape = shape_;
  s.axis = axis_;
  s.rank_bounds = bounds_;
  if (local_.defined()) s.local = local_.sharding();
  return s;
}

MeshTensor MeshTensor::with_local(const Tensor& local) const {
  RAVEL_CHECK(local.defined() && local.shape() == local_.shape(), ShapeError, "MeshTensor::with_local: a part of ",
              "shape ", local.defined() ? shape_str(local.shape()) : "(undefined)", " for ", sharding().str(),
              ", whose part on this rank is ", shape_str(local_.shape()));
  return MeshTensorAccess::make(*this, local, axis_, bounds_, shape_);
}

MeshTensor MeshTensor::gathered() const {
  if (!axis_) return *this;
  const int64_t k = *axis_;
  std::vector<int64_t> to_front{k}, back(static_cast<size_t>(ndim()));
  for (int64_t i = 0; i < ndim(); ++i)
    if (i != k) to_front.push_back(i);
  for (int64_t i = 0; i < ndim(); ++i) back[static_cast<size_t>(to_front[static_cast<size_t>(i)])] = i;
  const Tensor whole = gather_blocks(local_on_one(*this).permute(to_front), bounds_).permute(back);
  return MeshTensorAccess::replicated(*this, replicated_locally(whole, devices_), shape_);
}

MeshTensor MeshTensor::resharded(std::optional<int64_t> axis) const {
  RAVEL_CHECK(defined(), ValueError, "MeshTensor::resharded: the tensor is undefined");
  if (!axis) return gathered();
  const int64_t k = normalized_axis(*axis, ndim(), "MeshTensor::resharded");
  if (axis_ == k) return *this;
  const std::vector<int64_t> bounds = even_rank_bounds(shape_[static_cast<size_t>(k)], ranks_);
  const Tensor block = entered_block(gathered(), k, bounds);
  return MeshTensorAccess::make(*this, split_locally(block, devices_, k), k, bounds, shape_);
}

Tensor MeshTensor::to(const Device& device) const {
  RAVEL_CHECK(defined(), ValueError, "MeshTensor::to: the tensor is undefined");
  return (axis_ ? local_on_one(gathered()) : local_).to(device);
}

MeshTensor Mesh::shard(const Tensor& global, int64_t axis) const {
  RAVEL_CHECK(global.defined(), ValueError, "distributed::Mesh::shard: the tensor is undefined");
  axis = normalized_axis(axis, global.ndim(), "distributed::Mesh::shard");
  const auto bounds = even_rank_bounds(global.shape()[static_cast<size_t>(axis)], ranks_);
  const Tensor block = rank_block(global, axis, bounds, rank_);
  return MeshTensorAccess::make(local_, ranks_, rank_, split_locally(block, local_, axis), axis, bounds,
                                global.shape());
}

MeshTensor Mesh::as_replicated(const Tensor& t) const {
  RAVEL_CHECK(t.defined(), ValueError, "distributed::Mesh::as_replicated: the tensor is undefined");
  const auto s = t.sharding();
  const bool already = local_.size() == 1 ? (!s && t.device() == local_[0])
                                          : (s && s->replicated() && s->devices == local_);
  return MeshTensorAccess::make(local_, ranks_, rank_, already ? t : replicated_locally(t.to(local_[0]), local_),
                                std::nullopt, {}, t.shape());
}

MeshTensor Mesh::from_local_parts(const Tensor& local, int64_t axis) const {
  RAVEL_CHECK(local.defined(), ValueError, "distributed::Mesh::from_local_parts: the tensor is undefined");
  // Every rank's (ndim, axis, dtype, dims...) seen by every rank, so every rank reaches the same
  // verdict (and error) before anything else crosses ranks.
  constexpr size_t kDims = 8, kHead = 3;
  std::vector<int64_t> mine(kHead + kDims, -1);
  mine[0] = local.ndim(), mine[1] = axis, mine[2] = static_cast<int64_t>(local.dtype());
  for (size_t i = 0; i < std::min(kDims, local.shape().size()); ++i) mine[kHead + i] = local.shape()[i];
  std::vector<int64_t> all = mine;
  if (ranks_ > 1)
    all = distributed::all_gather(Tensor::from_vector(mine, {1, static_cast<int64_t>(mine.size())}))
              .to_vector<int64_t>();
  auto shape_of = [&](int r) {
    const int64_t* h = &all[static_cast<size_t>(r) * (kHead + kDims)];
    Shape s;
    for (int64_t i = 0; i < std::min<int64_t>(h[0], kDims); ++i) s.push_back(h[kHead + i]);
    return shape_str(s) + (h[0] > static_cast<int64_t>(kDims) ? " (rank > 8)" : "");
  };
  const int64_t* h0 = all.data();
  RAVEL_CHECK(h0[0] <= static_cast<int64_t>(kDims), ShapeError, "distributed::Mesh::from_local_parts: parts of rank ",
              h0[0], " (at most 8)");
  RAVEL_CHECK(h0[1] >= -h0[0] && h0[1] < h0[0], IndexError, "distributed::Mesh::from_local_parts: axis ", h0[1],
              " is out of range for rank 0's part ", shape_of(0));
  const int64_t k = h0[1] < 0 ? h0[1] + h0[0] : h0[1];
  for (int r = 1; r < ranks_; ++r) {
    const int64_t* h = &all[static_cast<size_t>(r) * (kHead + kDims)];
    RAVEL_CHECK(h[2] == h0[2], DTypeError, "distributed::Mesh::from_local_parts: rank 0's part is ",
                dtype_name(static_cast<DType>(h0[2])), ", rank ", r, "'s is ", dtype_name(static_cast<DType>(h[2])),
                " (seen on rank ", rank_, ")");
    bool same = h[0] == h0[0] && h[1] == h0[1];
    for (size_t i = 0; same && i < kDims; ++i) same = static_cast<int64_t>(i) == k || h[kHead + i] == h0[kHead + i];
    RAVEL_CHECK(same, ShapeError, "distributed::Mesh::from_local_parts: rank 0's part ", shape_of(0), " (axis ", h0[1],
                ") and rank ", r, "'s part ", shape_of(r), " (axis ", h[1], ") differ outside the axis (seen on rank ",
                rank_, "); the blocks may differ only in their size along it");
  }
  std::vector<int64_t> bounds{0};
  for (int r = 0; r < ranks_; ++r)
    bounds.push_back(bounds.back() + all[static_cast<size_t>(r) * (kHead + kDims) + kHead + static_cast<size_t>(k)]);
  Shape global = local.shape();
  global[static_cast<size_t>(k)] = bounds.back();
  return MeshTensorAccess::make(local_, ranks_, rank_, split_locally(local, local_, k), k, bounds, global);
}

}  // namespace ravel::distributed
