// Sharded tensors: bundles of per-device parts, and how ops propagate over them
// (Note [Sharded tensors] in sharded.hpp).
#include "tensor/sharded.hpp"

#include <algorithm>

#include "graph/engine.hpp"
#include "graph/grad_mode.hpp"
#include "tensor/internal.hpp"

namespace ravel::detail {

bool is_multi(const Tensor& t) { return t.defined() && t.node()->kind == NodeKind::Multi; }

bool any_multi(const std::vector<Tensor>& ts) {
  return std::any_of(ts.begin(), ts.end(), [](const Tensor& t) { return is_multi(t); });
}

std::vector<Tensor> parts_of(const Tensor& t) {
  if (!is_multi(t)) return {t};
  std::vector<Tensor> out;
  out.reserve(t.node()->srcs.size());
  for (const auto& s : t.node()->srcs) out.emplace_back(s);
  return out;
}

Layout layout_of(const Tensor& t) {
  Layout l;
  if (!is_multi(t)) {
    l.devices = {t.device()};
    return l;
  }
  for (const auto& s : t.node()->srcs) l.devices.push_back(s->device);
  l.axis = t.node()->shard_axis;
  l.bounds = t.node()->shard_bounds;
  if (t.node()->shard_partial >= 0) l.partial = static_cast<CollectiveOp>(t.node()->shard_partial);
  return l;
}

std::vector<int64_t> even_bounds(int64_t size, size_t n) {
  std::vector<int64_t> b(n + 1, 0);
  const auto parts = static_cast<int64_t>(n);
  for (int64_t i = 0; i < parts; ++i) b[i + 1] = b[i] + size / parts + (i < size % parts ? 1 : 0);
  return b;
}

Tensor make_multi(std::vector<Tensor> parts, const Layout& l) {
  RAVEL_CHECK(parts.size() == l.devices.size() && !parts.empty(), InternalError, "make_multi: ", parts.size(),
              " parts for a mesh of ", l.devices.size(), " devices");
  Node proto;
  proto.kind = NodeKind::Multi;
  proto.detached = !grad_mode_enabled();  // Note [No-grad nodes]
  proto.dtype = parts[0].dtype();
  proto.shape = parts[0].shape();
  if (l.axis >= 0) proto.shape[l.axis] = l.bounds.back();
  proto.device = l.devices[0];
  proto.shard_axis = l.axis;
  proto.shard_bounds = l.bounds;
  RAVEL_CHECK(!l.partial || l.axis < 0, InternalError, "make_multi: a partial bundle cannot be split too");
  proto.shard_partial = l.partial ? static_cast<int8_t>(*l.partial) : int8_t{-1};
  for (size_t i = 0; i < parts.size(); ++i) {
    RAVEL_CHECK(parts[i].device() == l.devices[i] && parts[i].dtype() == proto.dtype && !is_multi(parts[i]),
                InternalError, "make_multi: part ", i, " is on ", parts[i].device().str(), " as ",
                dtype_name(parts[i].dtype()), ", expected ", l.devices[i].str(), " as ", dtype_name(proto.dtype));
    proto.srcs.push_back(parts[i].node());
  }
  return Tensor(make_unique_node(std::move(proto)));
}

namespace {

// t's range [lo, hi) of `axis` (t itself when that is all of it).
Tensor cut(const Tensor& t, int64_t axis, int64_t lo, int64_t hi) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (int64_t d = 0; d < t.ndim(); ++d) r.emplace_back(d == axis ? lo : 0, d == axis ? hi : t.shape()[d]);
  return t.shrink(r);
}

}  // namespace

Tensor join(const std::vector<Tensor>& parts, int64_t axis, const Shape& whole, const Device& device) {
  Tensor out;
  int64_t before = 0;
  for (const auto& p : parts) {
    const int64_t len = p.shape()[axis];
    if (len == 0) continue;
    std::vector<std::pair<int64_t, int64_t>> w(whole.size(), {0, 0});
    w[axis] = {before, whole[axis] - before - len};
    Tensor padded = p.to(device).pad(w);
    out = !out.defined() ? padded
                         : Tensor::where(Tensor::ones(p.shape(), DType::Bool, device).pad(w), padded, out);
    before += len;
  }
  return out.defined() ? out : Tensor::zeros(whole, parts[0].dtype(), device);
}

