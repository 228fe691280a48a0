// Replaying a ravel::Jit capture: in order, or one lane per device (Note [Replay by device]).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "ravel/error.hpp"
#include "runtime/device_lanes.hpp"
#include "runtime/execute.hpp"
#include "runtime/jit_capture.hpp"
#include "runtime/jit_profile.hpp"

namespace ravel::detail::jit_capture {

// A slot's buffer in a replay by device, on a cache line of its own (Note [Lanes share no cache
// line]): the slots of the devices' kernels alternate in capture order.
struct alignas(64) LaneBuffer {
  std::shared_ptr<DeviceBuffer> p;
};
// Note [Lanes share no cache line]: what one lane writes per kernel (a slot's count of reads
// left, its flag, the lane's statistics) sits on a cache line no other lane writes, so the
// lanes' cores do not pass lines back and forth for neighbouring slots.
struct alignas(64) ReadsLeft {
  std::atomic<int32_t> n{0};
};
struct alignas(64) LaneStats {
  KernelStats s;
};

namespace {

using Buffers = std::vector<std::shared_ptr<DeviceBuffer>>;
std::shared_ptr<DeviceBuffer>& at(Buffers& b, int32_t s) { return b[s]; }
std::shared_ptr<DeviceBuffer>& at(std::vector<LaneBuffer>& b, int32_t s) { return b[s].p; }

// One phase of a host operation in a replay (Note [Host operations]).
template <class Bufs>
void run_host_step(const Step& step, const std::vector<Slot>& slots, Bufs& bufs, std::vector<HostOp*>& in_flight) {
  if (!step.host_end) {
    std::vector<const DeviceBuffer*> in;
    std::vector<std::shared_ptr<DeviceBuffer>> held;
    for (int32_t s : step.host_slots) in.push_back(at(bufs, s).get()), held.push_back(at(bufs, s));
    step.host->hold_inputs(held);
    step.host->begin(in);
    in_flight.push_back(step.host.get());
    return;
  }
  std::vector<DeviceBuffer*> out;
  std::vector<std::shared_ptr<DeviceBuffer>> own = step.host->take_outputs();  // written in begin
  if (!own.empty() && own.size() != step.host_slots.size())
    throw InternalError("ravel: Jit: " + step.host->label() + " wrote " + std::to_string(own.size()) + " outputs, " +
                        std::to_string(step.host_slots.size()) + " were recorded");
  for (size_t i = 0; i < step.host_slots.size(); ++i) {
    const int32_t s = step.host_slots[i];
    const Slot& o = slots[s];
    at(bufs, s) = own.empty() ? std::make_shared<DeviceBuffer>(o.plugin, o.device.index(), o.bytes) : std::move(own[i]);
    out.push_back(at(bufs, s).get());
  }
  std::erase(in_flight, step.host.get());  // an end() that throws has given up by itself
  step.host->end(out);
}

// Allocates the step's result, launches its kernel and counts it in `stats`.
template <class Bufs>
void launch_step(const Capture& c, const Step& step, Bufs& bufs, KernelStats& stats) {
  const Slot& o = c.slots[step.out];
  std::shared_ptr<DeviceBuffer>& out = at(bufs, step.out);
  out = std::make_shared<DeviceBuffer>(o.plugin, o.device.index(), o.bytes);
  const BufferOf buffer_of = [&](int32_t local) -> const std::shared_ptr<DeviceBuffer>& {
    for (auto [l, s] : step.binding)
      if (l == local) return at(bufs, s);
    throw InternalError("ravel: Jit: a replayed kernel reads an operand the capture did not record");
  };
  stats.execute_seconds += launch_kernel(*step.kernel, buffer_of, *out);
  const CachedKernel& k = *step.kernel;
  ++(k.kind == CachedKernel::Kind::Program ? stats.programs
     : k.kind == CachedKernel::Kind::Contraction ? stats.contractions : stats.transfers);
  stats.bytes_read += k.bytes_read;
  stats.bytes_written += static_cast<int64_t>(o.bytes);
  stats.bytes_allocated += static_cast<int64_t>(o.bytes);
}

void add(KernelStats& to, const KernelStats& s) {
  to.programs += s.programs;
  to.contractions += s.contractions;
  to.transfers += s.transfers;
  to.bytes_read += s.bytes_read;
  to.bytes_written += s.bytes_written;
  to.bytes_allocated += s.bytes_allocated;
  to.execute_seconds += s.execute_seconds;
}

// RAVEL_JIT_LANES: "1" always, "0" never, anything else (unset) chosen by measuring.
enum class LanesMode { Always, Never, Measure };
LanesMode lanes_mode() {
  const char* v = std::getenv("RAVEL_JIT_LANES");
  if (v != nullptr && std::strcmp(v, "1") == 0) return LanesMode::Always;
  if (v != nullptr && std::strcmp(v, "0") == 0) return LanesMode::Never;
  return LanesMode::Measure;
}

}  // namespace

// Note [Lane scratch]
// A replay by device works on per-slot arrays, each slot on a cache line of its own: the bound
// buffers, the made flags and the counts of reads left, plus each lane's statistics (Note [Lanes
// share no cache line]). Made afresh at every replay they were three allocations of a cache line
// per slot (a slot per buffer the step touches: 57 kernels' results, 10 state parts, inputs and
// constants in the 2-device makemore step), zeroed, and freed again, part of the ~1 us
// the lanes' set-up cost against 0.13 in order (docs/performance.md §6, helper mk2dev2). A
// capture keeps them from one replay to the next and resets their values: a Jit replays one call
// at a time (Jit::operator() refuses a second), every replay ends with all lanes returned (also
// when one fails: DeviceLanes::run waits for the others), and the buffers go back to the caller
// at the end of every replay, so nothing of one replay is seen by the next but the reset values.
// The lanes also walk only their own steps (Capture::lane_steps, made by plan_lanes).
struct LaneScratch {
  explicit LaneScratch(const Capture& c)
      : bufs(c.slots.size()), made(c.slots.size()), reads_left(c.slots.size()), lane_stats(static_cast<size_t>(c.lanes)) {}
  std::vector<LaneBuffer> bufs;
  SlotFlags made;
  std::vector<ReadsLeft> reads_left;
  std::vector<LaneStats> lane_stats;
};

// Note [Unread kernels]
// A capture records every kernel the call ran, also those whose results only the host read
// during the call: a check of values (nn::Embedding's and cross_entropy's index bounds read the
// indices with to_vector, which on a sharded batch gathers it onto one device: a transfer and a
// join per index tensor and step, 4 of the 36 kernels of the first device's lane in the 2-device
// makemore step, docs/performance.md §6, 2026-12-07). A replay does not repeat what the host did
// with them (the checks ran at the capture; Note [Jit]), so such a kernel does nothing at a
// replay but cost its launch. Dropped here: walking back from the outputs and state, a kernel
// stays if a kept step reads its result; host operations always stay (they talk to other
// ranks). What is dropped has no effect a replay could show: results are fresh buffers
// (property 2 of Note [Jit]), read by no one.
void drop_unread_kernels(std::vector<Step>& steps, size_t slots, const std::vector<uint8_t>& kept) {
  std::vector<uint8_t> read(kept.begin(), kept.end());
  read.resize(slots, 0);
  std::vector<uint8_t> drop(steps.size(), 0);
  for (size_t i = steps.size(); i-- > 0;) {
    const Step& step = steps[i];
    bool needed = step.host != nullptr;
    for (int32_t w : step.writes()) needed = needed || read[w];
    if (!needed) {
      drop[i] = 1;
      continue;
    }
    for (int32_t r : step.reads()) read[r] = 1;
  }
  size_t k = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (drop[i]) continue;
    if (k != i) steps[k] = std::move(steps[i]);  // not onto itself: that empties its vectors
    ++k;
  }
  steps.resize(k);
}

