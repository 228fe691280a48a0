#include "schedule/contraction.hpp"

#include "schedule/kernel_builder.hpp"

#include <algorithm>

namespace ravel::detail {

namespace {

int64_t contraction_extent(const Shape& s, const std::vector<int64_t>& axes) {
  int64_t e = 1;
  for (int64_t a : axes) e *= s[a];
  return e;
}

// The axes of one group after merging neighbours that are adjacent in every listed stride set
// (stride[a] == stride[b] * extent[b]): returned as (extent, stride per set) runs.
struct ContractionRun {
  int64_t extent;
  std::vector<int64_t> strides;
};

std::vector<ContractionRun> contraction_runs(const Shape& s, const std::vector<int64_t>& axes,
                                             const std::vector<const std::vector<int64_t>*>& sets) {
  std::vector<ContractionRun> runs;
  for (int64_t a : axes) {
    std::vector<int64_t> st;
    for (const auto* set : sets) st.push_back((*set)[a]);
    if (!runs.empty()) {
      ContractionRun& last = runs.back();
      bool adjacent = true;
      for (size_t i = 0; i < st.size(); ++i) adjacent &= last.strides[i] == st[i] * s[a];
      if (adjacent) {
        last.extent *= s[a];
        for (size_t i = 0; i < st.size(); ++i) last.strides[i] = st[i];
        continue;
      }
    }
    runs.push_back({s[a], st});
  }
  return runs;
}

// Note [Leading axes as a broadcast batch]
// A convolution's result is [N, O, out...]: N is an axis of the input's window only (an N axis
// by the rule above), O one of the weight's (M), out... the window's again. In that order the
// groups interleave (n, m, n) and C could not see N as one stride, so conv computed [O, N,
// out...] and returned the permuted view: an activation applied to it read the contraction
// through a permutation, which no epilogue can, and ran as a kernel of its own (relu(conv2d)
// 2 ms at 32x64x28x28, docs/performance.md §8). So M or N axes in front of the output are made
// batch axes, with stride 0 in the operand that does not vary along them (a broadcast batch,
// which the contraction's operand views express as they are), as long as they precede a batch
// axis or an axis of the other group that a later axis of their own group follows: exactly the
// cases the order check below would refuse. Then C is [batch..., m, n] in the node's own layout,
// the result is NCHW, and bias + relu are the contraction's epilogue (Note [Epilogue fusion]).
void leading_axes_as_batch(ContractionPlan& p) {
  for (;;) {
    const bool m_first = !p.m_axes.empty() && (p.n_axes.empty() || p.m_axes.front() < p.n_axes.front());
    std::vector<int64_t>& x = m_first ? p.m_axes : p.n_axes;
    const std::vector<int64_t>& y = m_first ? p.n_axes : p.m_axes;
    if (x.empty()) return;
    const int64_t d = x.front();
    const bool before_batch = !p.batch.empty() && p.batch.back() > d;
    const bool split = !y.empty() && x.back() > y.front();
    if (!before_batch && !split) return;
    x.erase(x.begin());
    p.batch.insert(std::upper_bound(p.batch.begin(), p.batch.end(), d), d);
  }
}

}  // namespace

Shape epilogue_shape(const ContractionPlan& p, const Node& reduce) {
  Shape s;
  for (int64_t b : p.batch) s.push_back(reduce.shape[b]);
  s.push_back(contraction_extent(reduce.shape, p.m_axes));
  s.push_back(contraction_extent(reduce.shape, p.n_axes));
  return s;
}

// Note [Implicit im2col]
// A convolution is sum over (c, kh, kw) of w[o, c, kh, kw] * x[n, c, oh*s + kh*d, ow*s + kw*d]:
// a GEMM whose K is three axes of the window view with three unrelated strides, and whose N is
// (n, oh, ow). The 1.0 contraction has one stride per M, K and N, so conv copied the window
// into an im2col matrix (9x the input for 3x3) before the GEMM. ABI 1.8 (im2col block) lets
// each group be several axes with a stride per axis and operand; the plugin's packer reads the
// window view in place (tbb_cpu: gemm_pack_window.cpp). Groups are merged first wherever their
// axes are adjacent in both operands (at stride 1 conv's wide rows make (oh, ow) one run), so
// the common case sends few axes. C keeps one stride per M and N: it is the reduce's
// contiguous output, so its groups always merge when they are in order [batch..., m..., n...],
// which the matcher requires. Devices without the form (contraction_axes <= 1) get the old
// matching rules unchanged, and conv keeps its im2col copy for them (nn/conv.cpp).
std::optional<ContractionPlan> match_contraction(const Node& reduce, int max_axes) {
  if (reduce.kind != NodeKind::Reduce || reduce.reduce != ReduceOp::Sum) return std::nullopt;
  // Halves: tbb_cpu widens a half contraction's A and B to f32 through their 1.0 views
  // (Note [Halves in f32]), so they keep the 1.0 form.
  const bool multi = max_axes > 1 && !is_half(reduce.dtype);
  if (!multi && __builtin_popcount(reduce.axes) != 1) return std::nullopt;
  if (reduce.axes == 0) return std::nullopt;
  const NodePtr& mul = reduce.srcs[0];
  if (mul->kind != NodeKind::Alu || mul->alu != AluOp::MUL || mul->buffer) return std::nullopt;
  ContractionPlan p;
  p.x = mul->srcs[0];
  p.y = mul->srcs[1];
  Source sx = resolve(p.x), sy = resolve(p.y);
  if (sx.view.has_mask() || sy.view.has_mask()) return std::nullopt;
  const Shape& s = mul->shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  for (int64_t d = 0; d < rank; ++d) {
    if ((reduce.axes >> d) & 1u) {
      // The 1.0 form keeps its one summed axis whatever its extent (k may be 1 or 0).
      if (!multi || s[d] != 1) p.r_axes.push_back(d);
      continue;
    }
    bool vx = sx.view.strides[d] != 0 && s[d] > 1, vy = sy.view.strides[d] != 0 && s[d] > 1;
    if (vx && !vy) p.m_axes.push_back(d);
    else if (vy && !vx) p.n_axes.push_back(d);
    else if (!multi || s[d] != 1) p.batch.push_back(d);
  }
  if (!multi && (p.m_axes.size() > 1 || p.n_axes.size() > 1)) return std::nullopt;
  // Note [Dot products are reductions]: neither an M nor an N axis means C is a batch of dot
  // products (BatchNorm's sum((x - mean) * g) over [N, H, W] per channel). Summed over several
  // axes, only the multi-axis form takes it, and a multi-axis GEMM has nothing to reuse there
  // (m = n = 1: every element of A and B is read once, for one MAC) while it packs per batch
  // element; the reduce kernel streams the product at memory speed. In the Fashion-MNIST CNN
  // step six such [1, C, 1, 1] sums took 9-10 ms each as contractions and take about 1 ms each
  // as fused reductions (docs/performance.md §8). Over one summed axis the 1.0 form keeps it
  // (tbb_cpu runs N = 1 through its dot-product path, bitwise one lane of its GEMM kernel).
  if (p.m_axes.empty() && p.n_axes.empty() && p.r_axes.size() > 1) return std::nullopt;
  if (multi && (!p.m_axes.empty() || !p.n_axes.empty())) {
    leading_axes_as_batch(p);
    // Moved to the batch, nothing may be left of M and N: a batch of dot products stays the
    // reduction it was refused as before (Note [Dot products are reductions]).
    if (p.m_axes.empty() && p.n_axes.empty()) return std::nullopt;
  }
  // Canonical order: m before n, so that C's [.., m, n] iteration follows the node's layout and
  // an epilogue can run over it (x * y is commutative; swapping the operands transposes C).
  if (!p.m_axes.empty() && !p.n_axes.empty() && p.m_axes.front() > p.n_axes.front()) {
    std::swap(p.x, p.y);
    std::swap(p.m_axes, p.n_axes);
    std::swap(sx, sy);
  }
  if (!multi) return p;
  if (p.batch.size() > RVL_MAX_RANK - 2) return std::nullopt;
  // Several axes: C (contiguous, the reduce's shape) must see M and N as one stride each, so the
  // groups must be in order batch < m < n with only summed axes between a group's members.
  auto ordered = [](const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
    return lo.empty() || hi.empty() || lo.back() < hi.front();
  };
  if (!ordered(p.m_axes, p.n_axes) || !ordered(p.batch, p.m_axes) || !ordered(p.batch, p.n_axes))
    return std::nullopt;
  auto contiguous_in_out = [&](const std::vector<int64_t>& g) {
    for (size_t i = 1; i < g.size(); ++i)
      for (int64_t d = g[i - 1] + 1; d < g[i]; ++d)
        if (!((reduce.axes >> d) & 1u) && s[d] != 1) return false;
    return true;
  };
  if (!contiguous_in_out(p.m_axes) || !contiguous_in_out(p.n_axes)) return std::nullopt;
  const auto& xs = sx.view.strides;
  const auto& ys = sy.view.strides;
  const size_t limit = static_cast<size_t>(std::min(max_axes, RVL_MAX_RANK));
  if (contraction_runs(s, p.m_axes, {&xs}).size() > limit || contraction_runs(s, p.n_axes, {&ys}).size() > limit ||
      contraction_runs(s, p.r_axes, {&xs, &ys}).size() > limit)
    return std::nullopt;
  return p;
}

rvl_contraction lower_contraction(const ContractionPlan& p, const Node& reduce, const Node& out) {
  Source sx = resolve(p.x), sy = resolve(p.y);
  const Shape& s = sx.view.shape;
  const auto out_strides = StridedView::contiguous_strides(reduce.shape);
  const auto& xs = sx.view.strides;
  const auto& ys = sy.view.strides;
  // Each group as runs of merged axes; a group of one run (or none) is the 1.0 form.
  const auto m_runs = contraction_runs(s, p.m_axes, {&xs, &out_strides});
  const auto n_runs = contraction_runs(s, p.n_axes, {&ys, &out_strides});
  const auto k_runs = contraction_runs(s, p.r_axes, {&xs, &ys});
  // C's stride per group: its innermost axis's (the groups are contiguous in C, see the matcher).
  auto out_stride = [&](const std::vector<int64_t>& g) { return g.empty() ? 0 : out_strides[g.back()]; };
  auto one = [](const std::vector<ContractionRun>& runs, size_t set) {
    return runs.size() == 1 ? runs[0].strides[set] : 0;  // several: the 1.8 members carry them
  };

  rvl_contraction c{};
  c.struct_size = sizeof(rvl_contraction);
  c.dtype = static_cast<int32_t>(reduce.dtype);
  c.batch_rank = static_cast<int32_t>(p.batch.size());
  c.m = contraction_extent(s, p.m_axes);
  c.n = contraction_extent(s, p.n_axes);
  c.k = p.r_axes.empty() ? 1 : contraction_extent(s, p.r_axes);
  // Operand views are [batch..., row, col]; see rvl_contraction. Buffer handles are bound later.
  auto operand = [&](DType dtype, const std::vector<int64_t>& st, int64_t offset, int64_t row, int64_t col,
                     int64_t rows, int64_t cols) {
    const size_t nb = p.batch.size();
    StridedView v{Shape(nb + 2), std::vector<int64_t>(nb + 2), offset, {}};
    for (size_t b = 0; b < nb; ++b) v.shape[b] = s[p.batch[b]], v.strides[b] = st[p.batch[b]];
    v.shape[nb] = rows, v.strides[nb] = row;
    v.shape[nb + 1] = cols, v.strides[nb + 1] = col;
    return make_operand(dtype, v);
  };
  c.a = operand(sx.base->dtype, xs, sx.view.offset, one(m_runs, 0), one(k_runs, 0), c.m, c.k);
  c.b = operand(sy.base->dtype, ys, sy.view.offset, one(k_runs, 1), one(n_runs, 0), c.k, c.n);
  c.c = operand(out.dtype, out_strides, 0, out_stride(p.m_axes), out_stride(p.n_axes), c.m, c.n);
  for (size_t b = 0; b < p.batch.size(); ++b) c.batch_shape[b] = s[p.batch[b]];
  auto group = [](const std::vector<ContractionRun>& runs, int32_t& rank, int64_t* shape,
                  std::initializer_list<std::pair<size_t, int64_t*>> strides) {
    if (runs.size() <= 1) return;
    rank = static_cast<int32_t>(runs.size());
    for (size_t i = 0; i < runs.size(); ++i) {
      shape[i] = runs[i].extent;
      for (auto [set, dst] : strides) dst[i] = runs[i].strides[set];
    }
  };
  group(m_runs, c.m_rank, c.m_shape, {{0, c.a_m_strides}});
  group(n_runs, c.n_rank, c.n_shape, {{0, c.b_n_strides}});
  group(k_runs, c.k_rank, c.k_shape, {{0, c.a_k_strides}, {1, c.b_k_strides}});
  return c;
}

}  // namespace ravel::detail