namespace {

Tensor one_device(const Tensor& t, const Device& d) { return is_multi(t) ? multi_to(t, d) : t.to(d); }

// Rows [lo, hi) of `axis` of t, on `device`. A broadcast operand (an expand along that axis: a
// bias, a weight matrix in a matmul's product) is not cut: its source moves and is expanded to the
// part's size there. Cutting the expanded view would move the whole expanded slice and, worse,
// make its gradient a pad of the part back to the full size, summed over the padded rows: the
// weight gradient of a data-parallel matmul would then be an elementwise product written out and
// reduced, where on one device it is one contraction.
Tensor piece_on(const Tensor& t, int32_t axis, int64_t lo, int64_t hi, const Device& device) {
  const Node& n = *t.node();
  if (n.kind == NodeKind::View && n.move == MoveOp::Expand && n.parent) {
    const Tensor source(n.parent);
    const int64_t added = t.ndim() - source.ndim();
    if (axis < added || source.shape()[axis - added] == 1) {
      Shape local = t.shape();
      local[axis] = hi - lo;
      return source.to(device).expand(local);
    }
  }
  return cut(t, axis, lo, hi).to(device);
}

}  // namespace

std::vector<Tensor> parts_in(const Tensor& t, const Layout& l, const Shape& global) {
  if (is_multi(t)) {
    const Layout have = layout_of(t);
    if (have == l) return parts_of(t);
    if (have.partial) {  // Note [Partial results]: a split wanted on the same mesh is a reduce-scatter
      if (l.axis >= 0 && l.devices == have.devices) {
        const auto [op, min] = fold_of(*have.partial);
        return scatter_parts(parts_of(t), l.devices, l.axis, l.bounds, op, min);
      }
      return parts_in(combined(t), l, global);
    }
    if (have.devices != l.devices) return parts_in(multi_to(t, l.devices[0]), l, global);
    if (have.axis >= 0) return parts_in(gathered(t), l, global);
    std::vector<Tensor> replicas = parts_of(t);  // replicas on the right devices: cut locally
    if (l.axis < 0) return replicas;
    for (size_t i = 0; i < replicas.size(); ++i)
      replicas[i] = piece_on(replicas[i], l.axis, l.bounds[i], l.bounds[i + 1], l.devices[i]);
    return replicas;
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < l.devices.size(); ++i) {
    out.push_back(l.axis < 0 ? t.to(l.devices[i]) : piece_on(t, l.axis, l.bounds[i], l.bounds[i + 1], l.devices[i]));
  }
  (void)global;
  return out;
}

bool is_partial(const Tensor& t) { return is_multi(t) && t.node()->shard_partial >= 0; }

std::pair<ReduceOp, bool> fold_of(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::Sum: return {ReduceOp::Sum, false};
    case CollectiveOp::Prod: return {ReduceOp::Prod, false};
    case CollectiveOp::Max: return {ReduceOp::Max, false};
    case CollectiveOp::Min: return {ReduceOp::Max, true};
  }
  return {ReduceOp::Sum, false};
}

Tensor combined(const Tensor& t) {
  if (!is_partial(t)) return t;
  // One all-reduce for every consumer: the composition's nodes are hash-consed anyway, but the
  // plugin's collective runs when it is built and returns fresh leaves each time. Kept only when
  // built with gradients on (a detached combine must not serve a differentiated consumer).
  {
    std::lock_guard<std::recursive_mutex> lock(buffer_mutex());  // Note [Threads]
    if (t.node()->shard_combined) return Tensor(t.node()->shard_combined);
  }
  const auto [op, min] = fold_of(*layout_of(t).partial);
  Tensor r = make_multi(combine_across(parts_of(t), op, min), Layout{layout_of(t).devices, -1, {}, std::nullopt});
  if (grad_mode_enabled()) {
    std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
    if (!t.node()->shard_combined) t.node()->shard_combined = r.node();
    return Tensor(t.node()->shard_combined);
  }
  return r;
}

