// ravel::Jit (ravel/jit.hpp): a function's kernels captured once and replayed with new inputs.
//
// Note [Jit]
// A capture is a straight-line program over *slots*, one per buffer the function's kernels
// touched: each recorded kernel (a lowered CachedKernel, kept alive by its Recipe) names the slot
// of every operand and of its result. A slot is
//   Input i   the buffer of input i at the call (bound to the new input at a replay);
//   State j   state tensor j's buffer at the start of the call (bound to its current one);
//   Result    made by a kernel of the call (allocated afresh at every replay, then freed after
//             its last reader unless it is an output or new state);
//   Constant  anything else: a Const's one-element buffer, data uploaded inside the function, a
//             tensor the function closed over. Kept by the capture and bound as is.
// Invariants: (1) slots are keyed by buffer identity, and the recorder holds every buffer it saw
// until the capture ends, so a freed buffer's address cannot be reused for a different slot;
// (2) a replay never writes a buffer that exists outside it (results are fresh, as in every
// realization), so outputs of earlier calls stay valid; (3) the state tensors are rebound only
// after every kernel ran, so a replay that fails leaves the state as it was.
// Host operations (collectives over ranks; Note [Host operations] in runtime/host_op.hpp) are
// steps too, one per phase: a begin reads its inputs' slots, an end writes fresh Result slots.
// A replay that fails cancels every operation it began and did not end.
//
// Note [Constants shared by interning]
// A Const node is interned by its value, dtype and device, so one `true` on tbb_cpu:0 (the mask
// of every `join` of a split tensor onto that device, `Tensor::pad` with a value) is shared by
// every graph alive that uses it; read through padding it has a one-element buffer. Whether
// that buffer is held outside a capture therefore says nothing about a tensor the function closed
// over: counted as one (`external`), it was "assigned" as soon as an unrelated graph holding the
// same constant died, and the step was captured again at every call (a global-view step over two
// local devices per rank, while the caller kept last step's reference loss: 2026-12-07, helper
// "bucket2"). A Const's value is fixed for the node's lifetime and is part of every kernel's key
// that reads it; read without padding it is a literal in the kernel. So its buffer is always the
// capture's own constant, never an external one, as the literal is. What made that unsafe
// before: a leaf realized from a Const (a scalar assigned with Tensor::assign, a parameter made
// from a constant) shared its buffer, so an assigned closed-over scalar was read from a Const's
// buffer; such a leaf now gets a buffer of its own (realized_leaf, tensor/assign.cpp), which is
// never marked, so assigning it again is seen as before.
#include "ravel/jit.hpp"

#include <atomic>
#include <chrono>
#include <string>
#include <utility>
#include <unordered_map>

#include "ravel/error.hpp"
#include "ravel/runtime.hpp"
#include "runtime/capture.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/device_lanes.hpp"
#include "runtime/jit_capture.hpp"
#include "runtime/host_op.hpp"
#include "runtime/jit_sharded.hpp"
#include "runtime/loaded_plugin.hpp"
#include "runtime/stats.hpp"
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;
using namespace detail::jit_capture;

