// The fusion planner: decides which nodes get their own buffer (kernel roots) and which are
// computed inside the kernels that consume them (Note [Fusion]).
#pragma once

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ravel/fusion.hpp"
#include "schedule/contraction.hpp"

namespace ravel::detail {

struct KernelPlan {
  std::vector<NodePtr> roots;                          // kernels, in an order that respects data flow
  std::unordered_set<const Node*> inlined;             // Alu nodes evaluated inside their consumers
  std::unordered_map<const Node*, ContractionPlan> contractions;  // Reduce root -> its GEMM
  std::unordered_map<const Node*, std::vector<NodePtr>> reads;    // root -> buffers it reads
  // (full) Alu root -> the contraction (Reduce node) it consumes as its epilogue's ACC; that
  // contraction then runs as part of the root's kernel and gets no buffer.
  std::unordered_map<const Node*, const Node*> epilogues;
  std::unordered_set<const Node*> fused_contractions;  // the values of `epilogues`
};

// `order`: the unrealized nodes in topological order; `keep`: nodes that must get a buffer.
KernelPlan plan_kernels(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                        const FusionOptions& options,
                        int device_has_contraction);  // 0: none; n: groups of <= n axes (ABI 1.8)

}  // namespace ravel::detail
