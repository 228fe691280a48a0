#include "schedule/fusion.hpp"

#include <algorithm>

namespace ravel::detail {

// Note [Fusion]
// Walking the unrealized nodes in topological order, an Alu node is *inlined* (evaluated inside
// each consumer's kernel instead of getting a buffer) when the policy allows fusing into every
// kind of consumer it has, no consumer reads it through a movement view (the kernel would need
// a different index per element; an alias, an identity view, is read in place), it is not a target, and it is used once — or used several
// times but small enough to recompute, counting every extra copy (reduce/full). Each kernel's size is kept within
// max_instructions / max_inputs by turning inlined sources back into buffers, largest first.
// Reduce and Copy nodes always get buffers. A single-use product summed over one axis becomes
// a contraction (reduce/full), whose operands must then be buffers.

namespace {
struct Use {
  int count = 0;
  bool viewed = false;     // some consumer reads it through a View node
  bool by_reduce = false;  // some consumer is a Reduce
};

bool is_kernel(const Node& n) {
  return n.kind == NodeKind::Alu || n.kind == NodeKind::Reduce || n.kind == NodeKind::Copy ||
         n.kind == NodeKind::Transfer;
}
}  // namespace

// Whether every view the kernel tree rooted at `root` loads reshapes to `space` (an epilogue of a
// multi-axis contraction runs over the flattened [batch..., M, N], Note [Implicit im2col]).
bool epilogue_views_flatten(const Node* root, const Shape& space, const KernelPlan& plan) {
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack{root};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const auto& s : n->srcs) {
      Source src = resolve(s);
      if (reads_base_in_place(*s) && plan.inlined.count(src.base.get())) {
        if (seen.insert(src.base.get()).second) stack.push_back(src.base.get());
        continue;
      }
      if (!src.view.reshape(space)) return false;
    }
  }
  return true;
}

// Note [Absorbed products are no epilogue]
// In db = sum over the batch of (tanh'(h) * (dy @ W2^T)), the product is absorbed into the batch
// sum's contraction, whose operands are tanh'(h) and dy @ W2^T. The product is an Alu node that
// reads a contraction, so it looked like an epilogue candidate; made one, dy @ W2^T was planned
// inside a kernel that never runs (the product has none), and the batch sum found its operand
// without a buffer. It showed when a model's gradients were realized one at a time: realized
// together, the product has a second reader (W1's gradient) and is not absorbed. The same
// holds for the row epilogue of a reduction (row_epilogue.cpp).

