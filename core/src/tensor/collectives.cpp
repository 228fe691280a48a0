// Collectives between the parts of a sharded tensor, and the public sharding API
// (ravel/sharding.hpp). Every collective is a composition of Transfer nodes and ordinary ops,
// except an all-reduce, reduce-scatter or all-gather that the devices' plugin runs itself (Note
// [Plugin all-reduce] in runtime/plugin_collective.hpp), reached through the Engine.
#include <cmath>
#include <set>
#include <sstream>

#include "graph/engine.hpp"
#include "tensor/custom_vjp.hpp"
#include "tensor/internal.hpp"
#include "tensor/sharded.hpp"

namespace ravel {

using namespace detail;

namespace detail {

namespace {

// Two partial results combined elementwise, in the order (a, b).
Tensor combine2(const Tensor& a, const Tensor& b, ReduceOp op, bool min) {
  switch (op) {
    case ReduceOp::Sum: return a.add(b);
    case ReduceOp::Prod: return a.mul(b);
    case ReduceOp::Max: return min ? a.minimum(b) : a.maximum(b);
    case ReduceOp::LogSumExp: {
      // log(e^a + e^b) = m + log(e^(a-m) + e^(b-m)) with m = max(a, b); m itself where m is
      // infinite (both -inf, or one +inf), where the formula would give NaN.
      Tensor m = a.maximum(b);
      Tensor r = m + ((a - m).exp() + (b - m).exp()).log();
      return Tensor::where(m.abs() == INFINITY, m, r);
    }
  }
  throw InternalError("combine2: unknown reduction");
}

}  // namespace

// All parts folded on `device` in mesh order (the same order on every device, so that replicas
// of a floating-point sum are bitwise equal).
Tensor fold_on(const std::vector<Tensor>& parts, const Device& device, ReduceOp op, bool min) {
  Tensor acc = parts[0].to(device);
  for (size_t j = 1; j < parts.size(); ++j) acc = combine2(acc, parts[j].to(device), op, min);
  return acc;
}

// Note [Plugin all-reduce gradients]
// The plugin's all-reduce returns realized leaves; each result k gets, as its derivative rule,
// the chain rule through the fold it stands for, acc_0 = x_0, acc_j = combine2(acc_{j-1}, x_j)
// on result k's device, step by step with the primitives' own rules (ADD: g to both; MUL: g
// times the other; MAX: to the larger, half each on a tie, Note [Gradient of max]; MIN as the
// core's minimum, -max(-a, -b)). So gradients are those of the composition it replaces, to any
// order (the rule is built from tensor ops); for a sum, each part receives g moved to its device,
// and summing over the results is the all-reduce of the cotangents.
std::vector<Tensor> fold_vjp(const std::vector<Tensor>& xs, const Tensor& g, ReduceOp op, bool min) {
  const Device home = g.device();
  std::vector<Tensor> x;
  for (const auto& t : xs) x.push_back(t.to(home));
  std::vector<Tensor> acc{x[0]};
  for (size_t j = 1; j < x.size(); ++j) acc.push_back(combine2(acc.back(), x[j], op, min));
  std::vector<Tensor> grads(x.size());
  Tensor ga = g;
  for (size_t j = x.size() - 1; j >= 1; --j) {
    const Tensor& a = acc[j - 1];
    const Tensor& b = x[j];
    switch (op) {
      case ReduceOp::Sum: grads[j] = ga; break;
      case ReduceOp::Prod: grads[j] = ga * a, ga = ga * b; break;
      default: {
        const Tensor wins = min ? a.lt(b) : a.gt(b);
        Tensor w = Tensor::where(wins, Tensor::ones_like(ga), Tensor::where(a.eq(b), Tensor::full_like(ga, 0.5), Tensor::zeros_like(ga)));
        grads[j] = ga * (Tensor::ones_like(w) - w);
        ga = ga * w;
      }
    }
  }
  grads[0] = ga;
  for (size_t j = 0; j < x.size(); ++j) grads[j] = grads[j].to(xs[j].device());
  return grads;
}

namespace {

// The plugin's all-reduce of `parts` (Note [Plugin all-reduce]), with the fold's derivative;
// empty where the Engine does not take it.
std::vector<Tensor> plugin_combine(const std::vector<Tensor>& parts, ReduceOp op, bool min) {
  std::vector<NodePtr> nodes;
  for (const auto& p : parts) nodes.push_back(p.node());
  std::vector<NodePtr> r = engine().plugin_all_reduce(nodes, op, min);
  std::vector<Tensor> out;
  if (r.empty()) return out;
  auto rule = std::make_shared<CustomRule>();
  rule->name = "all_reduce";
  rule->vjp = [op, min](const std::vector<Tensor>& xs, const Tensor&, const Tensor& g) { return fold_vjp(xs, g, op, min); };
  for (const NodePtr& n : r)
    out.push_back(is_float(parts[0].dtype()) ? with_custom_vjp(Tensor(n), parts, rule) : Tensor(n));
  return out;
}

// Note [Plugin reduce-scatter and all-gather]
// The user's reduce_scatter and all_gather of a tensor split along `axis` go to the plugin's
// members (ABI 1.12) under Note [Plugin all-reduce]'s switch and threshold when the slices are
// whole chunks of the flat parts: every axis before `axis` has size 1 and the split is even
// (the ABI's chunks are equal and contiguous; any other split is the composition's, which
// slices views). Their results are realized leaves given derivative rules in tensor ops:
//  - reduce-scatter result k stands for the fold of slice k of every part on device k, so its
//    rule is fold_vjp over those slices, each gradient padded with zeros back to its part's
//    shape; summed over the results, each part's gradient is the cotangents of every result
//    side by side (for a sum: the all-gather of the cotangents, the adjoint NCCL users know);
//  - all-gather result k is the parts side by side on device k, so part j's gradient from it is
//    slice j of the cotangent moved to part j's device; summed over the results, that is the
//    reduce-scatter (sum) of the cotangents.
// So gradients are those of the composition, to any order, with or without the member.

// Whether slice k of n along `axis` of `shape` is chunk k of the flat tensor, n equal chunks.
bool flat_chunks(const Shape& shape, int64_t axis, size_t n) {
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) return false;
  for (int64_t d = 0; d < axis; ++d)
    if (shape[d] != 1) return false;
  return shape[axis] % static_cast<int64_t>(n) == 0;
}

// [b[k], b[k + 1]) along `axis`, everything of the other axes.
std::vector<std::pair<int64_t, int64_t>> slice_ranges(const Shape& shape, int64_t axis, int64_t lo, int64_t hi) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) r.emplace_back(d == axis ? lo : 0, d == axis ? hi : shape[d]);
  return r;
}