Tensor gathered(const Tensor& t) {
  if (is_partial(t)) return combined(t);
  if (!is_multi(t) || t.node()->shard_axis < 0) return t;
  Layout l = layout_of(t);
  const std::vector<Tensor> parts = parts_of(t);
  std::vector<Tensor> replicas;
  for (const auto& d : l.devices) replicas.push_back(join(parts, l.axis, t.shape(), d));
  return make_multi(std::move(replicas), Layout{l.devices, -1, {}, std::nullopt});
}

Tensor multi_to(const Tensor& t, const Device& device) {
  const Layout l = layout_of(t);
  const std::vector<Tensor> parts = parts_of(t);
  if (l.partial) {  // a reduce onto `device` (Note [Partial results])
    const auto [op, min] = fold_of(*l.partial);
    return fold_on(parts, device, op, min);
  }
  if (l.axis < 0) {
    for (size_t i = 0; i < parts.size(); ++i)
      if (l.devices[i] == device) return parts[i];
    return parts[0].to(device);
  }
  return join(parts, l.axis, t.shape(), device);
}

Tensor multi_contiguous(const Tensor& t) {
  std::vector<Tensor> parts = parts_of(t);
  for (auto& p : parts) p = p.contiguous();
  return make_multi(std::move(parts), layout_of(t));
}

namespace {

// The layout of `op(srcs)` when the op keeps partial results partial (Note [Partial results]):
// only where the combined result is exactly the op on the combined operands. Empty otherwise.
std::optional<Layout> linear_layout(AluOp op, const std::vector<Tensor>& srcs, DType out) {
  const Tensor* p = nullptr;
  size_t partials = 0;
  for (const auto& s : srcs)
    if (is_partial(s)) p = p ? p : &s, ++partials;
  if (!p || out != p->dtype()) return std::nullopt;
  Layout l = layout_of(*p);
  if (op == AluOp::NEG && srcs.size() == 1) {  // -(a + b) = -a + -b; -max(a, b) = min(-a, -b)
    // The second only for floats: integer negation wraps (-INT_MIN, unsigned), reversing no order.
    if (l.partial == CollectiveOp::Prod || (l.partial != CollectiveOp::Sum && !is_float(out))) return std::nullopt;
    if (l.partial == CollectiveOp::Max) l.partial = CollectiveOp::Min;
    else if (l.partial == CollectiveOp::Min) l.partial = CollectiveOp::Max;
    return l;
  }
  if (l.partial != CollectiveOp::Sum) return std::nullopt;
  if (op == AluOp::ADD) {  // sum partials on one mesh: a_i + b_i sums to a + b
    for (const auto& s : srcs)
      if (!is_partial(s) || layout_of(s) != l) return std::nullopt;
    return l;
  }
  if (op == AluOp::MUL && srcs.size() == 2 && partials == 1) {  // (sum a_i) r = sum (a_i r)
    const Tensor& r = is_partial(srcs[0]) ? srcs[1] : srcs[0];
    if (!is_multi(r) || layout_of(r).axis < 0) return l;  // a replica or one device, not a split
  }
  return std::nullopt;
}

}  // namespace