namespace {

class Recorder final : public KernelRecorder {
 public:
  void kernel_ran(const std::shared_ptr<const Recipe>& recipe, const CachedKernel& k, const BufferOf& buffer_of,
                  const Node& out) override {
    Step s;
    s.recipe = recipe;
    s.kernel = &k;
    auto bind = [&](int32_t local) {
      if (local >= 0) s.binding.emplace_back(local, slot(buffer_of(local)));
    };
    for (int32_t l : k.input_nodes) bind(l);
    if (k.kind != CachedKernel::Kind::Program) bind(k.a_node), bind(k.b_node);
    s.out = result(out.buffer, out.device);
    steps.push_back(std::move(s));
  }
  void host_op_begun(const std::shared_ptr<HostOp>& op, const std::vector<std::shared_ptr<DeviceBuffer>>& in) override {
    Step s;
    s.host = op;
    for (const auto& b : in) s.host_slots.push_back(slot(b));
    steps.push_back(std::move(s));
  }
  void host_op_ended(const std::shared_ptr<HostOp>& op, const std::vector<std::shared_ptr<DeviceBuffer>>& out,
                     const std::vector<Device>& devices) override {
    Step s;
    s.host = op;
    s.host_end = true;
    for (size_t i = 0; i < out.size(); ++i) s.host_slots.push_back(result(out[i], devices[i]));
    steps.push_back(std::move(s));
  }
  int32_t result(const std::shared_ptr<DeviceBuffer>& b, const Device& device) {
    if (slot_of.count(b.get()))
      throw InternalError("ravel: Jit: a kernel wrote a buffer that already existed (please report it)");
    const int32_t k = slot(b);
    Slot& o = slots[k];
    o.kind = Slot::Kind::Result;
    o.plugin = Runtime::get().plugin_for(device);
    o.device = device;
    o.bytes = b->bytes();
    return k;
  }
  int32_t slot(const std::shared_ptr<DeviceBuffer>& b) {
    auto [it, fresh] = slot_of.emplace(b.get(), static_cast<int32_t>(slots.size()));
    if (fresh) {
      slots.emplace_back();
      held.push_back(b);
    }
    return it->second;
  }
  std::unordered_map<const DeviceBuffer*, int32_t> slot_of;
  std::vector<std::shared_ptr<DeviceBuffer>> held;  // Note [Jit] (1)
  std::vector<Slot> slots;
  std::vector<Step> steps;
};

int64_t kernel_count(const Capture& c) {  // host operations are not kernels
  int64_t n = 0;
  for (const Step& s : c.steps) n += s.host ? 0 : 1;
  return n;
}

// A Buffer node with a derivative rule (Note [A derivative on the result's own node]) is a
// computed result: as an input it takes a new leaf on its buffer, as the alias it replaced did.
bool is_leaf(const Tensor& t) {
  const Node& n = *t.node();
  return n.kind == NodeKind::Buffer && n.buffer && !n.custom_rule;
}
const std::shared_ptr<DeviceBuffer>& buffer_of_leaf(const Tensor& t) { return t.node()->buffer; }

std::vector<Meta> metas(const std::vector<Tensor>& in) {
  std::vector<Meta> out;
  for (const Tensor& t : in) out.push_back(Meta{t.dtype(), t.shape(), t.device()});
  return out;
}

bool matches(const Capture& c, const std::vector<Tensor>& in, const std::vector<Tensor*>& state) {
  if (c.inputs.size() != in.size()) return false;
  for (size_t i = 0; i < in.size(); ++i)
    if (!c.inputs[i].matches(in[i])) return false;
  for (size_t j = 0; j < state.size(); ++j)
    if (!c.state_in[j].matches(*state[j])) return false;
  return true;
}

Leaf leaf_of(Recorder& rec, const Tensor& t) {
  return Leaf{rec.slot(buffer_of_leaf(t)), t.dtype(), t.shape(), t.device()};
}

Tensor tensor_of(const Leaf& l, const std::shared_ptr<DeviceBuffer>& b) {
  return Tensor(make_buffer_node(l.dtype, l.shape, l.device, b));
}

// Replaces `t` by a realized leaf on the same buffer, keeping its autodiff state (like assign).
void rebind(Tensor& t, NodePtr fresh) {
  fresh->requires_grad = t.node()->requires_grad;
  fresh->grad = t.node()->grad;
  t = Tensor(std::move(fresh));
}

}  // namespace

struct Jit::Impl {
  Function fn;
  std::atomic<bool> running{false};  // a call is under way: a second one is recursion (or a race)
  std::vector<Tensor*> state;
  std::vector<Capture> captures;  // one per input signature
  int64_t n_captures = 0, n_replays = 0, last_kernels = 0;
  std::unique_ptr<ShardedJit> sharded;  // Note [Sharded Jit]: set once a call is sharded
  std::unique_ptr<DeviceLanes> lanes;   // Note [Replay by device]: made on first use

  std::vector<Tensor> capture(const std::vector<Tensor>& in);
  std::vector<Tensor> replay(const Capture& c, const std::vector<Tensor>& in);
};

