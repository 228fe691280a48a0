// The planner's chains of row reductions (ABI 1.11): layer norm, RMS norm and their kin as one
// kernel, with the per-row scalar work between the reductions folded into the lists that read it.
// Which reductions stay out of the contraction matcher for them: row_pattern.cpp.
#include <algorithm>
#include <optional>

#include "schedule/row_values.hpp"

namespace ravel::detail {

// Note [Row chains in the planner]
// Layer norm is mean = sum(x) / n, inv = 1 / sqrt(sum((x - mean)^2) / n + eps), then
// y = (x - mean) * inv * w + b. The two divisions, the + eps, sqrt and 1 / are Alu nodes over the
// *reduced* shape [rows, 1], read back through a broadcast over the rows: as kernels of their
// own (that is what a viewed node gets, Note [Fusion]) they are stored, so no kernel reads a
// reduction directly and Note [Row epilogue fusion] never applied. Here, under `full`, on a
// device that states the reductions in rvl_device_properties.reduce_chain_ops (or, for a single
// reduction, reduce_epilogue_ops), a kernel K over the rows' space S (an Alu root: the
// epilogue; or a reduction of those rows: a chain without epilogue) gathers its *row values*:
//  - a reduction R of the same rows (R's source has shape S, the same reduced axes of extent
//    > 1, the same device), read by a list over S through the plain broadcast of R (stride 0 on
//    the reduced axes, R's own contiguous strides elsewhere, no offset, no mask);
//  - an Alu node V over the reduced shape, read likewise, whose sources (read in place) are
//    constants, row values, or Alu nodes of the same kind. V is then not stored: every list
//    that reads it recomputes its few scalar ops from ACC (the device computes a row-uniform
//    value once per row, Note [Row-uniform hoisting] in plugins/tbb_cpu/row_uniform.hpp);
//  - recursively, the row values read by the gathered reductions' own lists (the variance's
//    sum reads the mean).
// The reductions, in data-flow order, are the chain: the last is the program's own reduction
// when K is an epilogue (the others its stages, ACC k = stage k - 1, ACC 0 = the own value),
// and all are stages when K is a reduction. Nothing gathered may be needed anywhere else: a row
// value that is a target, or read by any kernel outside the chain, or read in any way but the
// broadcast (or in place, from another row value), is *stored* by its own kernel as before and
// the chain LOADs it through its broadcast like any input (folding stops there). So a value is
// never computed twice in different kernels, and one needed elsewhere costs the write and the
// read it costs today; the chain still saves the passes it can. (Rejected: recomputing a stored
// value inside the chain too, which reads x once more from memory to save one small load.)
// The form is `full` only (as Note [Row epilogue fusion]); a device stating neither mask, or
// lacking one reduction of the chain, gets today's kernels. A single reduction read directly,
// with no folded node, is left to Note [Row epilogue fusion] (the same program).

namespace {

bool chain_kernel(const Node& n) {
  return n.kind == NodeKind::Alu || n.kind == NodeKind::Reduce || n.kind == NodeKind::Copy ||
         n.kind == NodeKind::Transfer;
}

// The non-constant bases kernel `k`'s inlined tree reads, and a contraction's GEMM operands
// (read as matrices: never as a row value).
std::vector<Read> kernel_reads(const Node* k, const KernelPlan& plan) {
  std::vector<Read> out;
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack{k};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const auto& s : n->srcs) {
      Source src = resolve(s);
      const Node* b = src.base.get();
      const bool in_place = reads_base_in_place(*s);
      if (in_place && plan.inlined.count(b)) {
        if (seen.insert(b).second) stack.push_back(b);
      } else if (b->kind != NodeKind::Const) {
        out.push_back({b, std::move(src.view), in_place});
      }
    }
  }
  if (auto c = plan.contractions.find(k); c != plan.contractions.end()) {
    out.push_back({resolve(c->second.x).base.get(), StridedView{}, false});
    out.push_back({resolve(c->second.y).base.get(), StridedView{}, false});
  }
  return out;
}

}  // namespace