// Note [Constant kernels]
// A kernel whose every operand is a Constant slot (Note [Jit]) computes the same bytes at every
// replay: its operands never change while the capture is current (a closed-over tensor that is
// assigned makes the capture stale, and replays never write a buffer that exists outside them),
// and kernels are deterministic (random numbers come from counters in the program). So its
// result, computed once by the capture, is kept as a Constant and the kernel is not replayed;
// a kernel reading only such results folds in turn. In the 2-device makemore step these were 3 of
// the 36 kernels of the second device's lane and 1 of the first's: the loss mean's 1/B made on
// device 0 (a program without inputs) and its transfer to device 1 (the replicated loss's
// cotangent, Note [Sharded gradients]), and the transfer of `one_hot`'s class indices (a
// constant made on device 0) to device 1 for the embedding and for cross_entropy, every step
// (docs/performance.md §6, 2026-12-07, helper mk2dev). Outputs and new state are never folded:
// a replay hands out fresh buffers (property 2 of Note [Jit]). Host operations are never folded.
// The price: a folded result stays allocated as long as the capture (a transposed copy of a
// closed-over weight, say), as the closed-over tensors themselves do, where a replay used to
// make it and free it after its last reader.
void fold_constant_kernels(std::vector<Step>& steps, std::vector<Slot>& slots,
                           const std::vector<std::shared_ptr<DeviceBuffer>>& held, const std::vector<uint8_t>& kept) {
  std::vector<uint8_t> fold(steps.size(), 0);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    if (step.host || kept[step.out] || slots[step.out].kind != Slot::Kind::Result) continue;
    bool constant = true;
    for (int32_t r : step.reads()) constant = constant && slots[r].kind == Slot::Kind::Constant;
    if (!constant) continue;
    Slot& o = slots[step.out];
    o.kind = Slot::Kind::Constant;
    o.constant = held[step.out];
    o.external = false;  // only the capture holds it: never a sign that a closed-over tensor changed
    o.plugin.reset();
    fold[i] = 1;
  }
  size_t k = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (fold[i]) continue;
    if (k != i) steps[k] = std::move(steps[i]);
    ++k;
  }
  steps.resize(k);
}