std::vector<NodePtr> nodes_of(const std::vector<Tensor>& parts) {
  std::vector<NodePtr> nodes;
  for (const auto& p : parts) nodes.push_back(p.node());
  return nodes;
}

// The plugin's reduce-scatter of `parts` along `axis` (bounds b), with the fold's derivative;
// empty where the Engine does not take it.
std::vector<Tensor> plugin_reduce_scatter(const std::vector<Tensor>& parts, int64_t axis, const std::vector<int64_t>& b,
                                          ReduceOp op, bool min) {
  if (!flat_chunks(parts[0].shape(), axis, parts.size())) return {};
  Shape out_shape = parts[0].shape();
  out_shape[axis] = b[1] - b[0];
  std::vector<NodePtr> r = engine().plugin_reduce_scatter(nodes_of(parts), op, min, out_shape);
  std::vector<Tensor> out;
  for (size_t k = 0; k < r.size(); ++k) {
    if (!is_float(parts[0].dtype())) {
      out.emplace_back(r[k]);
      continue;
    }
    auto rule = std::make_shared<CustomRule>();
    rule->name = "reduce_scatter";
    rule->vjp = [op, min, axis, lo = b[k], hi = b[k + 1]](const std::vector<Tensor>& xs, const Tensor&, const Tensor& g) {
      std::vector<Tensor> slices;
      for (const auto& x : xs) slices.push_back(x.shrink(slice_ranges(x.shape(), axis, lo, hi)));
      std::vector<Tensor> grads = fold_vjp(slices, g, op, min);
      for (size_t j = 0; j < xs.size(); ++j) {
        std::vector<std::pair<int64_t, int64_t>> widths(xs[j].shape().size(), {0, 0});
        widths[axis] = {lo, xs[j].shape()[axis] - hi};
        grads[j] = grads[j].pad(widths);
      }
      return grads;
    };
    out.push_back(with_custom_vjp(Tensor(r[k]), parts, rule));
  }
  return out;
}

}  // namespace

