// realize_nodes: walk the graph iteratively, plan and lower kernels (fusion.hpp, kernel_builder.hpp)
// or take them from the kernel cache (kernel_cache.hpp), bind buffers and run them, free
// temporaries early, and keep statistics (RAVEL_DEBUG prints each kernel).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "ravel/error.hpp"
#include "ravel/runtime.hpp"
#include "ravel/tensor.hpp"
#include "runtime/plugin.hpp"
#include "schedule/fusion.hpp"
#include "schedule/kernel_cache.hpp"
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

// Plans `order` and lowers every kernel of the plan, unbound (Note [Kernel cache]).
std::shared_ptr<const Recipe> make_recipe(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                                          const GraphKey& g, const FusionOptions& options, bool has_contraction,
                                          int debug) {
  KernelPlan plan = plan_kernels(order, keep, options, has_contraction);
  auto r = std::make_shared<Recipe>();
  r->inlined.assign(g.locals.size(), 0);
  for (const Node* n : plan.inlined) r->inlined[g.local(n)] = 1;
  for (const Node* n : keep) r->keep.push_back(g.local(n));
  auto take_builder = [&](CachedKernel& ck, const KernelBuilder& b) {
    ck.inputs = b.inputs();
    ck.instructions = b.instructions();
    for (const auto& base : b.bases()) ck.input_nodes.push_back(g.local(base.get()));
    if (debug) ck.detail += b.describe();
  };
  for (const auto& k : plan.roots) {
    CachedKernel ck;
    ck.out = g.local(k.get());
    for (const auto& rd : plan.reads.at(k.get())) ck.reads.push_back(g.local(rd.get()));
    auto c = plan.contractions.find(k.get());
    auto e = plan.epilogues.find(k.get());
    if (k->kind == NodeKind::Transfer) {
      ck.kind = CachedKernel::Kind::Transfer;
      ck.label = "transfer";
      ck.a_node = g.local(resolve(k->srcs[0]).base.get());  // laid out like its base (Tensor::to)
      ck.bytes_read = k->numel() * dtype_size(k->dtype);
      if (debug) ck.detail = "    from " + k->srcs[0]->device.str() + " to " + k->device.str() + "\n";
    } else if (c != plan.contractions.end() || e != plan.epilogues.end()) {
      ck.kind = CachedKernel::Kind::Contraction;
      ck.label = "contraction";
      const Node& reduce = e != plan.epilogues.end() ? *e->second : *k;
      const ContractionPlan& cp = plan.contractions.at(&reduce);
      ck.contraction = lower_contraction(cp, reduce, *k);
      ck.a_node = g.local(resolve(cp.x).base.get());
      ck.b_node = g.local(resolve(cp.y).base.get());
      if (e != plan.epilogues.end()) {
        // Note [Epilogue fusion]: this elementwise kernel runs as its contraction's epilogue.
        KernelBuilder b(epilogue_shape(plan.contractions.at(e->second), *e->second), &plan.inlined);
        b.set_accumulator(e->second);
        std::vector<int32_t> ins;
        for (const auto& s : k->srcs) ins.push_back(b.value(s));
        b.emit(abi_op(k->alu), k->dtype, ins);
        if (debug) ck.detail = "    epilogue:\n";
        take_builder(ck, b);
      }
      for (const auto& rd : plan.reads.at(k.get())) ck.bytes_read += rd->numel() * dtype_size(rd->dtype);
    } else {
      const bool is_reduce = k->kind == NodeKind::Reduce;
      ck.label = is_reduce ? "reduce" : k->kind == NodeKind::Copy ? "copy" : "elementwise";
      const Shape& space = is_reduce ? k->srcs[0]->shape : k->shape;
      KernelBuilder b(space, &plan.inlined);
      if (k->kind == NodeKind::Alu) {
        std::vector<int32_t> ins;
        for (const auto& s : k->srcs) ins.push_back(b.value(s));
        b.emit(abi_op(k->alu), k->dtype, ins);
      } else {
        b.value(k->srcs[0]);
      }
      ck.program = b.finish(*k, is_reduce ? static_cast<rvl_reduce_op>(k->reduce) : RVL_REDUCE_NONE,
                            is_reduce ? k->axes : 0);
      take_builder(ck, b);
      for (int32_t i = 0; i < ck.program.n_inputs; ++i) {
        View v = View::contiguous(space);
        v.strides.assign(ck.program.inputs[i].view.strides, ck.program.inputs[i].view.strides + ck.program.rank);
        v.mask = std::vector<Range>(ck.program.rank);
        for (int32_t d = 0; d < ck.program.rank; ++d)
          (*v.mask)[d] = {ck.program.inputs[i].view.valid_lo[d], ck.program.inputs[i].view.valid_hi[d]};
        ck.bytes_read += view_bytes(v, b.bases()[i]->dtype);
      }
    }
    ck.program.inputs = nullptr;  // pointed into the builder; re-aimed at every run
    ck.program.instructions = nullptr;
    r->bytes += sizeof(CachedKernel) + ck.inputs.size() * sizeof(rvl_operand) + ck.detail.size() +
                ck.instructions.size() * sizeof(rvl_instruction) + (ck.reads.size() + ck.input_nodes.size()) * 4;
    r->kernels.push_back(std::move(ck));
  }
  r->bytes += sizeof(Recipe) + r->inlined.size() + r->keep.size() * 4;
  return r;
}

