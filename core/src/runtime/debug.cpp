#include "runtime/debug.hpp"

#include <cstdio>

#include "ravel/tensor.hpp"

namespace ravel::detail {

void print_kernel(const CachedKernel& ck, const Node& k, double dt) {
  std::fprintf(stderr, "ravel: %-11s %-14s %s -> node %llu  %.1f us\n%s", ck.label, shape_str(k.shape).c_str(),
               dtype_name(k.dtype), static_cast<unsigned long long>(k.id), dt * 1e6, ck.detail.c_str());
}

const char* node_label(const Node& n) {
  switch (n.kind) {
    case NodeKind::Alu: return alu_name(n.alu);
    case NodeKind::Reduce: return reduce_name(n.reduce);
    case NodeKind::Copy: return "copy";
    case NodeKind::Transfer: return "transfer";
    case NodeKind::Multi: return "multi";
    case NodeKind::Buffer: case NodeKind::Const: case NodeKind::View: return "view";
  }
  return "?";
}

void print_graph_cut(const std::vector<NodePtr>& order, const Schedule& s) {
  const Recipe& recipe = *s.recipe;
  size_t n_inlined = 0, n_contractions = 0;
  for (uint8_t i : recipe.inlined) n_inlined += i;
  for (const auto& k : recipe.kernels) n_contractions += k.kind == CachedKernel::Kind::Contraction;
  std::fprintf(stderr, "ravel: graph cut: %zu nodes -> %zu kernels (%zu inlined, %zu contractions)%s\n",
               order.size(), recipe.kernels.size(), n_inlined, n_contractions,
               s.cache == Schedule::Cache::Unused ? ""
               : s.cache == Schedule::Cache::Hit  ? ", kernel cache hit"
                                                  : ", kernel cache miss");
  for (const auto& n : order)
    std::fprintf(stderr, "  node %llu %s %s%s\n", static_cast<unsigned long long>(n->id), node_label(*n),
                 shape_str(n->shape).c_str(), recipe.inlined[s.graph.local(n.get())] ? "  (inlined)" : "");
}

}  // namespace ravel::detail
