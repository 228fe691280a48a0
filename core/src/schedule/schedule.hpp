// The scheduler's entry point: graph in, unbound kernel recipe out — nothing runs here.
//
// The runtime (runtime/realize.cpp) walks the targets' unrealized graph with topo_order, asks
// make_schedule for a Recipe (from the kernel cache, or planned under the fusion policy and
// lowered to the C ABI's kernel programs), then binds buffers and runs it (runtime/execute.cpp).
// Smarter fusion later changes only how many instructions a program holds, not the ABI.
#pragma once

#include <functional>
#include <memory>
#include <unordered_set>
#include <vector>

#include "graph/node.hpp"
#include "ravel/fusion.hpp"
#include "schedule/kernel_cache.hpp"
#include "schedule/recipe.hpp"

namespace ravel::detail {

// Post-order of the unrealized nodes below `roots` (sources first), without recursion (deep
// graphs). Realized nodes, Buffers and Consts are leaves and are not listed.
std::vector<NodePtr> topo_order(const std::vector<NodePtr>& roots);

// What the runtime tells the scheduler: everything the plan may depend on besides the graph.
struct ScheduleRequest {
  FusionOptions fusion;
  bool device_has_contraction = false;  // the target device implements execute_contraction
  int contraction_axes = 1;             // its largest M/K/N axis group (ABI 1.8 im2col block)
  bool use_cache = true;                // look up and insert into the kernel cache
  bool describe = false;                // keep RAVEL_DEBUG text in the kernels
  // The op mask of a device (Note [Capabilities] in graph/ops.hpp); unset: every op.
  std::function<uint64_t(const Device&)> device_ops;
  // The reductions a device runs with a row epilogue (ABI 1.10, Note [Row epilogue fusion]);
  // unset: none.
  std::function<uint32_t(const Device&)> reduce_epilogue_ops;
  // The reductions a device runs in a chain (ABI 1.11, Note [Row chains in the planner]); unset:
  // none.
  std::function<uint32_t(const Device&)> reduce_chain_ops;
};

struct Schedule {
  GraphKey graph;                        // local index -> node: what the recipe binds to
  std::shared_ptr<const Recipe> recipe;
  enum class Cache : uint8_t { Unused, Hit, Miss } cache = Cache::Unused;
};

// The recipe for realizing `roots` (the targets' bases; `keep` holds the same nodes), whose
// unrealized nodes are `order` (topo_order(roots), not empty). Throws Ravel errors only
// (InternalError for a bug of the scheduler's own).
Schedule make_schedule(const std::vector<NodePtr>& order, const std::vector<NodePtr>& roots,
                       const std::unordered_set<const Node*>& keep, const ScheduleRequest& request);

}  // namespace ravel::detail