rvl_buffer* bound(Node& n) {
  if (n.kind == NodeKind::Const && !n.buffer) realize_const(n);  // read through padding
  if (!n.buffer) throw InternalError("ravel: kernel input has no buffer (an internal scheduler error; please report it)");
  return n.buffer->handle();
}

// Binds `ck` to the buffers of this graph's nodes and runs it; returns seconds in the plugin.
double run_kernel(const CachedKernel& ck, const std::vector<NodePtr>& locals, Node& out) {
  std::vector<rvl_operand> ins = ck.inputs;
  for (size_t i = 0; i < ins.size(); ++i) ins[i].buffer = bound(*locals[ck.input_nodes[i]]);
  Plugin& plugin = out.buffer->plugin();
  if (ck.kind == CachedKernel::Kind::Transfer) {
    // Through the host: ABI v1 has no device-to-device copy between plugins.
    Node& src = *locals[ck.a_node];
    bound(src);
    std::vector<unsigned char> host(static_cast<size_t>(out.buffer->bytes()));
    const auto t0 = Clock::now();
    src.buffer->read(host.data(), host.size());
    out.buffer->write(host.data(), host.size());
    return since(t0);
  }
  if (ck.kind == CachedKernel::Kind::Program) {
    rvl_program p = ck.program;
    p.inputs = ins.data();
    p.instructions = ck.instructions.data();
    p.output.buffer = out.buffer->handle();
    const auto t0 = Clock::now();
    plugin.check(plugin.api().execute_program(out.device.index(), nullptr, &p), "kernel program");
    return since(t0);
  }
  rvl_contraction c = ck.contraction;
  c.a.buffer = bound(*locals[ck.a_node]);
  c.b.buffer = bound(*locals[ck.b_node]);
  c.c.buffer = out.buffer->handle();
  if (!ck.instructions.empty()) {
    c.n_epilogue_inputs = static_cast<int32_t>(ins.size());
    c.epilogue_inputs = ins.data();
    c.n_epilogue = static_cast<int32_t>(ck.instructions.size());
    c.epilogue = ck.instructions.data();
  }
  RAVEL_CHECK(RAVEL_API_HAS(&plugin.api(), execute_contraction), DeviceError, plugin.name(),
              " does not implement execute_contraction (optional in the ABI); matmul needs it for now");
  const auto t0 = Clock::now();
  plugin.check(plugin.api().execute_contraction(out.device.index(), nullptr, &c), "contraction kernel");
  return since(t0);
}

