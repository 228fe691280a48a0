// realize_nodes: walk the graph iteratively, plan kernels, run them, free temporaries early.
#include <unordered_map>
#include <unordered_set>

#include "ravel/runtime.hpp"
#include "runtime/plugin.hpp"
#include "schedule/contraction.hpp"
#include "schedule/kernel_builder.hpp"

namespace ravel::detail {

Source resolve(const NodePtr& n) {
  if (n->kind == NodeKind::View) return {n->srcs[0], n->view};
  return {n, View::contiguous(n->shape)};
}

namespace {

bool is_kernel(const Node& n) {
  return n.kind == NodeKind::Alu || n.kind == NodeKind::Reduce || n.kind == NodeKind::Copy;
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

// The nodes whose buffers kernel `n` reads.
std::vector<NodePtr> reads(const Node& n, const std::optional<ContractionPlan>& plan) {
  std::vector<NodePtr> out;
  if (plan) {
    out.push_back(resolve(plan->x).base);
    out.push_back(resolve(plan->y).base);
  } else {
    for (const auto& s : n.srcs) out.push_back(resolve(s).base);
  }
  return out;
}

void run_program(Node& k) {
  KernelBuilder b(k.kind == NodeKind::Reduce ? k.srcs[0]->shape : k.shape);
  rvl_reduce_op reduce = RVL_REDUCE_NONE;
  if (k.kind == NodeKind::Alu) {
    std::vector<int32_t> ins;
    for (const auto& s : k.srcs) ins.push_back(b.load(s));
    b.emit(alu_info(k.alu).code, k.dtype, ins);
  } else {
    b.load(k.srcs[0]);
    if (k.kind == NodeKind::Reduce) reduce = static_cast<rvl_reduce_op>(k.reduce);
  }
  const rvl_program& prog = b.finish(k, reduce, k.kind == NodeKind::Reduce ? k.axes : 0);
  Plugin& plugin = k.buffer->plugin();
  plugin.check(plugin.api().execute_program(k.device.index(), nullptr, &prog), "kernel program");
}

}  // namespace

void realize_nodes(const std::vector<NodePtr>& targets) {
  std::vector<NodePtr> roots;
  std::unordered_set<const Node*> keep;
  for (const auto& t : targets) {
    NodePtr b = resolve(t).base;
    if (b->kind == NodeKind::Const) realize_const(*b);
    keep.insert(b.get());
    roots.push_back(b);
  }
  std::vector<NodePtr> order = topo_order(roots);

  // Plan: which reductions become contractions, absorbing their (single-use) product.
  std::unordered_map<const Node*, int> readers;
  for (const auto& k : order)
    if (is_kernel(*k))
      for (const auto& s : k->srcs) ++readers[resolve(s).base.get()];
  std::unordered_map<const Node*, ContractionPlan> plans;
  std::unordered_set<const Node*> absorbed;
  for (const auto& k : order) {
    if (k->kind != NodeKind::Reduce) continue;
    auto plan = match_contraction(*k);
    if (!plan) continue;
    const Node* mul = k->srcs[0].get();
    auto plugin = Runtime::get().plugin_for(k->device);
    if (readers[mul] != 1 || keep.count(mul) || !RAVEL_API_HAS(&plugin->api(), execute_contraction)) continue;
    absorbed.insert(mul);
    plans.emplace(k.get(), std::move(*plan));
  }
  std::unordered_map<const Node*, int> remaining;
  for (const auto& k : order) {
    if (!is_kernel(*k) || absorbed.count(k.get())) continue;
    auto it = plans.find(k.get());
    for (const auto& r : reads(*k, it == plans.end() ? std::nullopt : std::optional(it->second))) ++remaining[r.get()];
  }

  std::unordered_set<const Node*> made;  // nodes this call gave a buffer
  for (const auto& k : order) {
    if (!is_kernel(*k) || absorbed.count(k.get()) || k->buffer) continue;
    auto plugin = Runtime::get().plugin_for(k->device);
    k->buffer = std::make_shared<DeviceBuffer>(plugin, k->device.index(),
                                               static_cast<uint64_t>(k->numel()) * dtype_size(k->dtype));
    made.insert(k.get());
    auto it = plans.find(k.get());
    try {
      if (it != plans.end()) run_contraction(it->second, *k);
      else run_program(*k);
    } catch (...) {
      k->buffer.reset();  // never leave a node looking realized with garbage in it
      for (const auto& m : order)
        if (made.count(m.get()) && !keep.count(m.get())) m->buffer.reset();
      throw;
    }
    auto plan = it == plans.end() ? std::nullopt : std::optional(it->second);
    for (const auto& r : reads(*k, plan))
      if (--remaining[r.get()] == 0 && made.count(r.get()) && !keep.count(r.get())) r->buffer.reset();
  }
}

}  // namespace ravel::detail
