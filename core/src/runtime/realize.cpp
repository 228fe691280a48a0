#include "runtime/realize.hpp"

#include <chrono>
#include <unordered_map>
#include <unordered_set>

#include "config/settings.hpp"
#include "graph/ops.hpp"
#include "ravel/error.hpp"
#include "runtime/debug.hpp"
#include "runtime/execute.hpp"
#include "runtime/host_op.hpp"
#include "runtime/loaded_plugin.hpp"
#include "runtime/options.hpp"
#include "runtime/stats.hpp"
#include "schedule/interleave.hpp"
#include "schedule/schedule.hpp"

namespace ravel::detail {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Note [Dtypes a device lacks]
// A device runs the dtypes whose bits its plugin sets in rvl_device_properties.dtypes; a plugin
// built against ABI 1.0-1.6 never sets the 1.7 ones (f16, bf16, i8, i16, u16, u32, u64), and
// OpenCL devices without fp64 clear f64. Such a device may still *hold* those bytes (an upload
// or a transfer copies bytes, which any device can), but it must never be sent a kernel that
// reads or computes them: before anything of the realization runs, every node computed on a
// device (elementwise, reduce, copy) is checked, and the first one the device cannot do is
// refused with a DTypeError naming the op, the dtype and the device. Reading such a tensor back
// (to_vector, item, printing) needs no kernel in that dtype: Tensor::read_into converts on the
// host (tensor/host_convert.hpp). Refusing rather than silently computing in another dtype is
// PyTorch's choice too ("not implemented for 'Half'"): a silent f32 detour would change results.
uint32_t dtype_mask_of(const Runtime& rt, const Device& d) { return rt.plugin_for(d)->caps(d.index()).dtypes; }

std::string dtype_list(uint32_t mask) {
  std::string out;
  for (int t = 0; t < kDTypeCount; ++t)
    if ((mask >> t) & 1u) out += std::string(out.empty() ? "" : ", ") + dtype_name(static_cast<DType>(t));
  return out.empty() ? "none" : out;
}

std::string node_op_name(const Node& n) {
  switch (n.kind) {
    case NodeKind::Alu: return n.alu == AluOp::CAST ? std::string("cast to ") + dtype_name(n.dtype) : alu_name(n.alu);
    case NodeKind::Reduce: return reduce_name(n.reduce);
    default: return "copy";
  }
}

void check_device_dtypes(const Runtime& rt, const std::vector<NodePtr>& order) {
  // One plugin lookup per device, not per node (a realization has one device, or a few).
  std::vector<std::pair<Device, uint32_t>> masks;
  auto mask_of = [&](const Device& d) {
    for (const auto& [dev, m] : masks)
      if (dev == d) return m;
    masks.emplace_back(d, dtype_mask_of(rt, d));
    return masks.back().second;
  };
  for (const auto& n : order) {
    if (n->kind != NodeKind::Alu && n->kind != NodeKind::Reduce && n->kind != NodeKind::Copy) continue;
    const uint32_t mask = mask_of(n->device);
    if (mask == RVL_DTYPES_ALL) continue;
    auto refuse_unless = [&](DType t) {
      if ((mask >> static_cast<uint32_t>(t)) & 1u) return;
      throw DTypeError(concat(node_op_name(*n), " of ", dtype_name(t), " on ", n->device.str(), ": the device does not run ",
                              dtype_name(t), " (its plugin states ", dtype_list(mask),
                              "); nothing was run. Cast to a dtype it runs on a device that has both, read the "
                              "values with to_vector (converted on the host), or use a device that runs ",
                              dtype_name(t)));
    };
    for (const auto& src : n->srcs) refuse_unless(src->dtype);
    refuse_unless(n->dtype);
  }
}
}  // namespace