Jit::Jit(Function fn, std::vector<Tensor*> state) : impl_(std::make_unique<Impl>()) {
  RAVEL_CHECK(static_cast<bool>(fn), ValueError, "Jit: the function is empty");
  for (size_t j = 0; j < state.size(); ++j)
    RAVEL_CHECK(state[j] != nullptr, ValueError, "Jit: state tensor ", j, " is a null pointer");
  impl_->fn = std::move(fn);
  impl_->state = std::move(state);
}
Jit::~Jit() = default;

// A moved-from Jit has no Impl: every member says so instead of dereferencing null (as a
// moved-from Tensor gives a clean error).
Jit::Impl& Jit::checked_impl(const char* member) const {
  RAVEL_CHECK(impl_ != nullptr, ValueError, "Jit::", member,
              ": this Jit was moved from and holds no function; call the Jit it was moved to");
  return *impl_;
}

Jit::Jit(Jit&&) noexcept = default;
Jit& Jit::operator=(Jit&&) noexcept = default;

int64_t Jit::captures() const {
  const Impl& m = checked_impl("captures");
  return m.n_captures + (m.sharded ? m.sharded->inner().captures() : 0);
}
int64_t Jit::replays() const {
  const Impl& m = checked_impl("replays");
  return m.n_replays + (m.sharded ? m.sharded->inner().replays() : 0);
}
int64_t Jit::kernels_per_call() const {
  const Impl& m = checked_impl("kernels_per_call");
  return m.sharded ? m.sharded->inner().kernels_per_call() : m.last_kernels;
}
void Jit::clear() {
  Impl& m = checked_impl("clear");
  RAVEL_CHECK(!m.running, ValueError, "Jit::clear: called while the Jit's own call is running (from its function)");
  m.captures.clear();
  if (m.sharded) m.sharded->inner().clear();
}

std::vector<Tensor> Jit::operator()(const std::vector<Tensor>& inputs) {
  Impl& m = checked_impl("operator()");
  // A function that calls its own Jit would capture the inner call first and the outer one after
  // it, both under one signature, and every later call would replay the inner capture: refused.
  RAVEL_CHECK(!m.running.exchange(true), ValueError,
              "Jit: called again while a call of the same Jit is running (its function calls the Jit itself, or "
              "two threads share it); a capture cannot contain itself: call the plain function inside, or give "
              "each thread its own Jit");
  struct Done {
    std::atomic<bool>& running;
    ~Done() { running = false; }
  } done{m.running};
  // Note [Results ended at their first reader] (runtime/host_op_deferred.cpp): nothing begun
  // outside this call may end inside its capture or replay.
  end_deferred_host_ops();
  bool sharded = m.sharded != nullptr || any_multi(inputs);
  for (Tensor* s : m.state) sharded = sharded || is_multi(*s);
  if (sharded) {  // Note [Sharded Jit]
    if (!m.sharded) m.sharded = std::make_unique<ShardedJit>(m.fn, m.state);
    return m.sharded->call(inputs);
  }
  std::vector<Tensor> in = inputs;
  for (size_t i = 0; i < in.size(); ++i) {
    RAVEL_CHECK(in[i].defined(), ValueError, "Jit: input ", i, " is an undefined tensor");
    if (is_leaf(in[i])) continue;
    // A kernel's realized result (each part of a sharded batch: a copy or a transfer) is its own
    // buffer, of its shape: a leaf on it, without a realization (four per 2-device makemore
    // step). Views and constants (a one-element buffer) take realized_leaf.
    const Node& n = *in[i].node();
    const bool computed = n.kind == NodeKind::Copy || n.kind == NodeKind::Alu || n.kind == NodeKind::Reduce ||
                          n.kind == NodeKind::Transfer;
    in[i] = Tensor(computed && n.buffer ? make_buffer_node(n.dtype, n.shape, n.device, n.buffer) : realized_leaf(in[i]));
  }
  for (size_t j = 0; j < m.state.size(); ++j) {
    Tensor& s = *m.state[j];
    RAVEL_CHECK(s.defined(), ValueError, "Jit: state tensor ", j,
                " is undefined; give it a value before the first call (a capture must see the same ops as every "
                "later call)");
    if (!is_leaf(s)) rebind(s, realized_leaf(s));
  }
  for (auto it = m.captures.begin(); it != m.captures.end(); ++it) {
    if (!matches(*it, in, m.state)) continue;
    bool current = true;  // Runtime::reset reloads plugins: a capture is bound to the old ones
    for (const auto& [plugin, device] : it->plugins) current = current && Runtime::get().plugin_for(device).get() == plugin;
    // A tensor the function closed over and that was assigned since (Tensor::assign makes a new
    // buffer) no longer holds the capture's constant: its last holder is the capture. A replay
    // would use the old value, so the function runs again instead (Note [Jit]).
    for (const Slot& slot : it->slots)
      current = current && !(slot.external && slot.constant.use_count() == 1);
    if (current) return m.replay(*it, in);
    m.captures.erase(it);
    break;
  }
  return m.capture(in);
}

