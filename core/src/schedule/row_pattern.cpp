// Which reductions belong to a row pattern (Note [Row reductions are no contractions]): the
// contraction matcher leaves them to the row planners.
#include <functional>

#include "schedule/row_values.hpp"

namespace ravel::detail {

// Note [Row reductions are no contractions]
// sum((x - mean)^2) over the rows is sum(c * c): a single-use product summed over one axis, so
// the contraction matcher made it a batched GEMM with N = 1 whose operands must be buffers: x -
// mean written and read back in full, and on tbb_cpu about 165 ms of layer norm's 188 ms at
// 4096 x 4096 (docs/performance.md, "Layer norm through the core"). On a device that runs row
// epilogues or chains, a reduction that reads an earlier row value of its own rows through the
// broadcast, or whose value (through Alu nodes over the reduced shape) is read back over its
// rows, is part of a row pattern: it is left to the row planners (Note [Row chains in the
// planner] in row_chain.cpp). Whether a chain then forms or not, its operands are recomputed in
// the reduction's kernel. A device stating neither form keeps the contraction (today's plan).

std::unordered_set<const Node*> row_pattern_reductions(const std::vector<NodePtr>& order,
                                                       const std::vector<std::pair<Device, uint32_t>>& epilogue_ops,
                                                       const std::vector<std::pair<Device, uint32_t>>& chain_ops) {
  std::unordered_set<const Node*> out;
  auto capable = [&](const Device& d) {
    for (const auto* ms : {&epilogue_ops, &chain_ops})
      for (const auto& [dev, m] : *ms)
        if (dev == d && m) return true;
    return false;
  };
  std::unordered_set<const Node*> unrealized;
  // The consumers of each node (View nodes resolved away): (consumer, view it reads, in place).
  std::unordered_map<const Node*, std::vector<Read>> consumers;
  for (const auto& n : order) {
    unrealized.insert(n.get());
    if (n->kind == NodeKind::View) continue;
    for (const auto& s : n->srcs) {
      Source src = resolve(s);
      consumers[src.base.get()].push_back({n.get(), std::move(src.view), reads_base_in_place(*s)});
    }
  }
  // Whether Alu node `v` over the reduced shape reaches a reduction of `rows` through in-place
  // reads of such nodes.
  std::function<bool(const Node*, const Rows&, int)> reaches = [&](const Node* v, const Rows& rows, int depth) {
    if (row_reduction(*v, rows)) return true;
    if (depth > 16 || !unrealized.count(v) || v->kind != NodeKind::Alu || v->shape != rows.reduced) return false;
    for (const auto& s : v->srcs)
      if (reads_base_in_place(*s) && reaches(resolve(s).base.get(), rows, depth + 1)) return true;
    return false;
  };
  for (const auto& r : order) {
    if (r->kind != NodeKind::Reduce || !capable(r->device)) continue;
    const Rows rows = rows_of(*r);
    bool pattern = false;
    // (a) its source reads an earlier row value through the broadcast.
    std::vector<const Node*> stack{r->srcs[0].get()};
    std::unordered_set<const Node*> seen;
    while (!stack.empty() && !pattern && seen.size() < 64) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second || !unrealized.count(n)) continue;
      if (n->kind != NodeKind::Alu || n->shape != rows.space) continue;
      for (const auto& s : n->srcs) {
        Source src = resolve(s);
        const Node* b = src.base.get();
        if (reads_base_in_place(*s)) {
          stack.push_back(b);
        } else if (unrealized.count(b) && row_shaped(*b, rows) && broadcast_over_rows(src.view, rows) &&
                   reaches(b, rows, 0)) {
          pattern = true;
          break;
        }
      }
    }
    // (b) its value, through Alu nodes over the reduced shape, is read back over its rows.
    std::vector<const Node*> fwd{r.get()};
    seen.clear();
    while (!fwd.empty() && !pattern) {
      const Node* v = fwd.back();
      fwd.pop_back();
      if (!seen.insert(v).second || seen.size() > 64) continue;
      for (const auto& c : consumers[v]) {
        if (c.base->kind == NodeKind::Alu && c.in_place && c.base->shape == rows.reduced) fwd.push_back(c.base);
        else if (c.base->kind == NodeKind::Alu && broadcast_over_rows(c.view, rows)) pattern = true;
      }
    }
    if (pattern) out.insert(r.get());
  }
  return out;
}

}  // namespace ravel::detail