void plan_lanes(Capture& c) {
  c.lane_of.assign(c.steps.size(), 0);
  c.reads_before_release.assign(c.slots.size(), -1);
  c.has_host_steps = false;
  std::vector<Device> devices;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const Step& step = c.steps[i];
    if (step.host) {
      // A collective of a plugin's own devices runs in the first lane, after the lanes that make
      // its inputs (Note [Host steps in lanes]); any other host operation keeps the replay in order.
      if (!step.host->runs_in_a_lane()) c.has_host_steps = true;
      continue;
    }
    const Device& d = c.slots[step.out].device;
    size_t k = 0;
    while (k < devices.size() && !(devices[k] == d)) ++k;
    if (k == devices.size()) devices.push_back(d);
    c.lane_of[i] = static_cast<int32_t>(k);
  }
  c.lanes = static_cast<int32_t>(devices.size());
  for (const Step& step : c.steps)
    for (int32_t r : step.release) c.reads_before_release[r] = 0;
  for (const Step& step : c.steps)
    for (int32_t r : step.reads())
      if (c.reads_before_release[r] >= 0) ++c.reads_before_release[r];
  c.step_reads.clear();
  c.made_here.assign(c.slots.size(), 0);
  for (const Step& step : c.steps) {
    c.step_reads.push_back(step.reads());
    for (int32_t w : step.writes()) c.made_here[w] = 1;
  }
  c.lane_steps.assign(static_cast<size_t>(std::max(c.lanes, 1)), {});
  for (size_t i = 0; i < c.steps.size(); ++i) c.lane_steps[static_cast<size_t>(c.lane_of[i])].push_back(static_cast<int32_t>(i));
  c.lane_scratch.reset();  // sized for the slots and lanes above (Note [Lane scratch])
}

void replay_in_order(const Capture& c, std::vector<std::shared_ptr<DeviceBuffer>>& bufs, KernelStats& stats) {
  std::vector<HostOp*> in_flight;  // begun, not ended: cancelled if the replay fails
  ReplayClock clock(c, false);      // Note [Replay profile]
  try {
    for (size_t i = 0; i < c.steps.size(); ++i) {
      const Step& step = c.steps[i];
      const double from = clock.on() ? clock.now_us() : 0;
      if (step.host) {
        run_host_step(step, c.slots, bufs, in_flight);
      } else {
        launch_step(c, step, bufs, stats);
        for (HostOp* op : in_flight)  // Note [Progress between kernels] in host_op.cpp: the oldest
          if (op->progress()) break;
      }
      for (int32_t r : step.release) bufs[r].reset();
      if (clock.on()) clock.step(0, i, from, from, clock.now_us());
    }
    if (clock.on()) clock.lane_end(0);
  } catch (...) {
    for (HostOp* op : in_flight) op->cancel();
    throw;
  }
}

bool replays_by_device(const Capture& c) {
  if (c.lanes < 2 || c.has_host_steps) return false;
  switch (lanes_mode()) {
    case LanesMode::Always: return true;
    case LanesMode::Never: return false;
    case LanesMode::Measure: break;
  }
  return c.lane_choice.next_by_device();  // in order first, then by device: in blocks
}