// Note [Plugin reduce-scatter and all-gather]: slices b[k]..b[k+1] along `axis` of every part,
// folded in mesh order on devices[k]: by the plugin where it takes it (equal bounds), else the
// composition.
std::vector<Tensor> scatter_parts(const std::vector<Tensor>& parts, const std::vector<Device>& devices, int64_t axis,
                                  const std::vector<int64_t>& b, ReduceOp op, bool min) {
  bool equal = true;
  for (size_t k = 0; k + 1 < b.size(); ++k) equal = equal && b[k + 1] - b[k] == b[1] - b[0];
  if (equal)
    if (std::vector<Tensor> r = plugin_reduce_scatter(parts, axis, b, op, min); !r.empty()) return r;
  std::vector<Tensor> outs;
  for (size_t k = 0; k < parts.size(); ++k) {
    std::vector<Tensor> slices;
    for (const auto& p : parts) slices.push_back(p.shrink(slice_ranges(p.shape(), axis, b[k], b[k + 1])));
    outs.push_back(fold_on(slices, devices[k], op, min));
  }
  return outs;
}

namespace {

// The plugin's all-gather of `parts` (split along `axis` by bounds b) into `shape` on every
// device, with the copy's derivative; empty where the Engine does not take it.
std::vector<Tensor> plugin_all_gather(const std::vector<Tensor>& parts, int64_t axis, const std::vector<int64_t>& b,
                                      const Shape& shape) {
  if (!flat_chunks(shape, axis, parts.size())) return {};
  for (size_t k = 0; k + 1 < b.size(); ++k)
    if (b[k + 1] - b[k] != b[1] - b[0]) return {};
  std::vector<NodePtr> r = engine().plugin_all_gather(nodes_of(parts), shape);
  std::vector<Tensor> out;
  if (r.empty()) return out;
  // Note [Group derivatives]: all n results' cotangents at once are one reduce-scatter (sum),
  // the plugin's where it takes it; each result's own rule remains for the tape.
  auto group = std::make_shared<GroupRule>();
  group->name = "all_gather";
  group->size = r.size();
  group->vjp = [axis, b](const std::vector<Tensor>& xs, const std::vector<Tensor>& gs) {
    std::vector<Tensor> cot;
    std::vector<Device> devices;
    for (size_t k = 0; k < xs.size(); ++k) devices.push_back(xs[k].device());
    for (size_t k = 0; k < gs.size(); ++k) {
      Shape whole = xs[0].shape();
      whole[axis] = b.back();
      cot.push_back(gs[k].defined() ? gs[k] : Tensor::zeros(whole, xs[0].dtype(), devices[k]));
    }
    return scatter_parts(cot, devices, axis, b, ReduceOp::Sum, false);
  };
  for (size_t k = 0; k < r.size(); ++k) {
    if (!is_float(parts[0].dtype())) {
      out.emplace_back(r[k]);
      continue;
    }
    auto rule = std::make_shared<CustomRule>();
    rule->name = "all_gather";
    rule->vjp = [axis, b](const std::vector<Tensor>& xs, const Tensor&, const Tensor& g) {
      std::vector<Tensor> grads;
      for (size_t j = 0; j < xs.size(); ++j)
        grads.push_back(g.shrink(slice_ranges(g.shape(), axis, b[j], b[j + 1])).to(xs[j].device()));
      return grads;
    };
    rule->group = group;
    rule->member = k;
    out.push_back(with_custom_vjp(Tensor(r[k]), parts, rule));
  }
  return out;
}

// Above this many elements a combine over more than two devices goes in chunks (tinygrad's
// threshold for its ring all-reduce): below it, latency dominates and one step is best.
constexpr int64_t kChunkedElements = 256 * 1024;

}  // namespace

std::vector<Tensor> combine_across(const std::vector<Tensor>& parts, ReduceOp op, bool min) {
  const size_t n = parts.size();
  std::vector<Device> devices;
  for (const auto& p : parts) devices.push_back(p.device());
  std::vector<Tensor> out;
  const int64_t elems = parts[0].numel();
  if (elems == 0) {
    for (const auto& d : devices) out.push_back(Tensor::zeros(parts[0].shape(), parts[0].dtype(), d));
    return out;
  }
  if (std::vector<Tensor> r = plugin_combine(parts, op, min); !r.empty()) return r;
  if (n <= 2 || elems < kChunkedElements) {
    for (const auto& d : devices) out.push_back(fold_on(parts, d, op, min));
    return out;
  }
  // Reduce-scatter then all-gather: device k reduces chunk k of every part, then every device
  // collects the reduced chunks. Each device sends and receives (n-1)/n of the data twice, the
  // same bytes per link as a ring, with no chain of n-1 dependent steps (the mesh of host or
  // NVLink-switched devices is fully connected; docs/sharding.md).
  const std::vector<int64_t> b = even_bounds(elems, n);
  std::vector<Tensor> flat;
  for (const auto& p : parts) flat.push_back(p.reshape({elems}));
  std::vector<Tensor> reduced;
  for (size_t k = 0; k < n; ++k) {
    std::vector<Tensor> chunk;
    for (const auto& f : flat) chunk.push_back(f.shrink({{b[k], b[k + 1]}}));
    reduced.push_back(fold_on(chunk, devices[k], op, min));
  }
  for (const auto& d : devices) {
    out.push_back(join(reduced, 0, {elems}, d).reshape(parts[0].shape()));
  }
  return out;
}

