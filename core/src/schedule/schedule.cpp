#include "schedule/schedule.hpp"

#include <algorithm>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "ravel/error.hpp"

namespace ravel::detail {

std::vector<NodePtr> topo_order(const std::vector<NodePtr>& roots) {
  std::vector<NodePtr> order;
  std::unordered_set<const Node*> seen;
  std::vector<std::pair<NodePtr, bool>> stack;
  for (const auto& r : roots) stack.emplace_back(r, false);
  while (!stack.empty()) {
    auto [n, expanded] = std::move(stack.back());
    stack.pop_back();
    if (n->buffer || n->kind == NodeKind::Const || n->kind == NodeKind::Buffer) continue;
    if (expanded) {
      order.push_back(n);
      continue;
    }
    if (!seen.insert(n.get()).second) continue;
    stack.emplace_back(n, true);
    for (const auto& s : n->srcs)
      if (!seen.count(s.get())) stack.emplace_back(s, false);
  }
  return order;
}

namespace {
Schedule schedule_unchecked(const std::vector<NodePtr>& order, const std::vector<NodePtr>& roots,
                            const std::unordered_set<const Node*>& keep, const ScheduleRequest& req) {
  Schedule s;
  // 0: no contraction kernels; n >= 1: contractions whose M, K and N groups have <= n axes.
  const int contraction = req.device_has_contraction ? std::max(req.contraction_axes, 1) : 0;
  s.graph = make_graph_key(order, roots, req.fusion, contraction);
  // The lowered kernels depend on each device's op mask (ops it lacks are decomposed), which
  // RAVEL_MASK_OPS or a plugin reloaded by Runtime::reset may change: it is part of the key.
  DeviceOps ops;
  DeviceMasks epilogues, chains;
  for (const auto& n : order) {
    if (std::any_of(ops.begin(), ops.end(), [&](const auto& o) { return o.first == n->device; })) continue;
    const uint64_t mask = req.device_ops ? req.device_ops(n->device) : RVL_OPS_ALL;
    ops.emplace_back(n->device, mask);
    s.graph.key.append(reinterpret_cast<const char*>(&mask), sizeof mask);
    // Likewise the reductions it takes a row epilogue for (ABI 1.10): they change the plan.
    const uint32_t epi = req.reduce_epilogue_ops ? req.reduce_epilogue_ops(n->device) : 0u;
    if (epi) epilogues.emplace_back(n->device, epi);
    s.graph.key.append(reinterpret_cast<const char*>(&epi), sizeof epi);
    const uint32_t chain = req.reduce_chain_ops ? req.reduce_chain_ops(n->device) : 0u;  // ABI 1.11
    if (chain) chains.emplace_back(n->device, chain);
    s.graph.key.append(reinterpret_cast<const char*>(&chain), sizeof chain);
  }
  if (req.use_cache) s.recipe = kernel_cache_find(s.graph.key);
  if (s.recipe) {
    s.cache = Schedule::Cache::Hit;
    return s;
  }
  s.recipe = make_recipe(order, keep, s.graph, req.fusion, contraction, req.describe, ops, epilogues, chains);
  if (req.use_cache) {
    s.cache = Schedule::Cache::Miss;
    kernel_cache_insert(s.graph.key, s.recipe, req.fusion);
  }
  return s;
}
}  // namespace

Schedule make_schedule(const std::vector<NodePtr>& order, const std::vector<NodePtr>& roots,
                       const std::unordered_set<const Node*>& keep, const ScheduleRequest& req) {
  // The scheduler throws Ravel errors only: the planner and builder look up what they recorded
  // themselves (map::at and the like), so a standard exception here is a bug of ours, reported
  // as one. Running out of memory stays std::bad_alloc.
  try {
    return schedule_unchecked(order, roots, keep, req);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw InternalError(std::string("ravel: scheduler error (") + e.what() + "); this is a bug, please report it");
  }
}

}  // namespace ravel::detail