void replayed(const Capture& c, bool by_device, double seconds) {
  if (lanes_mode() != LanesMode::Measure || c.lanes < 2 || c.has_host_steps) return;
  c.lane_choice.record(by_device, seconds);
}

void replay_by_device(const Capture& c, std::vector<std::shared_ptr<DeviceBuffer>>& bound, KernelStats& stats,
                      DeviceLanes& lanes) {
  const size_t n = static_cast<size_t>(c.lanes);
  if (!c.lane_scratch) c.lane_scratch = std::make_shared<LaneScratch>(c);  // Note [Lane scratch]
  LaneScratch& scratch = *c.lane_scratch;
  std::vector<LaneBuffer>& bufs = scratch.bufs;
  for (size_t s = 0; s < bound.size(); ++s) bufs[s].p = std::move(bound[s]);
  struct MoveBack {  // the caller reads outputs and state from `bound`, also after a failure
    std::vector<LaneBuffer>& from;
    Buffers& to;
    ~MoveBack() {
      for (size_t s = 0; s < to.size(); ++s) to[s] = std::move(from[s].p);
    }
  } move_back{bufs, bound};
  // A slot is waited for only if a step of this replay makes it; the others are bound already.
  SlotFlags& made = scratch.made;
  made.reset();
  for (size_t s = 0; s < c.slots.size(); ++s)
    if (!c.made_here[s]) made.set_made(s);
  std::vector<ReadsLeft>& reads_left = scratch.reads_left;
  for (size_t s = 0; s < c.slots.size(); ++s)
    reads_left[s].n.store(c.reads_before_release[s], std::memory_order_relaxed);
  std::vector<LaneStats>& lane_stats = scratch.lane_stats;
  for (LaneStats& s : lane_stats) s.s = KernelStats{};

  // Every release goes through here: the lane that ends the last read frees the buffer.
  auto read_done = [&](int32_t s) {
    if (c.reads_before_release[s] >= 0 && reads_left[s].n.fetch_sub(1, std::memory_order_acq_rel) == 1)
      at(bufs, s).reset();
  };
  // Note [Host steps in lanes]: a host operation that may run in a lane (HostOp::runs_in_a_lane:
  // the plugin all-reduce, Note [Plugin all-reduce]) runs in lane 0, its begin waiting for its
  // inputs like a kernel for its operands, its end marking its outputs made. Its plugin orders it
  // on every device (the ABI's n-sided barrier), so the other lanes only wait where they read it.
  std::vector<HostOp*> in_flight;  // lane 0's begun host operations, cancelled if the replay fails
  ReplayClock clock(c, true);       // Note [Replay profile]
  const auto lane_body = [&](size_t k) {
    if (clock.on()) clock.lane_start(k);
    for (const int32_t step_index : c.lane_steps[k]) {
      const size_t i = static_cast<size_t>(step_index);
      const Step& step = c.steps[i];
      const std::vector<int32_t>& reads = c.step_reads[i];
      const double wait_from = clock.on() ? clock.now_us() : 0;
      for (int32_t r : reads) made.wait_made(static_cast<size_t>(r));
      const double launch_from = clock.on() ? clock.now_us() : 0;
      if (step.host) {
        run_host_step(step, c.slots, bufs, in_flight);
        for (int32_t w : step.writes()) {
          if (c.reads_before_release[w] == 0) at(bufs, w).reset();
          else made.set_made(static_cast<size_t>(w));
        }
        for (int32_t r : reads) read_done(r);
        if (clock.on()) clock.step(k, i, wait_from, launch_from, clock.now_us());
        continue;
      }
      launch_step(c, step, bufs, lane_stats[k].s);
      if (c.reads_before_release[step.out] == 0) at(bufs, step.out).reset();  // never read: made and dropped
      else made.set_made(static_cast<size_t>(step.out));
      for (int32_t r : reads) read_done(r);
      if (clock.on()) clock.step(k, i, wait_from, launch_from, clock.now_us());
    }
    if (clock.on()) clock.lane_end(k);
  };
  const std::function<void(size_t)> lane = [&lane_body](size_t k) { lane_body(k); };  // one pointer: no allocation
  const std::function<void()> stop_all = [&made] { made.stop(); };
  try {
    lanes.run(n, lane, stop_all);
  } catch (...) {
    for (HostOp* op : in_flight) op->cancel();
    throw;
  }
  for (const LaneStats& s : lane_stats) add(stats, s.s);
}

}  // namespace ravel::detail::jit_capture