Tensor multi_alu(AluOp op, const std::vector<Tensor>& srcs, DType out) {
  // The layout of the first split operand, else of the first bundle of replicas (or partial
  // results an op keeps partial; other partial operands are combined, or reduce-scattered to a
  // split operand's layout by parts_in: Note [Partial results]).
  const Tensor* lead = nullptr;
  for (const auto& s : srcs)
    if (!lead && is_multi(s) && s.node()->shard_axis >= 0) lead = &s;
  std::optional<Layout> keep = lead ? std::nullopt : linear_layout(op, srcs, out);
  if (!lead && !keep && std::any_of(srcs.begin(), srcs.end(), [](const Tensor& s) { return is_partial(s); })) {
    std::vector<Tensor> values;
    for (const auto& s : srcs) values.push_back(combined(s));
    return multi_alu(op, values, out);
  }
  for (const auto& s : srcs)
    if (!lead && is_multi(s)) lead = &s;
  const Layout l = keep ? *keep : layout_of(*lead);
  // Operands that are not partial come as replicas on the partial's mesh.
  const Layout others = keep ? Layout{l.devices, -1, {}, std::nullopt} : l;
  std::vector<std::vector<Tensor>> per;
  for (const auto& s : srcs) per.push_back(parts_in(s, is_partial(s) ? l : others, lead->shape()));
  std::vector<Tensor> outs;
  for (size_t i = 0; i < l.devices.size(); ++i) {
    std::vector<Tensor> ins;
    for (const auto& p : per) ins.push_back(p[i]);
    outs.push_back(make_alu(op, std::move(ins), out));
  }
  return make_multi(std::move(outs), l);
}

namespace {

Axes axes_of_mask(int64_t mask) {
  std::vector<int64_t> a;
  for (int64_t d = 0; d < 32; ++d)
    if (mask & (int64_t{1} << d)) a.push_back(d);
  return Axes(a);
}

std::vector<std::pair<int64_t, int64_t>> pairs_of(const std::vector<int64_t>& flat) {
  std::vector<std::pair<int64_t, int64_t>> p;
  for (size_t i = 0; i + 1 < flat.size(); i += 2) p.emplace_back(flat[i], flat[i + 1]);
  return p;
}

// The movement op `op(args)` applied to one part (a tensor on one device).
Tensor apply_move(const Tensor& p, MoveOp op, const std::vector<int64_t>& args) {
  switch (op) {
    case MoveOp::Reshape: return p.reshape(args);
    case MoveOp::Permute: return p.permute(args);
    case MoveOp::Expand: return p.expand(args);
    case MoveOp::Pad: return p.pad(pairs_of(args));
    case MoveOp::Shrink: return p.shrink(pairs_of(args));
    case MoveOp::Flip: return p.flip(axes_of_mask(args.at(0)));
    case MoveOp::Subsample: return p.slice(args.at(0), std::nullopt, std::nullopt, args.at(1));
    default: break;
  }
  throw InternalError("multi_view: not a movement op");
}

Tensor per_part(const Tensor& t, MoveOp op, const std::vector<int64_t>& args, int32_t axis,
                const std::vector<int64_t>& bounds, const std::vector<std::vector<int64_t>>& local_args = {}) {
  Layout l = layout_of(t);
  std::vector<Tensor> parts = parts_of(t);
  for (size_t i = 0; i < parts.size(); ++i) parts[i] = apply_move(parts[i], op, local_args.empty() ? args : local_args[i]);
  l.axis = axis;
  l.bounds = bounds;
  return make_multi(std::move(parts), l);
}

// The lengths of parts given their bounds, and back.
std::vector<int64_t> lengths(const std::vector<int64_t>& b) {
  std::vector<int64_t> n;
  for (size_t i = 0; i + 1 < b.size(); ++i) n.push_back(b[i + 1] - b[i]);
  return n;
}
std::vector<int64_t> bounds_of(const std::vector<int64_t>& len) {
  std::vector<int64_t> b{0};
  for (int64_t n : len) b.push_back(b.back() + n);
  return b;
}

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// Where a reshape of a split tensor keeps every part boundary: the new split axis a' has the same
// number of elements before it, and each part's first element starts a whole run of the axes
// after a'. Returns false when no axis qualifies (the reshape then gathers first).
bool reshape_keeps_split(const Shape& from, int32_t axis, const std::vector<int64_t>& bounds, const Shape& to,
                         int32_t* new_axis, std::vector<int64_t>* new_bounds) {
  const int64_t before = product(from, 0, axis), after = product(from, axis + 1, from.size());
  const int64_t block = from[axis] * after;  // elements of one run of the axis and what follows
  for (size_t a = 0; a < to.size(); ++a) {
    if (product(to, 0, a) != before) continue;
    const int64_t after2 = product(to, a + 1, to.size());
    if (after2 == 0 || to[a] * after2 != block) continue;
    std::vector<int64_t> nb;
    bool ok = true;
    for (int64_t b : bounds) {
      ok = ok && (b * after) % after2 == 0;
      nb.push_back(ok ? b * after / after2 : 0);
    }
    if (!ok) continue;
    *new_axis = static_cast<int32_t>(a);
    *new_bounds = std::move(nb);
    return true;
  }
  return false;
}

}  // namespace

