// Sharded tensors: Multi nodes and how every op propagates over them.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "graph/node.hpp"
#include "ravel/sharding.hpp"
#include "ravel/tensor.hpp"

namespace ravel::detail {

// Note [Sharded tensors]
// A tensor on several devices is a Multi node (graph/node.hpp) over one ordinary node per device,
// as tinygrad's MultiLazyBuffer: a *bundle*, never scheduled. Every op on a bundle is built part
// by part (the chokepoints make_alu, make_view, make_alias, reduce_node, copy, to and
// with_custom_vjp call the functions below when an operand is a Multi), so the scheduler,
// the executor, Jit capture and the backends only ever see single-device nodes joined by
// Transfer nodes: the only op that moves data between devices, as the seed specification has it.
// The rules, which are the seed's and DTensor's:
//   - elementwise: the result is split like the first split operand (replicas otherwise); every
//     other operand is brought to that layout: a replica or a one-device tensor is cut locally
//     (shrink, then a copy to the part's device), an operand split differently is gathered first;
//   - permute follows the axis; reshape keeps the split where every part boundary survives
//     (splitting or merging axes around it), else gathers to replicas; pad grows the first and
//     last parts, shrink cuts each part (parts may become empty); expand shifts the axis; flip or
//     a strided slice of the split axis gathers first;
//   - a reduction that keeps the split axis runs per part; one over it reduces each part and
//     leaves the partial results as they are (Note [Partial results]).
// Why bundles rather than a device tuple on every node: the single-device graph, its fusion,
// kernels and derivative rules stay exactly as they are; sharding costs nothing where unused.

bool is_multi(const Tensor& t);
bool any_multi(const std::vector<Tensor>& ts);
// The parts of a Multi in mesh order (each on one device); {t} for any other tensor.
std::vector<Tensor> parts_of(const Tensor& t);

// Note [Partial results]
// A reduction over the split axis (a sum, max or min; the row-parallel matmul's contraction is a
// sum) leaves one whole-shaped partial result per device, and the tensor's value is those parts
// combined: DTensor's Partial, GSPMD's pending reduction. The bundle keeps them as they are
// (Layout::partial, axis -1) and the combine happens where the value is consumed, chosen by what
// the consumer wants:
//   - the value on every device (most ops, a non-linear op, all_gather, replicate): combined(),
//     the all-reduce the reduction did eagerly before, built the same way (same bits), once for
//     all such consumers (kept on the node: the plugin's collective runs as it is built);
//   - a split layout (shard(axis), an elementwise op with a split operand, reduce_scatter):
//     parts_in() reduce-scatters, moving 1/n of the bytes an all-reduce moves (the plugin's
//     ABI 1.12 member where it takes it);
//   - one device (to, a host read, printing): fold_on() that device, a reduce;
//   - linear ops where the result is exactly the op applied to the combined value stay partial:
//     views but a broadcast (an expand combines first: then the combine moves the source's bytes,
//     not the broadcast's) and contiguous copies (zero padding included: 0 + 0 = max(0, 0) = 0);
//     a sum of a sum partial and a max of a max partial; partial + partial (sums on one mesh);
//     negation (a float max partial becomes a min partial; integer negation wraps, so there
//     only sums); a sum partial times a replica or a one-device tensor (so the mean's division
//     by the count, a scale by a learning rate). Anything else combines first: p + r is not
//     partial(p_i + r), which would count r n times.
// Why deferred: a row-parallel layer followed by a split layer (Megatron's sequence parallelism)
// then costs a reduce-scatter instead of an all-reduce and a cut, and a loss summed over a
// split batch is combined once, where it is read. Not partial: a reduction with an empty part
// (that device has no partial result to contribute; an identity element would turn -0.0 into
// 0.0), prod and logsumexp reductions; they combine at once, as before.
// Autodiff: the parts are the bundle's sources, so a consumer's combine is differentiated like
// any composition. A partial bundle reached as a root (a partial loss) hands each part the
// cotangent through fold_vjp (the all-reduce's derivative: for a sum, g to every part).

// Where a bundle's parts live and how they split: axis -1 means replicas, or partial results
// when `partial` is set (Note [Partial results]).
struct Layout {
  std::vector<Device> devices;
  int32_t axis = -1;
  std::vector<int64_t> bounds;  // n + 1 offsets when split
  std::optional<CollectiveOp> partial;
  bool operator==(const Layout&) const = default;
};
Layout layout_of(const Tensor& t);
// numpy.array_split's bounds of `size` over n parts.
std::vector<int64_t> even_bounds(int64_t size, size_t n);
// A bundle of `parts` (one per device, distinct devices) split as `layout` says.
Tensor make_multi(std::vector<Tensor> parts, const Layout& layout);
// t (any tensor of shape `global`) brought to `layout`: one tensor per device of the layout.
std::vector<Tensor> parts_in(const Tensor& t, const Layout& layout, const Shape& global);
// Parts laid end to end along `axis` into one tensor of shape `whole` on `device`. Exact for
// every value (where, not addition: -0.0 and NaN payloads survive a gather bit for bit).
Tensor join(const std::vector<Tensor>& parts, int64_t axis, const Shape& whole, const Device& device);
// A bundle brought to replicas on its own mesh (all-gather where split, all-reduce where partial).
Tensor gathered(const Tensor& t);
// Whether t is a bundle of partial results (Note [Partial results]).
bool is_partial(const Tensor& t);
// A partial bundle combined into replicas on its mesh (the all-reduce); any other tensor itself.
Tensor combined(const Tensor& t);
// The fold that combines parts by a CollectiveOp: its ReduceOp, and whether Max means minimum.
std::pair<ReduceOp, bool> fold_of(CollectiveOp op);

// The propagation rules, called by the single-device chokepoints when an operand is a Multi.
Tensor multi_alu(AluOp op, const std::vector<Tensor>& srcs, DType out);
Tensor multi_view(const Tensor& t, MoveOp op, const std::vector<int64_t>& args);
Tensor multi_alias(const Tensor& t, MoveOp op);
Tensor multi_reduce(ReduceOp op, const Tensor& t, uint32_t axes, DType out);
Tensor multi_to(const Tensor& t, const Device& device);
Tensor multi_contiguous(const Tensor& t);

// The parts combined elementwise across devices by `op` (partial reductions, all_reduce), one
// result per device of `devices` (parts[i] lives on devices[i]), all equal: replicas.
std::vector<Tensor> combine_across(const std::vector<Tensor>& parts, ReduceOp op, bool min = false);
// combine_across of flat parts read as `pieces` (each an offset and a shape): for each piece, one
// result per device (Note [Summed in pieces] in collectives.cpp).
std::vector<std::vector<Tensor>> combine_across_in_pieces(const std::vector<Tensor>& parts,
                                                          const std::vector<std::pair<int64_t, Shape>>& pieces,
                                                          ReduceOp op);
// Part k of the result: slice [b[k], b[k+1]) along `axis` of every part, folded in order on
// devices[k] (a reduce-scatter; the plugin's ABI 1.12 member where it takes it).
std::vector<Tensor> scatter_parts(const std::vector<Tensor>& parts, const std::vector<Device>& devices, int64_t axis,
                                  const std::vector<int64_t>& b, ReduceOp op, bool min);
// The parts (on any devices) folded on `device` by `op` (min: Max means minimum), in order.
Tensor fold_on(const std::vector<Tensor>& parts, const Device& device, ReduceOp op, bool min);
// The derivative of fold_on(xs, g.device(), op, min) for cotangent g: one gradient per part, on
// the part's device (Note [Plugin all-reduce gradients] in collectives.cpp).
std::vector<Tensor> fold_vjp(const std::vector<Tensor>& xs, const Tensor& g, ReduceOp op, bool min);

// Note [Sharded gradients]
// Autodiff runs on the single-device graph. A bundle's derivative rule hands each part its slice
// of the cotangent; for replicas only the first replica receives it (the replicas are one value,
// so the cotangent counts once; the others get none). The gradient *with respect to* a bundle is
// assembled from its parts' gradients (autodiff/backprop.cpp): split like the bundle, and for
// replicas the sum over replicas, which is the all-reduce of data-parallel training.
std::vector<Tensor> split_cotangent(const NodePtr& multi, const Tensor& g);
// The gradient with respect to bundle x from the gradients of its parts (`part_gradient` gives
// an undefined tensor for a part no gradient reached: zeros).
Tensor sharded_gradient(const Tensor& x, const std::function<Tensor(const Tensor&)>& part_gradient);
// sharded_gradient of every bundle in xs at once (undefined for the tensors that are not
// bundles), the replicated ones reduced across devices together (Note [Replica gradient buckets]).
std::vector<Tensor> sharded_gradients(const std::vector<Tensor>& xs,
                                      const std::function<Tensor(const Tensor&)>& part_gradient);

}  // namespace ravel::detail