std::vector<Tensor> Jit::Impl::capture(const std::vector<Tensor>& in) {
  std::unordered_map<const DeviceBuffer*, std::string> owner;  // distinct buffers: Note [Jit] (slots)
  auto claim = [&](const Tensor& t, std::string what) {
    auto [it, fresh] = owner.emplace(buffer_of_leaf(t).get(), what);
    RAVEL_CHECK(fresh, ValueError, "Jit: ", what, " and ", it->second,
                " are the same buffer; a capture tells them apart by buffer, so pass distinct tensors");
  };
  for (size_t i = 0; i < in.size(); ++i) claim(in[i], "input " + std::to_string(i));
  for (size_t j = 0; j < state.size(); ++j) claim(*state[j], "state tensor " + std::to_string(j));
  std::vector<std::shared_ptr<DeviceBuffer>> state_in;
  std::vector<Meta> state_meta;
  for (Tensor* s : state) {
    state_in.push_back(buffer_of_leaf(*s));
    state_meta.push_back(Meta{s->dtype(), s->shape(), s->device()});
  }
  // The function sees new Buffer nodes on the same buffers. Buffer nodes are never hash-consed,
  // so every node it builds is new and unrealized: an expression of the inputs that happens to
  // be realized and alive elsewhere (y = (x * 2).realize() before the call) cannot be found by
  // hash-consing and mistaken for a constant of the capture.
  std::vector<Tensor> args;
  for (const Tensor& t : in) args.push_back(Tensor(make_buffer_node(t.dtype(), t.shape(), t.device(), buffer_of_leaf(t))));
  for (Tensor* s : state) rebind(*s, make_buffer_node(s->dtype(), s->shape(), s->device(), buffer_of_leaf(*s)));

  Recorder rec;
  std::vector<Tensor> outs;
  {
    RecordingScope scope(&rec);
    outs = fn(args);
    for (size_t k = 0; k < outs.size(); ++k) {
      RAVEL_CHECK(outs[k].defined(), ValueError, "Jit: output ", k, " of the function is an undefined tensor");
      if (!is_leaf(outs[k])) outs[k] = Tensor(realized_leaf(outs[k]));
    }
    for (size_t j = 0; j < state.size(); ++j) {
      Tensor& s = *state[j];
      RAVEL_CHECK(s.defined(), ValueError, "Jit: the function left state tensor ", j, " undefined");
      if (!is_leaf(s)) rebind(s, realized_leaf(s));
    }
    end_deferred_host_ops();  // results returned unread: their ends belong to this capture
  }
  Capture c;
  c.inputs = metas(in);
  c.state_in = std::move(state_meta);
  for (const Tensor& t : outs) c.outputs.push_back(leaf_of(rec, t));
  for (Tensor* s : state) c.state.push_back(leaf_of(rec, *s));
  for (size_t i = 0; i < in.size(); ++i)
    if (auto it = rec.slot_of.find(buffer_of_leaf(in[i]).get()); it != rec.slot_of.end())
      rec.slots[it->second].kind = Slot::Kind::Input, rec.slots[it->second].index = static_cast<int32_t>(i);
  for (size_t j = 0; j < state_in.size(); ++j)
    if (auto it = rec.slot_of.find(state_in[j].get()); it != rec.slot_of.end())
      rec.slots[it->second].kind = Slot::Kind::State, rec.slots[it->second].index = static_cast<int32_t>(j);

  // Results the function kept alive elsewhere would go stale on a replay (ravel/jit.hpp).
  std::vector<uint8_t> kept(rec.slots.size(), 0);
  for (const Leaf& l : c.outputs) kept[l.slot] = 1;
  for (const Leaf& l : c.state) kept[l.slot] = 1;
  int64_t hidden = 0;
  std::string example;
  for (const Step& s : rec.steps)
    for (int32_t w : s.writes())
      if (!kept[w] && rec.held[w].use_count() > 1 && hidden++ == 0) example = s.label();
  RAVEL_CHECK(hidden == 0, ValueError, "Jit: the function keeps ", hidden, " tensor(s) it computed alive besides its "
              "outputs and state (the first made by a ", example, " kernel), e.g. a gradient in Tensor::grad or an "
              "optimizer's moment; a replay would not update them. Return them, list them as state, or drop them "
              "(zero_grad) before the function returns. This call ran the function once.");

  drop_unread_kernels(rec.steps, rec.slots.size(), kept);
  fold_constant_kernels(rec.steps, rec.slots, rec.held, kept);  // Note [Constant kernels]
  std::vector<int32_t> last(rec.slots.size(), -1);
  for (size_t i = 0; i < rec.steps.size(); ++i) {
    for (int32_t w : rec.steps[i].writes()) last[w] = static_cast<int32_t>(i);
    for (int32_t r : rec.steps[i].reads()) last[r] = static_cast<int32_t>(i);
  }
  for (size_t s = 0; s < rec.slots.size(); ++s) {
    Slot& slot = rec.slots[s];
    if (slot.kind == Slot::Kind::Constant && !slot.constant) {  // a folded result has its own
      // Held outside the capture now (besides the recorder's reference): a tensor the function
      // closed over. When the capture becomes its only holder, that tensor was assigned. Not a
      // Const's buffer (Note [Constants shared by interning]).
      slot.external = rec.held[s].use_count() > 1 && !rec.held[s]->const_value();
      slot.constant = rec.held[s];
    }
    if (slot.kind == Slot::Kind::Result && !kept[s] && last[s] >= 0)  // < 0: its kernel was dropped
      rec.steps[last[s]].release.push_back(static_cast<int32_t>(s));
    if (slot.kind == Slot::Kind::Result) {
      bool seen = false;
      for (const auto& [p, d] : c.plugins) seen = seen || p == slot.plugin.get();
      if (!seen) c.plugins.emplace_back(slot.plugin.get(), slot.device);
    }
  }
  c.slots = std::move(rec.slots);
  c.steps = std::move(rec.steps);
  plan_lanes(c);
  last_kernels = kernel_count(c);
  ++n_captures;
  captures.push_back(std::move(c));
  return outs;
}