// Note [Summed in pieces]
// A gradient bucket (Note [Replica gradient buckets]) is summed across devices and then read as
// pieces, one per parameter, each by that parameter's update. Summed whole, the sum is its own
// kernel on every device (its five readers keep it from fusing into any one of them): in the
// 2-device makemore step 8-9 us per device thread for 12k floats, mostly its launch
// (docs/performance.md §6, 2026-12-07, helper mk2dev2). Where the combine is the fold (no plugin
// collective, two devices or a short bucket), each piece is folded on its own from slices of the
// parts moved whole (one transfer per pair of devices, as before): each piece's sum is then an
// elementwise expression that fuses into its reader; the slices take the piece's shape before
// they are added (an addition of flat slices reshaped after it was its own kernel again). The
// same additions in the same order, so bitwise the whole sum's slices. Elsewhere the whole
// combine is sliced.
std::vector<std::vector<Tensor>> combine_across_in_pieces(const std::vector<Tensor>& parts,
                                                          const std::vector<std::pair<int64_t, Shape>>& pieces,
                                                          ReduceOp op) {
  const size_t n = parts.size();
  std::vector<std::vector<Tensor>> out(pieces.size());
  std::vector<Tensor> whole;
  const int64_t elems = parts[0].numel();
  if (elems == 0 || parts[0].ndim() != 1) {
    whole = combine_across(parts, op);
  } else if (std::vector<Tensor> r = plugin_combine(parts, op, false); !r.empty()) {
    whole = std::move(r);
  } else if (n > 2 && elems >= kChunkedElements) {
    whole = combine_across(parts, op);
  }
  auto piece = [&](const Tensor& flat, size_t m) {
    const auto& [offset, shape] = pieces[m];
    int64_t size = 1;
    for (int64_t d : shape) size *= d;
    return flat.shrink({{offset, offset + size}}).reshape(shape);
  };
  if (!whole.empty()) {
    for (size_t m = 0; m < pieces.size(); ++m)
      for (size_t k = 0; k < n; ++k) out[m].push_back(piece(whole[k], m));
    return out;
  }
  for (size_t k = 0; k < n; ++k) {
    const Device d = parts[k].device();
    std::vector<Tensor> moved;  // fold_on's operands on device k, each moved once
    for (const auto& p : parts) moved.push_back(p.to(d));
    for (size_t m = 0; m < pieces.size(); ++m) {
      Tensor acc = piece(moved[0], m);
      for (size_t j = 1; j < n; ++j) acc = combine2(acc, piece(moved[j], m), op, false);
      out[m].push_back(acc);
    }
  }
  return out;
}

}  // namespace detail

std::string Sharding::str() const {
  std::ostringstream os;
  if (partial) {
    static const char* const names[] = {"sum", "max", "min", "prod"};
    os << "partial " << names[static_cast<int>(*partial)] << " over ";
    for (size_t i = 0; i < devices.size(); ++i) os << (i ? ", " : "") << devices[i].str();
    return os.str();
  }
  if (!axis) {
    os << "replicated over ";
    for (size_t i = 0; i < devices.size(); ++i) os << (i ? ", " : "") << devices[i].str();
    return os.str();
  }
  os << "split axis " << *axis << " over ";
  for (size_t i = 0; i < devices.size(); ++i)
    os << (i ? ", " : "") << devices[i].str() << " [" << bounds[i] << ", " << bounds[i + 1] << ")";
  return os.str();
}

namespace {

void check_mesh(const std::vector<Device>& devices, const char* op) {
  RAVEL_CHECK(!devices.empty(), DeviceError, op, ": expected at least one device in the mesh, got none");
  // Pairwise: a mesh is a few devices, and shard_batch checks one at every step of a training
  // loop (a set of their names cost allocations per device and call).
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device& d = devices[i];
    engine().check_device(d);  // unknown devices fail here, naming the available ones
    for (size_t j = 0; j < i; ++j)
      RAVEL_CHECK(!(devices[j] == d), DeviceError, op, ": device ", d.str(),
                  " appears twice in the mesh (expected distinct devices)");
  }
}