Tensor multi_view(const Tensor& t, MoveOp op, const std::vector<int64_t>& args) {
  const Layout l = layout_of(t);
  // A broadcast of partial results combines them first (Note [Partial results]): the combine then
  // moves the source's bytes, not the broadcast's (softmax's max over a split axis, expanded
  // against the split input, would otherwise be reduce-scattered at the input's size).
  if (l.partial && op == MoveOp::Expand) return multi_view(combined(t), op, args);
  if (l.axis < 0) return per_part(t, op, args, -1, {});
  const int32_t a = l.axis;
  const std::vector<int64_t> len = lengths(l.bounds);
  const size_t n = len.size();
  auto gather_then = [&] { return per_part(gathered(t), op, args, -1, {}); };
  switch (op) {
    case MoveOp::Permute: {
      const auto at = std::find(args.begin(), args.end(), a) - args.begin();
      return per_part(t, op, args, static_cast<int32_t>(at), l.bounds);
    }
    case MoveOp::Reshape: {
      int32_t na = -1;
      std::vector<int64_t> nb;
      if (t.numel() == 0 || !reshape_keeps_split(t.shape(), a, l.bounds, args, &na, &nb)) return gather_then();
      std::vector<std::vector<int64_t>> local(n, args);
      for (size_t i = 0; i < n; ++i) local[i][na] = nb[i + 1] - nb[i];
      return per_part(t, op, args, na, nb, local);
    }
    case MoveOp::Expand: {
      const auto na = static_cast<int32_t>(a + static_cast<int64_t>(args.size()) - t.ndim());
      if (args[na] != t.shape()[a]) return gather_then();
      std::vector<std::vector<int64_t>> local(n, args);
      for (size_t i = 0; i < n; ++i) local[i][na] = len[i];
      return per_part(t, op, args, na, l.bounds, local);
    }
    case MoveOp::Pad: {
      std::vector<std::vector<int64_t>> local(n, args);
      std::vector<int64_t> nl = len;
      for (size_t i = 0; i < n; ++i) {
        local[i][2 * a] = i == 0 ? args[2 * a] : 0;
        local[i][2 * a + 1] = i + 1 == n ? args[2 * a + 1] : 0;
        nl[i] += local[i][2 * a] + local[i][2 * a + 1];
      }
      return per_part(t, op, args, a, bounds_of(nl), local);
    }
    case MoveOp::Shrink: {
      std::vector<std::vector<int64_t>> local(n, args);
      std::vector<int64_t> nl(n);
      for (size_t i = 0; i < n; ++i) {
        const int64_t lo = std::clamp(args[2 * a] - l.bounds[i], int64_t{0}, len[i]);
        const int64_t hi = std::clamp(args[2 * a + 1] - l.bounds[i], lo, len[i]);
        local[i][2 * a] = lo;
        local[i][2 * a + 1] = hi;
        nl[i] = hi - lo;
      }
      return per_part(t, op, args, a, bounds_of(nl), local);
    }
    case MoveOp::Flip:
      if (args.at(0) & (int64_t{1} << a)) return gather_then();
      return per_part(t, op, args, a, l.bounds);
    case MoveOp::Subsample:
      if (args.at(0) == a) return gather_then();
      return per_part(t, op, args, a, l.bounds);
    default: break;
  }
  throw InternalError("multi_view: not a movement op");
}

Tensor multi_alias(const Tensor& t, MoveOp op) {
  std::vector<Tensor> parts = parts_of(t);
  for (auto& p : parts) p = make_alias(p, op);
  return make_multi(std::move(parts), layout_of(t));
}