// Note [Epilogue fusion]
// Under `full`, an elementwise kernel whose only read of a contraction's result is through a
// plain reshape to exactly [batch..., m, n] (the contraction's own output layout) runs as that
// contraction's epilogue: the GEMM accumulator enters the program as ACC and the contraction
// never writes its own buffer. relu(x @ W + b) is then one kernel.
void plan_epilogues(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                    std::unordered_map<const Node*, Use>& uses, KernelPlan& plan) {
  // Every kernel (not just Alu ones) whose inlined tree reads a contraction counts as a reader:
  // with recomputation an inlined node can sit in several kernels, so a contraction read once
  // in the graph may still be read by several kernels, and then it needs its own buffer.
  std::unordered_map<const Node*, int> readers;
  std::unordered_map<const Node*, std::pair<const Node*, NodePtr>> reader;  // C -> (kernel, src read)
  for (const auto& e : order) {
    if (!is_kernel(*e) || plan.inlined.count(e.get())) continue;
    std::unordered_set<const Node*> seen, counted;
    std::vector<const Node*> stack{e.get()};
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      for (const auto& s : n->srcs) {
        const Node* b = resolve(s).base.get();
        if (reads_base_in_place(*s) && plan.inlined.count(b)) {
          if (seen.insert(b).second) stack.push_back(b);
          continue;
        }
        if (!plan.contractions.count(b)) continue;
        if (counted.insert(b).second) ++readers[b];
        reader[b] = {e.get(), s};
        // A reduce or copy cannot be an epilogue, nor can a product a contraction absorbed: its
        // kernel is that contraction, which reads this one as a GEMM operand (Note [Absorbed
        // products are no epilogue]).
        if (e->kind != NodeKind::Alu || plan.absorbed.count(e.get())) readers[b] += 2;
      }
    }
  }
  // An epilogue absorbs one contraction. Only candidates count: a kernel that also reads a
  // contraction stored for other readers (makemore's tanh backward reads x @ W1, which its
  // forward pass reads too) loads that one and may still absorb the other.
  auto candidate = [&](const Node* b) { return readers[b] == 1 && !keep.count(b) && uses[b].count == 1; };
  std::unordered_map<const Node*, int> per_kernel;
  for (auto& [b, r] : reader)
    if (candidate(b)) ++per_kernel[r.first];
  for (auto& [b, r] : reader) {
    const auto& [e, s] = r;
    if (!candidate(b) || per_kernel[e] != 1) continue;
    // The read must be the contraction's output layout, viewed as [batch..., m, n].
    const ContractionPlan& p = plan.contractions.at(b);
    // (Size-1 axes change no layout, and a plan for a device taking several axes per group puts
    // them in no group: compare the others.)
    const bool multi = p.m_axes.size() > 1 || p.n_axes.size() > 1 || p.r_axes.size() > 1;
    std::vector<int64_t> axes, expect;
    for (int64_t d = 0; d < static_cast<int64_t>(b->shape.size()); ++d)
      if (!((b->axes >> d) & 1u) && b->shape[d] != 1) axes.push_back(d);
    for (const auto* g : {&p.batch, &p.m_axes, &p.n_axes})
      for (int64_t d : *g)
        if (b->shape[d] != 1) expect.push_back(d);
    // One of M and N may be empty (extent 1: a depthwise convolution's M = Og = 1), not both.
    if ((p.m_axes.empty() && p.n_axes.empty()) || axes != expect) continue;
    // The epilogue runs over [batch..., m, n]; the kernel's own shape and the view it reads the
    // contraction through may differ from that by size-1 axes only (same layout).
    auto squeezed = [](const Shape& sh) {
      Shape out;
      for (int64_t x : sh)
        if (x != 1) out.push_back(x);
      return out;
    };
    // With several M or N axes the epilogue space flattens them ([batch..., M, N]): compare the
    // unflattened shape here, and every view the epilogue reads must reshape to the flat space.
    Shape full;
    for (const auto* g : {&p.batch, &p.m_axes, &p.n_axes})
      for (int64_t d : *g) full.push_back(b->shape[d]);
    const Shape want = squeezed(multi ? full : epilogue_shape(p, *b));
    StridedView v = resolve(s).view;
    // ABI v1: C has the contraction's dtype, so the epilogue must end in that dtype too.
    if (!v.is_contiguous() || squeezed(v.shape) != want || squeezed(e->shape) != want || e->dtype != b->dtype) continue;
    if (multi && !epilogue_views_flatten(e, epilogue_shape(p, *b), plan)) continue;
    plan.epilogues[e] = b;
    plan.fused_contractions.insert(b);
  }
}

// Note [Inputs are views]
// The kernel builder gives every distinct (buffer, view) a kernel input of its own (a LOAD), so
// the bound on a kernel's inputs counts those pairs, not the distinct buffers: max pooling's tap
// choice reads 12 strided slices of each of three buffers, 36 inputs, where counting buffers saw
// 3 and let the kernel past the plugin's limit of 32 ("input count 36 out of range"). Views are
// hash-consed nodes, so the View node stands for its view (two chains of movement ops that end
// in the same view count twice: an overestimate, which only splits a kernel).
InputSet tree_inputs(const Node* root, const KernelPlan& plan) {
  InputSet inputs;
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack{root};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const auto& s : n->srcs) {
      const Node* b = resolve(s).base.get();
      const bool in_place = reads_base_in_place(*s);
      if (in_place && plan.inlined.count(b)) {
        if (seen.insert(b).second) stack.push_back(b);
      } else if (b->kind != NodeKind::Const) {
        inputs.emplace(b, in_place ? nullptr : s.get());
      }
    }
  }
  return inputs;
}

void erase_base(InputSet& inputs, const Node* base) {
  for (auto it = inputs.lower_bound({base, nullptr}); it != inputs.end() && it->first == base;) it = inputs.erase(it);
}

