// The fusion planner: decides which nodes get their own buffer (kernel roots) and which are
// computed inside the kernels that consume them (Note [Fusion]).
#pragma once

#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ravel/fusion.hpp"
#include "schedule/contraction.hpp"

namespace ravel::detail {

// A chain of row reductions (ABI 1.11, Note [Row chains in the planner]): its root kernel is
// the epilogue (an Alu root) or the last reduction itself.
struct RowChain {
  std::vector<const Node*> stages;  // earlier reductions, in data-flow order (ACC k: stages[k - 1])
  const Node* reduction = nullptr;  // the program's own reduction (ACC 0 in the epilogue)
  bool epilogue = false;            // the root is an Alu kernel over the rows' space
};

struct KernelPlan {
  std::vector<NodePtr> roots;                          // kernels, in an order that respects data flow
  std::unordered_set<const Node*> inlined;             // Alu nodes evaluated inside their consumers
  std::unordered_map<const Node*, ContractionPlan> contractions;  // Reduce root -> its GEMM
  // The products those contractions consume (sum(x * y)'s multiply): no kernel of their own, and
  // their sources are the GEMM's operands, which must exist as buffers. Such a product is never
  // an epilogue (Note [Absorbed products are no epilogue]).
  std::unordered_set<const Node*> absorbed;
  std::unordered_map<const Node*, std::vector<NodePtr>> reads;    // root -> buffers it reads
  // (full) Alu root -> the contraction (Reduce node) it consumes as its epilogue's ACC; that
  // contraction then runs as part of the root's kernel and gets no buffer.
  std::unordered_map<const Node*, const Node*> epilogues;
  std::unordered_set<const Node*> fused_contractions;  // the values of `epilogues`
  // (full, ABI 1.10) Alu root -> the reduction it reads broadcast over its rows, which then runs
  // in the root's kernel with the root as its row epilogue and gets no buffer
  // (Note [Row epilogue fusion], row_epilogue.cpp).
  std::unordered_map<const Node*, const Node*> row_epilogues;
  // (full, ABI 1.11) root -> the chain of row reductions it runs (row_chain.cpp).
  std::unordered_map<const Node*, RowChain> row_chains;
  // The values of `row_epilogues`, and every reduction and reduced-shape Alu node folded into a
  // chain: computed inside another kernel, no buffer.
  std::unordered_set<const Node*> fused_reductions;
};

// The distinct inputs (not constants) the kernel tree rooted at `root` reads: (buffer, view node)
// pairs, the view node null where the buffer is read in place. Note [Inputs are views].
using InputSet = std::set<std::pair<const Node*, const Node*>>;
InputSet tree_inputs(const Node* root, const KernelPlan& plan);
// Drops every input that reads `base`.
void erase_base(InputSet& inputs, const Node* base);

// Groups reductions with their row epilogues (Note [Row epilogue fusion]); `masks`: per device,
// the reductions it runs with an epilogue (bit (1u << rvl_reduce_op)).
void plan_row_epilogues(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                        const FusionOptions& opt, const std::vector<std::pair<Device, uint32_t>>& masks,
                        KernelPlan& plan);

// Reductions that belong to a row pattern on a device that runs epilogues or chains, which the
// contraction matcher leaves alone (Note [Row reductions are no contractions]).
std::unordered_set<const Node*> row_pattern_reductions(const std::vector<NodePtr>& order,
                                                       const std::vector<std::pair<Device, uint32_t>>& epilogue_ops,
                                                       const std::vector<std::pair<Device, uint32_t>>& chain_ops);

// Builds chains of row reductions (Note [Row chains in the planner]); `epilogue_ops` /
// `chain_ops`: per device, reduce_epilogue_ops / reduce_chain_ops.
void plan_row_chains(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                     const FusionOptions& opt, const std::vector<std::pair<Device, uint32_t>>& epilogue_ops,
                     const std::vector<std::pair<Device, uint32_t>>& chain_ops, KernelPlan& plan);

// `order`: the unrealized nodes in topological order; `keep`: nodes that must get a buffer.
KernelPlan plan_kernels(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                        const FusionOptions& options,
                        int device_has_contraction,  // 0: none; n: groups of <= n axes (ABI 1.8)
                        const std::vector<std::pair<Device, uint32_t>>& row_epilogue_ops = {},
                        const std::vector<std::pair<Device, uint32_t>>& row_chain_ops = {});

}  // namespace ravel::detail