std::vector<Tensor> Jit::Impl::replay(const Capture& c, const std::vector<Tensor>& in) {
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());  // Note [Threads] in graph/node.hpp
  std::vector<std::shared_ptr<DeviceBuffer>> bufs(c.slots.size());
  for (size_t s = 0; s < c.slots.size(); ++s) {
    const Slot& slot = c.slots[s];
    if (slot.kind == Slot::Kind::Input) bufs[s] = buffer_of_leaf(in[slot.index]);
    if (slot.kind == Slot::Kind::State) bufs[s] = buffer_of_leaf(*state[slot.index]);
    if (slot.kind == Slot::Kind::Constant) bufs[s] = slot.constant;
  }
  KernelStats stats;
  stats.realizations = 1;
  const bool by_device = replays_by_device(c);  // Note [Replay by device]
  const auto t0 = std::chrono::steady_clock::now();
  if (by_device) {
    if (!lanes) lanes = std::make_unique<DeviceLanes>();
    replay_by_device(c, bufs, stats, *lanes);
  } else {
    replay_in_order(c, bufs, stats);
  }
  replayed(c, by_device, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  record_realization(stats);
  std::vector<Tensor> outs;
  outs.reserve(c.outputs.size());
  for (const Leaf& l : c.outputs) outs.push_back(tensor_of(l, bufs[l.slot]));
  for (size_t j = 0; j < state.size(); ++j) {
    const Leaf& l = c.state[j];
    rebind(*state[j], make_buffer_node(l.dtype, l.shape, l.device, bufs[l.slot]));
  }
  ++n_replays;
  last_kernels = kernel_count(c);
  return outs;
}

}  // namespace ravel