// Note [Uses inside one kernel]
// The first pass decides producers before consumers, so it counts a value's consumer *nodes*,
// not the kernels they end up in. A value read twice inside one kernel (tanh's e^-2|x|, read by
// 1 - e and 1 + e, both inlined into tanh's kernel; the x of x @ W + b read by four of tanh's
// ops) was then stored for nothing: one more kernel and a write and read of the whole tensor.
// This pass goes consumers first, so the kernels each value would be evaluated in are known:
// a stored value whose consumers all lie in one kernel is inlined there (the kernel builder
// emits a value once per kernel, so no work is repeated), and one read by k kernels falls under
// the recomputation bound with k - 1 extra copies instead of (uses - 1). A root takes a value
// only while it stays within max_instructions and max_inputs.
void inline_by_kernel_count(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                            const std::unordered_set<const Node*>& absorbed,
                            const std::unordered_set<const Node*>& operands,
                            std::unordered_map<const Node*, Use>& uses, std::unordered_map<const Node*, int>& cost,
                            const FusionOptions& opt, KernelPlan& plan) {
  if (opt.policy < FusionPolicy::Elementwise) return;
  std::unordered_map<const Node*, std::vector<const Node*>> consumers;
  for (const auto& k : order)
    if (is_kernel(*k) && !absorbed.count(k.get()))
      for (const auto& s : k->srcs) consumers[resolve(s).base.get()].push_back(k.get());
  // For each inlined node, the kernel roots it is evaluated in.
  std::unordered_map<const Node*, std::vector<const Node*>> roots_of;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node* n = it->get();
    if (!is_kernel(*n) || absorbed.count(n)) continue;
    std::vector<const Node*> roots;
    for (const Node* c : consumers[n]) {
      if (plan.inlined.count(c)) roots.insert(roots.end(), roots_of[c].begin(), roots_of[c].end());
      else roots.push_back(c);
    }
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    if (!plan.inlined.count(n)) {
      const Use& u = uses[n];
      if (n->kind != NodeKind::Alu || keep.count(n) || operands.count(n) || roots.empty() || u.viewed ||
          (u.by_reduce && opt.policy < FusionPolicy::Reduce))
        continue;
      const int64_t k = static_cast<int64_t>(roots.size()), c = cost[n];
      const bool free = k == 1;
      const bool cheap = opt.policy >= FusionPolicy::Reduce && c <= opt.max_recompute_instructions &&
                         c * (k - 1) <= opt.max_recompute_instructions;
      if (!free && !cheap) continue;
      // The first pass's leaf counts repeat shared inputs and constants; count distinct ones.
      InputSet mine = tree_inputs(n, plan);
      bool fits = true;
      for (const Node* r : roots) {
        InputSet both = tree_inputs(r, plan);
        erase_base(both, n);
        both.insert(mine.begin(), mine.end());
        fits = fits && cost[r] + c <= opt.max_instructions && static_cast<int>(both.size()) <= opt.max_inputs;
      }
      if (!fits) continue;
      for (const Node* r : roots) cost[r] += static_cast<int>(c);
      plan.inlined.insert(n);
    }
    roots_of[n] = std::move(roots);
  }
}

