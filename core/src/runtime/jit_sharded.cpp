// ravel::Jit over sharded tensors (Note [Sharded Jit] in jit_sharded.hpp).
#include "runtime/jit_sharded.hpp"

#include <charconv>
#include <string>

#include "tensor/internal.hpp"

namespace ravel::detail {

namespace {

// A tensor's layout, or an empty one (no devices) for a tensor on one device.
Layout layout_or_none(const Tensor& t) { return is_multi(t) ? layout_of(t) : Layout{}; }

void append_number(std::string& s, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

size_t part_count(const Layout& l) { return l.devices.empty() ? 1 : l.devices.size(); }

// The tensor `t` (a bundle) was split from (Note [Inputs split inside the step]), or an
// undefined one.
Tensor split_source(const Tensor& t) {
  const NodePtr& source = t.node()->shard_source;  // set by Tensor::shard only
  if (!source || t.node()->shard_axis < 0 || t.node()->shard_partial >= 0) return {};
  for (const NodePtr& p : t.node()->srcs)
    if (p->buffer) return {};  // realized: bound by its buffer, nothing to run again
  return Tensor(source);
}

// Whether `t` is laid out as `l` (layout_or_none(t) == l), read off its node without copying
// the devices and bounds (Note [Signature of the last call]).
bool laid_out_as(const Tensor& t, const Layout& l) {
  if (!is_multi(t)) return l.devices.empty();
  const Node& n = *t.node();
  if (n.srcs.size() != l.devices.size() || n.shard_axis != l.axis || n.shard_bounds != l.bounds) return false;
  if (n.shard_partial != (l.partial ? static_cast<int>(*l.partial) : -1)) return false;
  for (size_t k = 0; k < l.devices.size(); ++k)
    if (!(n.srcs[k]->device == l.devices[k])) return false;
  return true;
}

Tensor rebuilt(const std::vector<Tensor>& flat, size_t& k, const Layout& l) {
  if (l.devices.empty()) return flat[k++];
  std::vector<Tensor> parts(flat.begin() + static_cast<std::ptrdiff_t>(k),
                            flat.begin() + static_cast<std::ptrdiff_t>(k + l.devices.size()));
  k += l.devices.size();
  return make_multi(std::move(parts), l);
}

}  // namespace

ShardedJit::ShardedJit(Jit::Function fn, std::vector<Tensor*> state) : fn_(std::move(fn)), state_(std::move(state)) {
  for (Tensor* s : state_) state_layouts_.push_back(layout_or_none(*s));
  size_t n = 0;
  for (const auto& l : state_layouts_) n += part_count(l);
  state_parts_.resize(n);
  std::vector<Tensor*> inner_state;
  for (auto& p : state_parts_) inner_state.push_back(&p);
  inner_ = std::make_unique<Jit>([this](const std::vector<Tensor>& flat) { return traced(flat); },
                                 std::move(inner_state));
}

// Note [Bundles refilled in place]
// After a replay every sharded state tensor gets its new parts. A bundle that only the user's
// tensor holds (no copy of it, no expression over it: nothing can see it but through that
// tensor) takes them in place, its parts swapped, instead of a new bundle being made and the old
// one freed: 5 bundles a 2-device makemore step, ~2 us of the ~11 the step spends outside its
// replay beyond one device's (docs/performance.md §6, 2026-12-07, helper mk2dev2). A bundle is
// never hash-consed, and a partial one (which caches its combine) is always rebuilt. Any other
// holder, and the bundle is rebuilt as before: a tensor kept from an earlier step keeps its value.
void ShardedJit::state_from_parts() {
  size_t k = 0;
  for (size_t j = 0; j < state_.size(); ++j) {
    const Layout& l = state_layouts_[j];
    Tensor& s = *state_[j];
    if (is_multi(s) && !l.partial && s.node().use_count() == 1 && s.node()->srcs.size() == l.devices.size()) {
      for (NodePtr& part : s.node()->srcs) part = state_parts_[k++].node();
      continue;
    }
    s = rebuilt(state_parts_, k, l);
  }
}

void ShardedJit::state_to_parts(const char* when) {
  size_t k = 0;
  for (size_t j = 0; j < state_.size(); ++j) {
    const Tensor& s = *state_[j];
    RAVEL_CHECK(s.defined(), ValueError, "Jit: state tensor ", j, " is undefined ", when);
    const Layout now = layout_or_none(s);
    RAVEL_CHECK(now == state_layouts_[j], ValueError, "Jit: state tensor ", j, " changed how it is sharded ", when,
                " (", s.sharding() ? s.sharding()->str() : std::string("on one device"),
                "); a captured step must keep every state tensor's layout");
    for (const Tensor& p : parts_of(s)) state_parts_[k++] = p;
  }
}

std::vector<Tensor> ShardedJit::traced(const std::vector<Tensor>& flat_args) {
  // The inner Jit has bound the part storage to this call's buffers: rebuild the user's view.
  std::vector<Tensor> args;
  size_t k = 0;
  for (size_t i = 0; i < in_layouts_.size(); ++i) {
    const Layout& l = in_layouts_[i];
    if (!in_sourced_[i]) {
      args.push_back(rebuilt(flat_args, k, l));
      continue;
    }
    const Tensor& source = flat_args[k++];  // split here: the cuts are kernels of the step
    args.push_back(make_multi(parts_in(source, l, source.shape()), l));
  }
  state_from_parts();
  std::vector<Tensor> outs = fn_(args);
  state_to_parts("after the function returned");
  std::vector<Layout>& out_layouts = out_layouts_[signature_];
  out_layouts.clear();
  std::vector<Tensor> flat;
  for (size_t i = 0; i < outs.size(); ++i) {
    RAVEL_CHECK(outs[i].defined(), ValueError, "Jit: output ", i, " of the function is an undefined tensor");
    outs[i] = combined(outs[i]);  // Note [Sharded Jit]: a partial output is combined in the step
    out_layouts.push_back(layout_or_none(outs[i]));
    for (const Tensor& p : parts_of(outs[i])) flat.push_back(p);
  }
  return flat;
}

// Note [Signature of the last call]
// What the inner Jit cannot see of a call, how its parts form bundles, is a string key of the
// outputs' layouts (out_layouts_), made from every part's dtype, shape and device and every
// input's layout. A training loop calls with the same kinds of inputs every step, so the key is
// built only when something differs from the last call: each input's layout and whether it is
// split inside the step (compared on the nodes, without copying a Layout), and each part's
// dtype, shape and device. Building it every call (a dozen device names and numbers appended,
// two Layout copies per input, a map look-up by string) was part of the ~1.3 us the sharded
// Jit's preparation cost per 2-device makemore step (docs/performance.md §6, helper mk2dev2).
std::vector<Tensor> ShardedJit::call(const std::vector<Tensor>& inputs) {
  bool same = last_out_layouts_ != nullptr && inputs.size() == in_layouts_.size();
  std::vector<uint8_t> sourced(inputs.size(), 0);
  std::vector<Tensor> flat;
  flat.reserve(flat_metas_.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    RAVEL_CHECK(inputs[i].defined(), ValueError, "Jit: input ", i, " is an undefined tensor");
    same = same && laid_out_as(inputs[i], in_layouts_[i]);
    Tensor source = is_multi(inputs[i]) ? split_source(inputs[i]) : Tensor();
    sourced[i] = source.defined() ? 1 : 0;
    if (source.defined()) {
      flat.push_back(std::move(source));
      continue;
    }
    for (const Tensor& p : parts_of(inputs[i])) flat.push_back(p);
  }
  same = same && sourced == in_sourced_ && flat.size() == flat_metas_.size();
  for (size_t i = 0; same && i < flat.size(); ++i) {
    const Node& n = *flat[i].node();
    same = n.dtype == flat_metas_[i].dtype && n.shape == flat_metas_[i].shape && n.device == flat_metas_[i].device;
  }
  if (!same) {
    std::vector<Layout> layouts;
    for (const Tensor& t : inputs) layouts.push_back(layout_or_none(t));
    // The parts' own signature is the inner Jit's; what it cannot see is how they form bundles.
    // Built by appending (a stream per number cost microseconds of the 2-device makemore
    // step's ~200, docs/performance.md §6, 2026-12-07).
    std::string sig;
    for (const Tensor& p : flat) {
      sig += dtype_name(p.dtype());
      sig += ':';
      for (int64_t d : p.shape()) append_number(sig, d), sig += ',';
      sig += p.device().str();
      sig += ';';
    }
    for (size_t i = 0; i < layouts.size(); ++i) {
      const Layout& l = layouts[i];
      sig += sourced[i] ? '/' : '|';
      append_number(sig, l.axis);
      if (l.partial) sig += 'p', append_number(sig, static_cast<int64_t>(*l.partial));
      for (const Device& d : l.devices) sig += d.str(), sig += ',';
      for (int64_t b : l.bounds) append_number(sig, b), sig += ',';
    }
    if (layouts != in_layouts_ || sourced != in_sourced_) inner_->clear();  // another layout is another signature
    in_layouts_ = std::move(layouts);
    in_sourced_ = std::move(sourced);
    signature_ = std::move(sig);
    flat_metas_.clear();
    for (const Tensor& p : flat) flat_metas_.push_back(PartMeta{p.dtype(), p.shape(), p.device()});
    last_out_layouts_ = nullptr;  // set once this signature's call has returned
  }
  state_to_parts("when the step was called");
  std::vector<Tensor> flat_out;
  try {
    flat_out = (*inner_)(flat);
  } catch (...) {
    state_from_parts();  // the user's state as the inner Jit left it
    throw;
  }
  state_from_parts();
  if (!last_out_layouts_) last_out_layouts_ = &out_layouts_.at(signature_);  // a map's values stay put
  std::vector<Tensor> outs;
  size_t k = 0;
  for (const Layout& l : *last_out_layouts_) outs.push_back(rebuilt(flat_out, k, l));
  return outs;
}

}  // namespace ravel::detail