ReduceOp reduce_of(CollectiveOp op) { return fold_of(op).first; }

// The per-device values of t: its parts, which must all have one shape.
std::vector<Tensor> device_values(const Tensor& t, const char* op) {
  check_defined(t, op);
  std::vector<Tensor> parts = parts_of(t);
  for (const auto& p : parts)
    RAVEL_CHECK(p.shape() == parts[0].shape(), ShapeError, op, ": the parts of a tensor ",
                t.sharding() ? t.sharding()->str() : std::string("on one device"), " differ in shape (",
                shape_str(parts[0].shape()), " and ", shape_str(p.shape()), "); expected axis ",
                layout_of(t).axis, " of size ", t.shape()[layout_of(t).axis], " to divide evenly by ", parts.size(),
                " devices");
  return parts;
}

}  // namespace

Tensor Tensor::shard(const std::vector<Device>& devices, int64_t axis) const {
  check_defined(*this, "shard");
  check_mesh(devices, "shard");
  const auto a = static_cast<int32_t>(normalize_axis(axis, ndim(), "shard"));
  if (devices.size() == 1) return to(devices[0]);
  const Layout l{devices, a, even_bounds(shape()[a], devices.size()), std::nullopt};
  Tensor r = make_multi(parts_in(*this, l, shape()), l);
  if (!is_multi(*this)) r.node()->shard_source = node();  // Note [Inputs split inside the step]
  return r;
}

Tensor Tensor::replicate(const std::vector<Device>& devices) const {
  check_defined(*this, "replicate");
  check_mesh(devices, "replicate");
  if (devices.size() == 1) return to(devices[0]);
  const Layout l{devices, -1, {}, std::nullopt};
  return make_multi(parts_in(*this, l, shape()), l);
}

std::optional<Sharding> Tensor::sharding() const {
  check_defined(*this, "sharding");
  if (!is_multi(*this)) return std::nullopt;
  const Layout l = layout_of(*this);
  Sharding s;
  s.devices = l.devices;
  if (l.axis >= 0) s.axis = l.axis, s.bounds = l.bounds;
  s.partial = l.partial;
  return s;
}

std::vector<Tensor> Tensor::shards() const {
  check_defined(*this, "shards");
  return parts_of(*this);
}

Tensor all_reduce(const Tensor& t, CollectiveOp op) {
  std::vector<Tensor> parts = device_values(t, "all_reduce");
  if (parts.size() == 1) return parts[0];
  std::vector<Tensor> r = combine_across(parts, reduce_of(op), op == CollectiveOp::Min);
  return make_multi(std::move(r), Layout{layout_of(t).devices, -1, {}, std::nullopt});
}

Tensor all_gather(const Tensor& t) {
  check_defined(t, "all_gather");
  if (is_multi(t) && t.node()->shard_axis >= 0) {
    const Layout l = layout_of(t);
    if (std::vector<Tensor> r = plugin_all_gather(parts_of(t), l.axis, l.bounds, t.shape()); !r.empty())
      return make_multi(std::move(r), Layout{l.devices, -1, {}, std::nullopt});
  }
  return gathered(t);
}

Tensor reduce_scatter(const Tensor& t, CollectiveOp op) {
  std::vector<Tensor> parts = device_values(t, "reduce_scatter");
  if (parts.size() == 1) return parts[0];
  const Layout l = layout_of(t);
  const int32_t axis = l.axis >= 0 ? l.axis : 0;
  RAVEL_CHECK(parts[0].ndim() > 0, ShapeError, "reduce_scatter: a scalar cannot be split");
  // Part k of the result: slice k of every device's value, reduced on device k.
  const std::vector<int64_t> b = even_bounds(parts[0].shape()[axis], parts.size());
  return make_multi(scatter_parts(parts, l.devices, axis, b, reduce_of(op), op == CollectiveOp::Min),
                    Layout{l.devices, axis, b, std::nullopt});
}

Tensor reduce(const Tensor& t, const Device& device, CollectiveOp op) {
  std::vector<Tensor> parts = device_values(t, "reduce");
  engine().check_device(device);
  return fold_on(parts, device, reduce_of(op), op == CollectiveOp::Min);
}

Tensor broadcast(const Tensor& t, const std::vector<Device>& devices) { return t.replicate(devices); }
Tensor scatter(const Tensor& t, const std::vector<Device>& devices, int64_t axis) { return t.shard(devices, axis); }
Tensor gather(const Tensor& t, const Device& device) { return t.to(device); }

}  // namespace ravel