KernelPlan plan_kernels(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                        const FusionOptions& opt, int device_has_contraction,
                        const std::vector<std::pair<Device, uint32_t>>& row_epilogue_ops,
                        const std::vector<std::pair<Device, uint32_t>>& row_chain_ops) {
  KernelPlan plan;
  std::unordered_map<const Node*, Use> uses;
  for (const auto& k : order)
    if (is_kernel(*k))
      for (const auto& s : k->srcs) {
        Use& u = uses[resolve(s).base.get()];
        ++u.count;
        // A transfer copies its source's buffer, so the source must have one: never inlined.
        u.viewed = u.viewed || !reads_base_in_place(*s) || k->kind == NodeKind::Transfer;
        u.by_reduce = u.by_reduce || k->kind == NodeKind::Reduce;
      }

  std::unordered_set<const Node*>& absorbed = plan.absorbed;
  std::unordered_set<const Node*> operands;
  // Note [Row reductions are no contractions]
  std::unordered_set<const Node*> row_pattern;
  if (opt.policy >= FusionPolicy::Full) row_pattern = row_pattern_reductions(order, row_epilogue_ops, row_chain_ops);
  if (opt.policy >= FusionPolicy::Reduce && device_has_contraction)
    for (const auto& k : order) {
      if (k->kind != NodeKind::Reduce || row_pattern.count(k.get())) continue;
      auto c = match_contraction(*k, device_has_contraction);
      const Node* mul = k->srcs[0].get();
      if (!c || uses[mul].count != 1 || keep.count(mul)) continue;
      absorbed.insert(mul);
      operands.insert(resolve(c->x).base.get());
      operands.insert(resolve(c->y).base.get());
      plan.contractions.emplace(k.get(), std::move(*c));
    }

  // cost: instructions an inlined node contributes; leaves: input views it may add.
  std::unordered_map<const Node*, int> cost, leaves;
  for (const auto& n : order) {
    if (!is_kernel(*n) || absorbed.count(n.get())) continue;
    // Size of this node's kernel tree, turning over-large inlined sources into buffers.
    int c = 1, l = 0;
    std::vector<const Node*> inl;
    for (const auto& s : n->srcs) {
      const Node* b = resolve(s).base.get();
      if (reads_base_in_place(*s) && plan.inlined.count(b)) inl.push_back(b);
      else ++l;
    }
    std::sort(inl.begin(), inl.end(), [&](const Node* a, const Node* b) { return cost[a] < cost[b]; });
    for (const Node* b : inl) {
      if (c + cost[b] > opt.max_instructions || l + leaves[b] > opt.max_inputs) {
        plan.inlined.erase(b);  // it gets a buffer after all
        ++l;
      } else {
        c += cost[b];
        l += leaves[b];
      }
    }
    cost[n.get()] = c;
    leaves[n.get()] = l;
    if (n->kind != NodeKind::Alu || keep.count(n.get()) || operands.count(n.get())) continue;
    const Use& u = uses[n.get()];
    bool allowed = opt.policy >= FusionPolicy::Elementwise && !u.viewed && u.count >= 1 &&
                   (!u.by_reduce || opt.policy >= FusionPolicy::Reduce);
    // Recomputation adds (uses - 1) copies of the value's instructions; storing it instead costs
    // one write and `uses` reads. The work added is what the limit bounds, so a cheap value read
    // twice (softmax's exp(x - max): sum and normalise) is recomputed, and an expensive one read
    // by many kernels (makemore's tanh layer, 7 readers) is stored once.
    const int64_t added = int64_t(c) * (u.count - 1);
    bool single = u.count == 1 || (opt.policy >= FusionPolicy::Reduce && c <= opt.max_recompute_instructions &&
                                   added <= opt.max_recompute_instructions);
    if (allowed && single) plan.inlined.insert(n.get());
  }

  inline_by_kernel_count(order, keep, absorbed, operands, uses, cost, opt, plan);
  if (opt.policy >= FusionPolicy::Full) plan_epilogues(order, keep, uses, plan);
  if (opt.policy >= FusionPolicy::Full) plan_row_chains(order, keep, opt, row_epilogue_ops, row_chain_ops, plan);
  if (opt.policy >= FusionPolicy::Full) plan_row_epilogues(order, keep, opt, row_epilogue_ops, plan);

  for (const auto& k : order) {
    if (!is_kernel(*k) || absorbed.count(k.get()) || plan.inlined.count(k.get())) continue;
    if (plan.fused_contractions.count(k.get()) || plan.fused_reductions.count(k.get())) continue;
    plan.roots.push_back(k);
    // The buffers this kernel reads: leaves of its inlined tree (or the GEMM operands).
    std::vector<NodePtr>& r = plan.reads[k.get()];
    if (auto it = plan.contractions.find(k.get()); it != plan.contractions.end()) {
      r = {resolve(it->second.x).base, resolve(it->second.y).base};
      continue;
    }
    if (auto e = plan.epilogues.find(k.get()); e != plan.epilogues.end()) {
      const ContractionPlan& c = plan.contractions.at(e->second);
      r = {resolve(c.x).base, resolve(c.y).base};
    }
    std::unordered_set<const Node*> seen;
    std::vector<const Node*> stack{k.get()};
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      for (const auto& s : n->srcs) {
        NodePtr b = resolve(s).base;
        if (!seen.insert(b.get()).second) continue;
        // A fused reduction's reads are its epilogue kernel's (Note [Row epilogue fusion]).
        if ((reads_base_in_place(*s) && plan.inlined.count(b.get())) || plan.fused_reductions.count(b.get()))
          stack.push_back(b.get());
        else if (b->kind != NodeKind::Const && !plan.fused_contractions.count(b.get())) r.push_back(b);
      }
    }
  }
  return plan;
}

}  // namespace ravel::detail
