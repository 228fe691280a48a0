// What a ravel::Jit capture is made of (Note [Jit] in runtime/jit.cpp), and its replay.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ravel/schedule.hpp"
#include "ravel/tensor.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/host_op.hpp"
#include "runtime/loaded_plugin.hpp"
#include "schedule/recipe.hpp"

namespace ravel::detail {
class DeviceLanes;
}  // namespace ravel::detail

// The capture's own names (Slot, Step, ...) live apart from the rest of detail.
namespace ravel::detail::jit_capture {

struct Slot {
  enum class Kind : uint8_t { Input, State, Result, Constant } kind = Kind::Constant;
  int32_t index = -1;                      // Input / State: which one
  std::shared_ptr<DeviceBuffer> constant;  // Constant: the buffer, kept
  bool external = false;                   // Constant: someone besides the capture held it then
  std::shared_ptr<LoadedPlugin> plugin;    // Result: where it is allocated
  Device device;
  uint64_t bytes = 0;
};

struct Step {                            // one recorded kernel, or one phase of a host operation
  std::shared_ptr<const Recipe> recipe;  // keeps `kernel` alive
  const CachedKernel* kernel = nullptr;
  std::vector<std::pair<int32_t, int32_t>> binding;  // (recipe local, slot) of every operand
  int32_t out = -1;                                  // the result's slot
  std::vector<int32_t> release;                      // Result slots read for the last time here
  std::shared_ptr<HostOp> host;  // set: this step is host->begin (reads host_slots) or host->end
  bool host_end = false;         // (writes host_slots, fresh Results) instead of a kernel
  std::vector<int32_t> host_slots;
  // The slots the step reads, and those it writes.
  std::vector<int32_t> reads() const {
    if (host) return host_end ? std::vector<int32_t>{} : host_slots;
    std::vector<int32_t> r;
    for (auto [local, slot] : binding) r.push_back(slot);
    return r;
  }
  std::vector<int32_t> writes() const {
    if (host) return host_end ? host_slots : std::vector<int32_t>{};
    return {out};
  }
  std::string label() const { return host ? host->label() : kernel->label; }
};

struct Leaf {  // an output, or a state tensor's value after the call
  int32_t slot = -1;
  DType dtype = DType::F32;
  Shape shape;
  Device device;
};

struct Meta {  // what a capture depends on of one input or state tensor
  DType dtype;
  Shape shape;
  Device device;
  // `t` is a leaf: its node's fields are the tensor's (and reading them copies nothing).
  bool matches(const Tensor& t) const {
    const Node& n = *t.node();
    return n.dtype == dtype && n.shape == shape && n.device == device;
  }
};

// Note [Choosing lanes]: whether a capture's replays go by device (Note [Replay by device]) is
// measured, not guessed, unless RAVEL_JIT_LANES says: the first kTrialsEach replays go in order,
// the next kTrialsEach by device, and the faster by its best time stays, by device only if it is
// faster by 10% (it takes a host thread per device). The time is the replay's launches: for
// devices that run kernels where they are launched (tbb_cpu without queues), their work; for
// queued devices, the cost of queueing it. A steady step measures the same kind every call, so
// the best of a few is a fair comparison even on a loaded machine, where the loser is usually
// several times slower. The trials come in blocks, not alternating: the lanes' threads spin
// only 0.2 ms after a replay before they sleep (Note [Waking only sleepers]), so a replay by
// device after one in order found them asleep and paid their wake-ups, 20-60 us at the start of
// each lane, which a steady replay by device never pays; the 2-device makemore step was then
// kept in order in about half of the processes, at 1.3x the time by device (docs/performance.md
// §6, 2026-12-07, helper mk2dev). In a block, the first replay by device starts (or wakes) the
// threads and the best of the others is the steady one. A choice holds for kReplaysPerChoice
// replays, then is measured again: a choice made while another process held a core for the
// whole block (the lanes then lose) stays wrong for the rest of the run otherwise (the
// 2-device main job kept its replay in order in some runs under other sessions' benchmarks,
// 1.3-1.4x one device; docs/performance.md §6, 2026-12-07, helper mk2dev2). Measuring again
// costs a block of replays the slower way, ~0.3 ms in 1,000 replays of makemore's step.
struct LaneChoice {
  static constexpr int kTrialsEach = 4;
  static constexpr int32_t kReplaysPerChoice = 1000;
  int32_t trials = 0;
  int32_t since_chosen = 0;
  int8_t chosen = -1;  // -1: still measuring; 0: in order; 1: by device
  double best_seconds[2] = {1e300, 1e300};
  // Whether the next replay goes by device.
  bool next_by_device() const { return chosen >= 0 ? chosen == 1 : trials >= kTrialsEach; }
  // A replay took `seconds` (by device or in order).
  void record(bool by_device, double seconds) {
    if (chosen >= 0) {
      if (++since_chosen >= kReplaysPerChoice) *this = LaneChoice{};  // measure again
      return;
    }
    double& best = best_seconds[by_device ? 1 : 0];
    best = seconds < best ? seconds : best;
    if (++trials < 2 * kTrialsEach) return;
    // Lanes take a thread per device: they must win clearly, not by noise.
    chosen = best_seconds[1] < 0.9 * best_seconds[0] ? 1 : 0;
  }
};

struct LaneScratch;  // jit_replay.cpp

struct Capture {
  std::vector<Meta> inputs, state_in;  // the signature
  std::vector<Slot> slots;
  std::vector<Step> steps;
  std::vector<Leaf> outputs, state;
  std::vector<std::pair<const LoadedPlugin*, Device>> plugins;  // still the runtime's? (Runtime::reset)
  // Note [Replay by device]: each step's lane (one per device, in order of first use), and for
  // each slot that a step releases, how many reads precede its release (0: released when made).
  std::vector<int32_t> lane_of;
  int32_t lanes = 0;
  bool has_host_steps = false;
  std::vector<int32_t> reads_before_release;  // -1: never released in a replay
  // Each step's reads (Step::reads, made once here rather than allocated per kernel and lane at
  // every replay), and the slots some step writes (the others are bound before a replay starts).
  std::vector<std::vector<int32_t>> step_reads;
  std::vector<uint8_t> made_here;
  // Each lane's steps in capture order (Note [Lane scratch]): a lane walks its own list instead
  // of every step of every lane.
  std::vector<std::vector<int32_t>> lane_steps;
  mutable LaneChoice lane_choice;             // Note [Choosing lanes]
  // Note [Lane scratch]: what a replay by device fills and empties, kept from one replay to the
  // next (a Jit replays one call at a time); made at the first replay by device.
  mutable std::shared_ptr<LaneScratch> lane_scratch;
};

// Removes the steps whose results no kept step reads, walking back from the slots in `kept`
// (the outputs' and state's); host operations always stay (Note [Unread kernels]).
void drop_unread_kernels(std::vector<Step>& steps, size_t slots, const std::vector<uint8_t>& kept);

// Keeps the results of kernels that read only Constant slots as Constants (computed by the
// capture, held in `held`) and removes those kernels (Note [Constant kernels]); never an output
// or state slot (`kept`) or a host operation.
void fold_constant_kernels(std::vector<Step>& steps, std::vector<Slot>& slots,
                           const std::vector<std::shared_ptr<DeviceBuffer>>& held, const std::vector<uint8_t>& kept);

// Fills the lane plan of a capture whose steps and slots are final.
void plan_lanes(Capture& c);

// Launches the capture's steps in order with the slots bound in `bufs` (Inputs, State and
// Constants set; Results are allocated here and released after their last reader), adding what
// ran to `stats`. Host operations begun and not ended are cancelled if a step fails.
void replay_in_order(const Capture& c, std::vector<std::shared_ptr<DeviceBuffer>>& bufs, KernelStats& stats);

// Whether the next replay of `c` goes by device: it has kernels on two devices or more and no
// host operations (Note [Replay by device] in runtime/device_lanes.hpp), and RAVEL_JIT_LANES=1
// asks for it or the measurement chose it (Note [Choosing lanes]).
bool replays_by_device(const Capture& c);
// Reports a replay's launch time to the measurement (Note [Choosing lanes]).
void replayed(const Capture& c, bool by_device, double seconds);

// replay_in_order with each device's kernels launched from a host thread of its own.
void replay_by_device(const Capture& c, std::vector<std::shared_ptr<DeviceBuffer>>& bufs, KernelStats& stats,
                      DeviceLanes& lanes);

}  // namespace ravel::detail::jit_capture
