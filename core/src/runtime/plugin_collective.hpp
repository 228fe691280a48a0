// Collectives run by the plugin that owns every device of a mesh (ABI 1.9 all_reduce, 1.12
// reduce_scatter and all_gather), for the tensor layer's collectives (Engine::plugin_all_reduce,
// plugin_reduce_scatter and plugin_all_gather, graph/engine.hpp).
#pragma once

#include <vector>

#include "graph/node.hpp"

namespace ravel::detail {

// Note [Plugin all-reduce]
// An all-reduce over the parts of a sharded tensor is a composition of transfers and adds (Note
// [Sharded tensors]), which on host devices moves several times the bytes of the data, one device
// at a time (docs/performance.md §6). A plugin that owns every device of the mesh and offers
// all_reduce (tbb_cpu: Note [Host all-reduce]) does it in one collective instead: each device
// reduces its chunk of every part in place and writes it into every device's result.
// It runs as a host operation (Note [Host operations] in runtime/host_op.hpp), so a Jit captures
// it and replays it with each call's values, and the scheduler never sees it: its inputs are
// realized (one scheduling pass) when the collective is called, and its results are realized
// leaves, each given the fold's derivative by the tensor layer (Note [Plugin all-reduce
// gradients] in tensor/collectives.cpp). `begin` launches the plugin's call on the devices'
// default streams and writes fresh outputs of its own (HostOp::take_outputs): the ABI's n-sided
// barrier orders it after the kernels that wrote the inputs and before whatever reads the
// outputs or frees the inputs, so nothing waits on the host.
// When it is used, RAVEL_PLUGIN_COLLECTIVES says: "0" never (the composition: tests keep it
// covered), "1" at every size, unset or "auto" from kPluginAllReduceMinElements per part. Below
// that a collective is latency, and the composition's small kernels fuse with their neighbours
// while a host operation is a scheduling barrier (its inputs are realized at the call).
// reduce_scatter and all_gather (ABI 1.12) take the same path by the same switch and threshold
// (elements of each input part): Note [Plugin reduce-scatter and all-gather] in
// tensor/collectives.cpp says what the tensor layer gives them.
constexpr int64_t kPluginAllReduceMinElements = 16 * 1024;

// Engine::plugin_all_reduce: the realized results, or empty where the path does not apply.
std::vector<NodePtr> run_plugin_all_reduce(const std::vector<NodePtr>& parts, ReduceOp op, bool min);
// Engine::plugin_reduce_scatter / plugin_all_gather: likewise; every result has `out_shape`.
std::vector<NodePtr> run_plugin_reduce_scatter(const std::vector<NodePtr>& parts, ReduceOp op, bool min,
                                               const Shape& out_shape);
std::vector<NodePtr> run_plugin_all_gather(const std::vector<NodePtr>& parts, const Shape& out_shape);

}  // namespace ravel::detail
