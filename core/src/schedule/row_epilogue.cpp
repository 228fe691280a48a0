// The planner's grouping of a reduction with the elementwise kernel that reads its result
// broadcast back over the same rows (ABI 1.10, the "row epilogue").
#include <algorithm>

#include "schedule/fusion.hpp"

namespace ravel::detail {

// Note [Row epilogue fusion]
// softmax is lse = logsumexp(x) over the last axis (a Reduce root), then e^(x - lse) (an Alu
// root over x's shape that reads lse broadcast along that axis). As two kernels, x is read from
// memory twice. Under `full`, on a device whose reduce_epilogue_ops has the reduction, the
// elementwise root E becomes the *epilogue* of the reduction R: one program whose instruction
// list computes R's values, whose epilogue list is E's tree with every read of R an ACC, and
// whose output is E's buffer. R gets no buffer (as a contraction fused into its epilogue,
// Note [Epilogue fusion]), and the device runs a block of rows at a time while they are in
// cache (plugins/tbb_cpu/row_epilogue.cpp). Conditions, each needed for the rewrite to be exact:
//  - E's iteration space is R's (E->shape == R's source shape), and every read of R inside E's
//    kernel is the plain broadcast of R: stride 0 on the reduced axes, R's own contiguous
//    strides on the others, no offset, no mask. ACC is "the reduced value of this element's
//    row", which is exactly that view and no other.
//  - R is read by no other kernel and is not a target (it will never exist in memory).
//  - same device; R is no contraction; the two lists together stay within max_inputs.
// A kernel reading several reductions this way (layer norm's mean and variance) absorbs one;
// the others are loaded as before.

namespace {

// (Named apart from fusion.cpp's is_kernel: the core is a unity build.)
bool runs_as_kernel(const Node& n) {
  return n.kind == NodeKind::Alu || n.kind == NodeKind::Reduce || n.kind == NodeKind::Copy ||
         n.kind == NodeKind::Transfer;
}

// Whether `v` (a read over `space`) is R broadcast along its reduced axes.
bool is_row_broadcast(const StridedView& v, const Node& r, const Shape& space) {
  if (v.shape != space || v.offset != 0 || v.has_mask() || r.shape.size() != space.size()) return false;
  const std::vector<int64_t> cs = StridedView::contiguous_strides(r.shape);
  for (size_t d = 0; d < space.size(); ++d) {
    const bool reduced = (r.axes >> d) & 1u;
    if (reduced ? r.shape[d] != 1 : r.shape[d] != space[d]) return false;
    if (space[d] != 1 && v.strides[d] != (reduced ? 0 : cs[d])) return false;
  }
  return true;
}

// The reads of Reduce roots by kernel `e`'s inlined tree: (reduction, whether every read is a
// row broadcast over e's shape).
std::vector<std::pair<const Node*, bool>> reduction_reads(const Node* e, const KernelPlan& plan) {
  std::vector<std::pair<const Node*, bool>> out;
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack{e};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const auto& s : n->srcs) {
      Source src = resolve(s);
      const Node* b = src.base.get();
      if (reads_base_in_place(*s) && plan.inlined.count(b)) {
        if (seen.insert(b).second) stack.push_back(b);
        continue;
      }
      if (b->kind != NodeKind::Reduce || plan.inlined.count(b)) continue;
      const bool ok = is_row_broadcast(src.view, *b, e->shape);
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == b; });
      if (it == out.end()) out.emplace_back(b, ok);
      else it->second = it->second && ok;
    }
  }
  return out;
}

}  // namespace

void plan_row_epilogues(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                        const FusionOptions& opt, const std::vector<std::pair<Device, uint32_t>>& masks,
                        KernelPlan& plan) {
  if (masks.empty()) return;
  auto mask_of = [&](const Device& d) {
    for (const auto& [dev, m] : masks)
      if (dev == d) return m;
    return 0u;
  };
  // How many kernels read each reduction (with recomputation an inlined reader may sit in
  // several), and each kernel's reads of reductions.
  std::unordered_map<const Node*, int> readers;
  std::vector<std::pair<const Node*, std::vector<std::pair<const Node*, bool>>>> kernels;
  for (const auto& k : order) {
    if (!runs_as_kernel(*k) || plan.inlined.count(k.get())) continue;
    auto reads = reduction_reads(k.get(), plan);
    for (const auto& rd : reads) ++readers[rd.first];
    kernels.emplace_back(k.get(), std::move(reads));
  }
  for (const auto& [e, reads] : kernels) {
    // (An absorbed product runs as its contraction: Note [Absorbed products are no epilogue].)
    if (e->kind != NodeKind::Alu || plan.epilogues.count(e) || plan.absorbed.count(e)) continue;
    if (plan.row_chains.count(e) || plan.fused_reductions.count(e)) continue;  // in a chain (row_chain.cpp)
    for (const auto& [r, ok] : reads) {
      if (!ok || readers[r] != 1 || keep.count(r) || plan.contractions.count(r) || r->device != e->device) continue;
      if (plan.fused_reductions.count(r) || e->shape != r->srcs[0]->shape) continue;
      if (!((mask_of(r->device) >> static_cast<uint32_t>(r->reduce)) & 1u)) continue;
      InputSet in_e = tree_inputs(e, plan), in_r = tree_inputs(r, plan);
      erase_base(in_e, r);
      if (static_cast<int>(in_e.size() + in_r.size()) > opt.max_inputs) continue;
      plan.row_epilogues[e] = r;
      plan.fused_reductions.insert(r);
      break;
    }
  }
}

}  // namespace ravel::detail