void plan_row_chains(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                     const FusionOptions& opt, const std::vector<std::pair<Device, uint32_t>>& epilogue_ops,
                     const std::vector<std::pair<Device, uint32_t>>& chain_ops, KernelPlan& plan) {
  if (epilogue_ops.empty() && chain_ops.empty()) return;
  auto mask_of = [](const std::vector<std::pair<Device, uint32_t>>& ms, const Device& d) {
    for (const auto& [dev, m] : ms)
      if (dev == d) return m;
    return 0u;
  };
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i].get()] = i;
  // Every kernel's reads, and each base's readers (kernel, read).
  std::vector<const Node*> kernels;
  std::unordered_map<const Node*, std::vector<Read>> reads;
  std::unordered_map<const Node*, std::vector<std::pair<const Node*, const Read*>>> readers;
  for (const auto& k : order)
    if (chain_kernel(*k) && !plan.inlined.count(k.get()) && !plan.absorbed.count(k.get())) {
      kernels.push_back(k.get());
      reads[k.get()] = kernel_reads(k.get(), plan);
    }
  for (const Node* k : kernels)
    for (const Read& rd : reads[k]) readers[rd.base].push_back({k, &rd});
  // A node that may be folded into some chain at all.
  auto available = [&](const Node* b) {
    return position.count(b) && reads.count(b) && !keep.count(b) && !plan.contractions.count(b) &&
           !plan.fused_reductions.count(b) && !plan.fused_contractions.count(b) && !plan.epilogues.count(b) &&
           !plan.row_chains.count(b);
  };

  for (auto it = kernels.rbegin(); it != kernels.rend(); ++it) {
    const Node* K = *it;
    if (plan.fused_reductions.count(K) || plan.row_chains.count(K) || plan.epilogues.count(K) ||
        plan.fused_contractions.count(K) || plan.contractions.count(K))
      continue;
    // The rows: K's own if it is a reduction, else those of the first reduction a broadcast read
    // of K's leads to.
    std::optional<Rows> rows;
    if (K->kind == NodeKind::Reduce) {
      rows = rows_of(*K);
    } else if (K->kind == NodeKind::Alu) {
      std::vector<const Node*> stack;
      for (const Read& rd : reads[K])
        if (!rd.in_place) stack.push_back(rd.base);
      std::unordered_set<const Node*> seen;
      while (!stack.empty() && !rows) {
        const Node* b = stack.back();
        stack.pop_back();
        if (!seen.insert(b).second || !available(b)) continue;
        if (b->kind == NodeKind::Reduce && b->srcs[0]->shape == K->shape &&
            b->device == K->device)
          rows = rows_of(*b);
        else if (b->kind == NodeKind::Alu && b->shape.size() == K->shape.size())
          for (const Read& rd : reads[b])
            if (rd.in_place) stack.push_back(rd.base);
      }
    }
    if (!rows) continue;
    if (K->kind == NodeKind::Alu && K->shape != rows->space) continue;
    // Gather the candidates (Note [Row chains in the planner]).
    std::unordered_set<const Node*> chain, impure;
    std::vector<const Node*> work{K};
    while (!work.empty()) {
      const Node* t = work.back();
      work.pop_back();
      const bool over_space = t == K || t->kind == NodeKind::Reduce;
      for (const Read& rd : reads[t]) {
        const Node* b = rd.base;
        const bool good = available(b) && row_shaped(*b, *rows) &&
                          (over_space ? broadcast_over_rows(rd.view, *rows) : rd.in_place);
        if (!good) {
          // A row value may load a stored one of the reduced shape (read in place: the lists
          // load it through the broadcast); any other read makes it no row value.
          if (!over_space && !(rd.in_place && b->shape == rows->reduced)) impure.insert(t);
          continue;
        }
        if (chain.insert(b).second) work.push_back(b);
      }
    }
    // Drop what is needed elsewhere, and what depends on a dropped value, until nothing changes.
    for (bool changed = true; changed;) {
      changed = false;
      for (auto c = chain.begin(); c != chain.end();) {
        bool bad = impure.count(*c) > 0;
        for (const auto& [k, rd] : readers[*c]) {
          if (bad) break;
          const bool over_space = k == K || k->kind == NodeKind::Reduce;
          bad = (k != K && !chain.count(k)) || (over_space ? !broadcast_over_rows(rd->view, *rows) : !rd->in_place);
        }
        if (bad) {
          c = chain.erase(c);
          changed = true;
        } else {
          ++c;
        }
      }
    }
    std::vector<const Node*> reductions;
    int folded_alu = 0;
    for (const Node* c : chain) {
      if (c->kind == NodeKind::Reduce) reductions.push_back(c);
      else ++folded_alu;
    }
    std::sort(reductions.begin(), reductions.end(), [&](const Node* a, const Node* b) { return position[a] < position[b]; });
    RowChain rc;
    if (K->kind == NodeKind::Alu) {
      if (reductions.empty() || (reductions.size() == 1 && folded_alu == 0)) continue;  // row_epilogue.cpp's
      rc.reduction = reductions.back();
      rc.stages.assign(reductions.begin(), reductions.end() - 1);
      rc.epilogue = true;
    } else {
      if (reductions.empty()) continue;
      rc.reduction = K;
      rc.stages = reductions;
    }
    if (rc.stages.size() > RVL_MAX_REDUCE_STAGES || folded_alu > opt.max_instructions) continue;
    // The device must take every reduction of the chain (ABI 1.11), or the one with its
    // epilogue (1.10).
    const uint32_t need_bits = [&] {
      uint32_t m = 1u << static_cast<uint32_t>(rc.reduction->reduce);
      for (const Node* s : rc.stages) m |= 1u << static_cast<uint32_t>(s->reduce);
      return m;
    }();
    const uint32_t have = rc.stages.empty() ? mask_of(epilogue_ops, K->device) : mask_of(chain_ops, K->device);
    if ((have & need_bits) != need_bits) continue;
    // Distinct inputs of all the lists together.
    InputSet inputs = tree_inputs(K, plan);  // (buffer, view) pairs, as the builder loads them
    for (const Node* r : reductions) {
      InputSet more = tree_inputs(r, plan);
      inputs.insert(more.begin(), more.end());
    }
    for (const Node* c : chain) erase_base(inputs, c);
    if (static_cast<int>(inputs.size()) > opt.max_inputs) continue;
    for (const Node* c : chain) plan.fused_reductions.insert(c);
    if (K->kind == NodeKind::Reduce) plan.fused_reductions.erase(K);
    plan.row_chains[K] = std::move(rc);
  }

  // Note [Values only a chain reads]: a stored Alu value over the rows' space whose every
  // reader lies in one chain (its program's or stages' lists, or its epilogue) and reads it in
  // place was stored only because it is read twice (the lists of that one kernel) and costs more
  // than the recomputation bound: layer norm's backward computes g = dy * w * rstd + ... and then
  // sum(-g) with g + sum(-g) / n as the epilogue. Written and read back, g costs a full pass over
  // memory; inlined, the kernel computes it twice per element from what it reads anyway. When g
  // is itself the epilogue of a chain, that chain's reductions become stages of this one.
  auto chain_rows = [&](const RowChain& c) { return rows_of(*c.reduction); };
  for (auto it = kernels.rbegin(); it != kernels.rend(); ++it) {
    const Node* K = *it;
    auto kc = plan.row_chains.find(K);
    if (kc == plan.row_chains.end()) continue;
    const Rows rows = chain_rows(kc->second);
    std::vector<const Node*> members{K, kc->second.reduction};
    members.insert(members.end(), kc->second.stages.begin(), kc->second.stages.end());
    auto member = [&](const Node* k) { return std::find(members.begin(), members.end(), k) != members.end(); };
    std::unordered_set<const Node*> tried;
    for (const Node* m : members)
      for (const Read& rd : reads[m]) {
        const Node* X = rd.base;
        if (!tried.insert(X).second || X->kind != NodeKind::Alu || X->shape != rows.space || X->device != rows.device ||
            !position.count(X) || !reads.count(X) || keep.count(X) || plan.inlined.count(X) || plan.epilogues.count(X) ||
            plan.fused_contractions.count(X) || plan.fused_reductions.count(X) || plan.row_epilogues.count(X))
          continue;
        bool only_here = true;
        for (const auto& [k, r] : readers[X]) only_here = only_here && member(k) && r->in_place;
        if (!only_here) continue;
        RowChain merged = kc->second;
        auto xc = plan.row_chains.find(X);
        if (xc != plan.row_chains.end()) {
          const Rows xr = chain_rows(xc->second);
          if (!xc->second.epilogue || xr.space != rows.space || xr.axes != rows.axes) continue;
          merged.stages.insert(merged.stages.end(), xc->second.stages.begin(), xc->second.stages.end());
          merged.stages.push_back(xc->second.reduction);
          std::sort(merged.stages.begin(), merged.stages.end(),
                    [&](const Node* a, const Node* b) { return position[a] < position[b]; });
          uint32_t bits = 1u << static_cast<uint32_t>(merged.reduction->reduce);
          for (const Node* st : merged.stages) bits |= 1u << static_cast<uint32_t>(st->reduce);
          if (merged.stages.size() > RVL_MAX_REDUCE_STAGES || (mask_of(chain_ops, K->device) & bits) != bits) continue;
        }
        InputSet inputs = tree_inputs(K, plan);
        for (const Node* r : merged.stages) {
          InputSet more = tree_inputs(r, plan);
          inputs.insert(more.begin(), more.end());
        }
        InputSet more = tree_inputs(merged.reduction, plan), mine = tree_inputs(X, plan);
        inputs.insert(more.begin(), more.end());
        inputs.insert(mine.begin(), mine.end());
        erase_base(inputs, X);
        for (auto in = inputs.begin(); in != inputs.end();)
          in = plan.fused_reductions.count(in->first) ? inputs.erase(in) : std::next(in);
        if (static_cast<int>(inputs.size()) > opt.max_inputs) continue;
        if (xc != plan.row_chains.end()) plan.row_chains.erase(xc);
        plan.inlined.insert(X);
        kc->second = std::move(merged);
        break;  // one per chain: the members changed
      }
  }
}

}  // namespace ravel::detail
