#include "runtime/realize.hpp"

#include <chrono>
#include <unordered_set>

#include "config/settings.hpp"
#include "runtime/debug.hpp"
#include "runtime/execute.hpp"
#include "runtime/loaded_plugin.hpp"
#include "runtime/options.hpp"
#include "runtime/stats.hpp"
#include "schedule/interleave.hpp"
#include "schedule/schedule.hpp"

namespace ravel::detail {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

void realize_nodes(const Runtime& rt, const std::vector<NodePtr>& targets) {
  const auto t_start = Clock::now();
  const Settings& settings = rt.settings();
  std::vector<NodePtr> roots;
  std::unordered_set<const Node*> keep;
  for (const auto& t : targets) {
    NodePtr b = resolve(t).base;
    if (b->kind == NodeKind::Const) realize_const(rt, *b);
    keep.insert(b.get());
    roots.push_back(b);
  }
  std::vector<NodePtr> order = interleave_devices(topo_order(roots));
  KernelStats stats;
  stats.realizations = 1;
  if (!order.empty()) {
    ScheduleRequest req;
    req.fusion = fusion_in_force(rt);
    req.device_has_contraction = RAVEL_API_HAS(&rt.plugin_for(order.front()->device)->api(), execute_contraction);
    if (req.device_has_contraction)
      req.contraction_axes = rt.plugin_for(order.front()->device)->caps(order.front()->device.index()).contraction_axes;
    req.use_cache = kernel_cache_enabled(req.fusion) && settings.kernel_cache;
    req.describe = settings.debug != 0;
    req.device_ops = [&rt](const Device& d) { return device_op_set(rt, d).alu; };
    Schedule s = make_schedule(order, roots, keep, req);
    stats.cache_hits = s.cache == Schedule::Cache::Hit;
    stats.cache_misses = s.cache == Schedule::Cache::Miss;
    if (settings.debug >= 2) print_graph_cut(order, s);
    run_recipe(rt, s.recipe, s.graph.locals, stats, settings.debug);
    stats.schedule_seconds = seconds_since(t_start) - stats.execute_seconds;
  }
  record_realization(stats);
}

}  // namespace ravel::detail