// Runs a recipe on the nodes `locals`, freeing intermediates after their last reader.
void run_recipe(const Recipe& r, const std::vector<NodePtr>& locals, KernelStats& stats, int debug) {
  std::vector<int32_t> remaining(locals.size(), 0);
  std::vector<uint8_t> made(locals.size(), 0), keep(locals.size(), 0);  // made: given a buffer here
  for (const auto& ck : r.kernels)
    for (int32_t rd : ck.reads) ++remaining[rd];
  for (int32_t k : r.keep) keep[k] = 1;
  auto release_temporaries = [&] {
    for (size_t i = 0; i < locals.size(); ++i)
      if (made[i] && !keep[i]) locals[i]->buffer.reset();
  };
  double exec = 0;
  for (const auto& ck : r.kernels) {
    Node& k = *locals[ck.out];
    if (k.buffer) continue;
    auto plugin = Runtime::get().plugin_for(k.device);
    const uint64_t bytes = static_cast<uint64_t>(k.numel()) * dtype_size(k.dtype);
    k.buffer = std::make_shared<DeviceBuffer>(plugin, k.device.index(), bytes);
    stats.bytes_allocated += static_cast<int64_t>(bytes);
    stats.bytes_written += static_cast<int64_t>(bytes);
    made[ck.out] = 1;
    double dt = 0;
    try {
      dt = run_kernel(ck, locals, k);
    } catch (...) {
      k.buffer.reset();  // never leave a node looking realized with garbage in it
      release_temporaries();
      throw;
    }
    ++(ck.kind == CachedKernel::Kind::Program ? stats.programs
       : ck.kind == CachedKernel::Kind::Contraction ? stats.contractions : stats.transfers);
    if (ck.kind == CachedKernel::Kind::Transfer) stats.bytes_transferred += ck.bytes_read;
    exec += dt;
    stats.bytes_read += ck.bytes_read;
    if (debug >= 1)
      std::fprintf(stderr, "ravel: %-11s %-14s %s -> node %llu  %.1f us\n%s", ck.label, shape_str(k.shape).c_str(),
                   dtype_name(k.dtype), static_cast<unsigned long long>(k.id), dt * 1e6, ck.detail.c_str());
    for (int32_t rd : ck.reads)
      if (--remaining[rd] == 0 && made[rd] && !keep[rd]) locals[rd]->buffer.reset();
  }
  stats.execute_seconds = exec;
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
    const FusionOptions options = fusion_options();
    const bool has_contraction = RAVEL_API_HAS(&plugin0->api(), execute_contraction);
    const bool use_cache = kernel_cache_enabled(options);
    GraphKey g = make_graph_key(order, roots, options, has_contraction);
    std::shared_ptr<const Recipe> recipe = use_cache ? kernel_cache_find(g.key) : nullptr;
    if (recipe) {
      ++stats.cache_hits;
    } else {
      recipe = make_recipe(order, keep, g, options, has_contraction, debug);
      if (use_cache) {
        ++stats.cache_misses;
        kernel_cache_insert(g.key, recipe, options);
      }
    }
    if (debug >= 2) {
      size_t n_inlined = 0, n_contractions = 0;
      for (uint8_t i : recipe->inlined) n_inlined += i;
      for (const auto& k : recipe->kernels) n_contractions += k.kind == CachedKernel::Kind::Contraction;
      std::fprintf(stderr, "ravel: graph cut: %zu nodes -> %zu kernels (%zu inlined, %zu contractions)%s\n",
                   order.size(), recipe->kernels.size(), n_inlined, n_contractions,
                   !use_cache ? "" : stats.cache_hits ? ", kernel cache hit" : ", kernel cache miss");
      for (const auto& n : order)
        std::fprintf(stderr, "  node %llu %s %s%s\n", static_cast<unsigned long long>(n->id),
                     n->kind == NodeKind::Alu ? alu_name(n->alu) : n->kind == NodeKind::Reduce ? reduce_name(n->reduce) : n->kind == NodeKind::Copy ? "copy" : n->kind == NodeKind::Transfer ? "transfer" : "view",
                     shape_str(n->shape).c_str(), recipe->inlined[g.local(n.get())] ? "  (inlined)" : "");
    }
    run_recipe(*recipe, g.locals, stats, debug);
    stats.schedule_seconds = since(t_start) - stats.execute_seconds;
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
  g_total.cache_hits += stats.cache_hits;
  g_total.cache_misses += stats.cache_misses;
  g_total.transfers += stats.transfers;
  g_total.bytes_transferred += stats.bytes_transferred;
}

}  // namespace ravel::detail