Tensor multi_reduce(ReduceOp op, const Tensor& t, uint32_t axes, DType out) {
  const Layout l = layout_of(t);
  std::vector<Tensor> parts = parts_of(t);
  auto reduce_part = [&](const Tensor& p) {
    return out == p.dtype() ? make_reduce(op, p, axes) : make_reduce_widening(op, p, axes, out);
  };
  if (l.partial) {  // a sum of sum partials, a max of max partials: per part (Note [Partial results])
    const bool keeps = out == t.dtype() && ((op == ReduceOp::Sum && l.partial == CollectiveOp::Sum) ||
                                            (op == ReduceOp::Max && l.partial == CollectiveOp::Max));
    if (!keeps) return multi_reduce(op, combined(t), axes, out);
    for (auto& p : parts) p = make_reduce(op, p, axes);
    return make_multi(std::move(parts), l);
  }
  const bool over_split = l.axis >= 0 && (axes & (1u << l.axis));
  if (!over_split) {
    for (auto& p : parts) p = reduce_part(p);
    return make_multi(std::move(parts), l);
  }
  // Partial results per part, then combined across devices. An empty part has no partial
  // result to contribute (its reduction would be the identity): only non-empty parts combine.
  std::vector<Tensor> partials;
  std::vector<Device> from;
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].shape()[l.axis] > 0) partials.push_back(reduce_part(parts[i])), from.push_back(l.devices[i]);
  Layout replicas{l.devices, -1, {}, std::nullopt};
  if (partials.size() == parts.size() && (op == ReduceOp::Sum || op == ReduceOp::Max)) {  // Note [Partial results]
    const CollectiveOp by = op == ReduceOp::Sum ? CollectiveOp::Sum : CollectiveOp::Max;
    return make_multi(std::move(partials), Layout{l.devices, -1, {}, by});
  }
  if (partials.empty()) {  // the split axis is empty: every device reduces its own (empty) part
    for (auto& p : parts) p = reduce_part(p);
    return make_multi(std::move(parts), replicas);
  }
  std::vector<Tensor> combined = combine_across(partials, op);
  // combine_across leaves one result per contributing device; devices whose part was empty get
  // a copy of the first result.
  std::vector<Tensor> outs;
  for (const auto& d : l.devices) {
    auto it = std::find(from.begin(), from.end(), d);
    outs.push_back(it != from.end() ? combined[it - from.begin()] : combined[0].to(d));
  }
  return make_multi(std::move(outs), replicas);
}

std::vector<Tensor> split_cotangent(const NodePtr& multi, const Tensor& g) {
  const Tensor m(multi);
  const Layout l = layout_of(m);
  if (l.partial) {  // the combine's derivative: for a sum, g on every part
    const auto [op, min] = fold_of(*l.partial);
    return fold_vjp(parts_of(m), one_device(g, l.devices[0]), op, min);
  }
  if (l.axis < 0) {
    std::vector<Tensor> out(l.devices.size());
    out[0] = one_device(g, l.devices[0]);
    return out;
  }
  return parts_in(g, l, m.shape());
}

Tensor sharded_gradient(const Tensor& x, const std::function<Tensor(const Tensor&)>& part_gradient) {
  const Layout l = layout_of(x);
  std::vector<Tensor> gs;
  for (const auto& p : parts_of(x)) {
    Tensor g = part_gradient(p);
    gs.push_back(g.defined() ? g.cast(p.dtype()) : Tensor::zeros_like(p));
  }
  if (l.axis >= 0) return make_multi(std::move(gs), l);
  if (l.partial) {
    // The value is the parts combined. For a sum each part's gradient is the value's gradient
    // (every consumer combines or stays linear); for max and min the parts' shares add up to it.
    const Layout replicas{l.devices, -1, {}, std::nullopt};
    if (l.partial == CollectiveOp::Sum) return make_multi(std::move(gs), replicas);
    return make_multi(combine_across(gs, ReduceOp::Sum), replicas);
  }
  // Replicas are one value used on every device: its gradient is the sum of theirs, on each.
  return make_multi(combine_across(gs, ReduceOp::Sum), l);
}

}  // namespace ravel::detail
