// realize_nodes: walk the graph iteratively, plan kernels (fusion.hpp), run them, free
// temporaries early, and keep statistics (RAVEL_DEBUG prints each kernel).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "ravel/runtime.hpp"
#include "ravel/tensor.hpp"
#include "runtime/plugin.hpp"
#include "schedule/fusion.hpp"
#include "schedule/kernel_builder.hpp"

namespace ravel {

namespace {
std::mutex g_stats_mutex;
KernelStats g_last, g_total;
}  // namespace

KernelStats last_realization_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  return g_last;
}
KernelStats cumulative_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  return g_total;
}
void reset_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_last = g_total = KernelStats{};
}

}  // namespace ravel

namespace ravel::detail {

Source resolve(const NodePtr& n) {
  if (n->kind == NodeKind::View) return {n->srcs[0], n->view};
  return {n, View::contiguous(n->shape)};
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int debug_level() {
  const char* v = std::getenv("RAVEL_DEBUG");
  return v ? std::atoi(v) : 0;
}

// Post-order of the unrealized nodes below `roots`, without recursion (deep graphs).
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

// Elements a view touches (its valid box) times the element size.
int64_t view_bytes(const View& v, DType t) {
  int64_t n = 1;
  for (int64_t d = 0; d < v.rank(); ++d) {
    auto [lo, hi] = v.valid(d);
    n *= (v.strides[d] == 0 ? std::min<int64_t>(1, hi - lo) : hi - lo);
  }
  return n * dtype_size(t);
}

struct KernelRun {
  const char* kind = "";
  int64_t bytes_read = 0;
  std::string detail;  // RAVEL_DEBUG text
};

KernelRun run_program(Node& k, const KernelPlan& plan, int debug) {
  KernelBuilder b(k.kind == NodeKind::Reduce ? k.srcs[0]->shape : k.shape, &plan.inlined);
  rvl_reduce_op reduce = RVL_REDUCE_NONE;
  if (k.kind == NodeKind::Alu) {
    std::vector<int32_t> ins;
    for (const auto& s : k.srcs) ins.push_back(b.value(s));
    b.emit(alu_info(k.alu).code, k.dtype, ins);
  } else {
    b.value(k.srcs[0]);
    if (k.kind == NodeKind::Reduce) reduce = static_cast<rvl_reduce_op>(k.reduce);
  }
  const rvl_program& prog = b.finish(k, reduce, k.kind == NodeKind::Reduce ? k.axes : 0);
  KernelRun run;
  run.kind = k.kind == NodeKind::Reduce ? "reduce" : k.kind == NodeKind::Copy ? "copy" : "elementwise";
  for (int32_t i = 0; i < prog.n_inputs; ++i) {
    const auto& base = b.bases()[i];
    View v = View::contiguous(k.kind == NodeKind::Reduce ? k.srcs[0]->shape : k.shape);
    v.strides.assign(prog.inputs[i].view.strides, prog.inputs[i].view.strides + prog.rank);
    v.mask = std::vector<Range>(prog.rank);
    for (int32_t d = 0; d < prog.rank; ++d) (*v.mask)[d] = {prog.inputs[i].view.valid_lo[d], prog.inputs[i].view.valid_hi[d]};
    run.bytes_read += view_bytes(v, base->dtype);
  }
  if (debug) run.detail = b.describe();
  Plugin& plugin = k.buffer->plugin();
  plugin.check(plugin.api().execute_program(k.device.index(), nullptr, &prog), "kernel program");
  return run;
}

}  // namespace

void realize_nodes(const std::vector<NodePtr>& targets) {
  const auto t_start = Clock::now();
  const int debug = debug_level();
  std::vector<NodePtr> roots;
  std::unordered_set<const Node*> keep;
  for (const auto& t : targets) {
    NodePtr b = resolve(t).base;
    if (b->kind == NodeKind::Const) realize_const(*b);
    keep.insert(b.get());
    roots.push_back(b);
  }
  std::vector<NodePtr> order = topo_order(roots);
  KernelStats stats;
  stats.realizations = 1;
  if (!order.empty()) {
    auto plugin0 = Runtime::get().plugin_for(order.front()->device);
    KernelPlan plan = plan_kernels(order, keep, fusion_options(), RAVEL_API_HAS(&plugin0->api(), execute_contraction));
    if (debug >= 2) {
      std::fprintf(stderr, "ravel: graph cut: %zu nodes -> %zu kernels (%zu inlined, %zu contractions)\n", order.size(),
                   plan.roots.size(), plan.inlined.size(), plan.contractions.size());
      for (const auto& n : order)
        std::fprintf(stderr, "  node %llu %s %s%s\n", static_cast<unsigned long long>(n->id),
                     n->kind == NodeKind::Alu ? alu_info(n->alu).name : n->kind == NodeKind::Reduce ? reduce_name(n->reduce) : n->kind == NodeKind::Copy ? "copy" : "view",
                     shape_str(n->shape).c_str(), plan.inlined.count(n.get()) ? "  (inlined)" : "");
    }
    std::unordered_map<const Node*, int> remaining;
    for (const auto& k : plan.roots)
      for (const auto& r : plan.reads.at(k.get())) ++remaining[r.get()];

    std::unordered_set<const Node*> made;  // nodes this call gave a buffer
    auto release_temporaries = [&] {
      for (const auto& m : order)
        if (made.count(m.get()) && !keep.count(m.get())) m->buffer.reset();
    };
    double exec = 0;
    for (const auto& k : plan.roots) {
      if (k->buffer) continue;
      auto plugin = Runtime::get().plugin_for(k->device);
      const uint64_t bytes = static_cast<uint64_t>(k->numel()) * dtype_size(k->dtype);
      k->buffer = std::make_shared<DeviceBuffer>(plugin, k->device.index(), bytes);
      stats.bytes_allocated += static_cast<int64_t>(bytes);
      stats.bytes_written += static_cast<int64_t>(bytes);
      made.insert(k.get());
      auto it = plan.contractions.find(k.get());
      KernelRun run;
      run.kind = "contraction";
      const auto t0 = Clock::now();
      try {
        if (auto e = plan.epilogues.find(k.get()); e != plan.epilogues.end()) {
          // Note [Epilogue fusion]: this elementwise kernel runs as its contraction's epilogue.
          KernelBuilder b(k->shape, &plan.inlined);
          b.set_accumulator(e->second);
          std::vector<int32_t> ins;
          for (const auto& s : k->srcs) ins.push_back(b.value(s));
          b.emit(alu_info(k->alu).code, k->dtype, ins);
          run_contraction(plan.contractions.at(e->second), *e->second, *k, &b.inputs(), &b.instructions());
          ++stats.contractions;
          for (const auto& r : plan.reads.at(k.get())) run.bytes_read += r->numel() * dtype_size(r->dtype);
          if (debug) run.detail = "    epilogue:\n" + b.describe();
        } else if (it != plan.contractions.end()) {
          run_contraction(it->second, *k, *k);
          ++stats.contractions;
          for (const auto& r : plan.reads.at(k.get())) run.bytes_read += r->numel() * dtype_size(r->dtype);
        } else {
          run = run_program(*k, plan, debug);
          ++stats.programs;
        }
      } catch (...) {
        k->buffer.reset();  // never leave a node looking realized with garbage in it
        release_temporaries();
        throw;
      }
      const double dt = since(t0);
      exec += dt;
      stats.bytes_read += run.bytes_read;
      if (debug >= 1)
        std::fprintf(stderr, "ravel: %-11s %-14s %s -> node %llu  %.1f us\n%s", run.kind, shape_str(k->shape).c_str(),
                     dtype_name(k->dtype), static_cast<unsigned long long>(k->id), dt * 1e6, run.detail.c_str());
      for (const auto& r : plan.reads.at(k.get()))
        if (--remaining[r.get()] == 0 && made.count(r.get()) && !keep.count(r.get())) r->buffer.reset();
    }
    stats.execute_seconds = exec;
    stats.schedule_seconds = since(t_start) - exec;
  }
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_last = stats;
  g_total.realizations += stats.realizations;
  g_total.programs += stats.programs;
  g_total.contractions += stats.contractions;
  g_total.bytes_read += stats.bytes_read;
  g_total.bytes_written += stats.bytes_written;
  g_total.bytes_allocated += stats.bytes_allocated;
  g_total.schedule_seconds += stats.schedule_seconds;
  g_total.execute_seconds += stats.execute_seconds;
}

}  // namespace ravel::detail