void realize_nodes(const Runtime& rt, const std::vector<NodePtr>& targets, const TargetReady& ready,
                   const std::function<void()>& after_kernel) {
  // Targets that all have their buffers (a read-back or Tensor::realize of a result, a collective's
  // output) need no graph walk, hash sets or schedule: still one realization in the statistics.
  // A View's srcs[0] is its base (graph/node.hpp); resolve would copy the view.
  if (!ready && !after_kernel) {
    bool all_made = true;
    for (const auto& t : targets) {
      const Node& base = t->kind == NodeKind::View ? *t->srcs[0] : *t;
      all_made = all_made && base.buffer != nullptr;
    }
    if (all_made) {
      KernelStats stats;
      stats.realizations = 1;
      record_realization(stats);
      return;
    }
  }
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
  // Targets reported to `ready`: those with a buffer now at once, the others by the kernel that
  // makes their base (several targets may share one base), any left over after the last kernel.
  std::vector<uint8_t> reported(ready ? roots.size() : 0, 0);
  std::unordered_map<const Node*, std::vector<size_t>> waiting;
  auto report = [&](size_t i) {
    if (!reported[i]) reported[i] = 1, ready(i);
  };
  KernelMade made;
  if (ready) {
    for (size_t i = 0; i < roots.size(); ++i) {
      if (roots[i]->buffer) report(i);
      else waiting[roots[i].get()].push_back(i);
    }
  }
  // Operations whose ends wait for a reader (Note [Results ended at their first reader] in
  // host_op_deferred.cpp) are progressed between these kernels too, e.g. an optimizer's update.
  const bool deferred = deferred_host_ops_pending();
  if (!waiting.empty() || after_kernel || deferred)
    made = [&](const Node& n) {
      if (after_kernel) after_kernel();  // first: what began before this kernel, as a Jit replays it
      else if (deferred) progress_deferred_host_ops();
      if (auto it = waiting.find(&n); it != waiting.end())
        for (size_t i : it->second) report(i);
    };
  // topo_order finishes the subgraph of its last root first (a depth-first walk off a stack):
  // with `ready`, the roots go in reversed, so the kernels of target 0 come first, then those
  // target 1 still needs, and so on (the order a DDP bucket list wants: Note [Host operations
  // begun as their inputs are made] in host_op.cpp). Plain realizations keep their order (and
  // with it their kernel-cache keys).
  std::vector<NodePtr> order =
      interleave_devices(topo_order(ready ? std::vector<NodePtr>(roots.rbegin(), roots.rend()) : roots));
  KernelStats stats;
  stats.realizations = 1;
  if (!order.empty()) {
    check_device_dtypes(rt, order);  // Note [Dtypes a device lacks]
    ScheduleRequest req;
    req.fusion = fusion_in_force(rt);
    req.device_has_contraction = RAVEL_API_HAS(&rt.plugin_for(order.front()->device)->api(), execute_contraction);
    if (req.device_has_contraction)
      req.contraction_axes = rt.plugin_for(order.front()->device)->caps(order.front()->device.index()).contraction_axes;
    req.use_cache = kernel_cache_enabled(req.fusion) && settings.kernel_cache;
    req.describe = settings.debug != 0;
    req.device_ops = [&rt](const Device& d) { return device_op_set(rt, d).alu; };
    // ABI 1.10: reductions masked by RAVEL_MASK_OPS are never sent, so neither are their epilogues.
    req.reduce_epilogue_ops = [&rt](const Device& d) {
      return rt.plugin_for(d)->caps(d.index()).reduce_epilogue_ops & device_op_set(rt, d).reduce;
    };
    // ABI 1.11: likewise the reductions it takes in a chain (Note [Row chains in the planner]).
    req.reduce_chain_ops = [&rt](const Device& d) {
      return rt.plugin_for(d)->caps(d.index()).reduce_chain_ops & device_op_set(rt, d).reduce;
    };
    Schedule s = make_schedule(order, roots, keep, req);
    stats.cache_hits = s.cache == Schedule::Cache::Hit;
    stats.cache_misses = s.cache == Schedule::Cache::Miss;
    if (settings.debug >= 2) print_graph_cut(order, s);
    run_recipe(rt, s.recipe, s.graph.locals, stats, settings.debug, made);
    stats.schedule_seconds = seconds_since(t_start) - stats.execute_seconds;
  }
  record_realization(stats);
  for (size_t i = 0; i < reported.size(); ++i) report(i);
}

}  // namespace ravel::detail
