// Host threads that replay a captured step's kernels one device each (Note [Replay by device]).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ravel::detail {

// Note [Replay by device]
// A Jit replay of a step over several devices (data parallelism over a mesh) launches its kernels
// one after another. With a plugin that runs a kernel on the launching thread (tbb_cpu's devices
// without queues, the default where the cores do not give every device two: Note [Queues by core
// count] in plugins/tbb_cpu/devices.hpp), the devices then compute one after the other, and the
// alternative, a queue per device, pays a hand-off and a wake-up per kernel, which a step of
// small kernels cannot afford (docs/performance.md, "Several tbb_cpu devices").
// So a replay can give each device a lane: the device's kernels in capture order, launched from a
// host thread of its own (the first device's on the calling thread), one hand-off per lane and
// replay. A kernel that reads a buffer made by another lane (a Transfer's source, the other half
// of an all-reduce) waits for that lane to have launched its maker: a flag per slot. A lane's
// launches are ordered as in the capture, so each device sees the same kernel order as a
// sequential replay and computes the same bits. Buffers are released by whichever lane finishes
// their last reader. A lane that fails stops the others at their next wait (no lane waits for a
// maker that will never run), and the replay rethrows the first error.
// Whether a capture replays this way is measured on its first replays (Note [Choosing lanes] in
// runtime/jit_capture.hpp); RAVEL_JIT_LANES=1 forces it and =0 forbids it (docs/jit.md).

// Thrown inside a lane that was stopped because another lane failed; never escapes run().
struct LaneStopped {};

// Readiness of the slots of one replay: made (by this replay's kernels, or before it) or not.
class SlotFlags {
 public:
  explicit SlotFlags(size_t n) : flags_(n) {}
  // Each slot's flag has a cache line of its own (Note [Lanes share no cache line]).
  void set_made(size_t s) {
    flags_[s].made.store(kMade, std::memory_order_seq_cst);
    // Note [Waking only sleepers] (device_lanes.cpp): a notify is a system call even with no one
    // asleep, and a replay sets a flag per kernel.
    if (sleepers_.load(std::memory_order_seq_cst) > 0) flags_[s].made.notify_all();
  }
  // Blocks until slot s is made; throws LaneStopped once stop() was called.
  void wait_made(size_t s) const {
    // Spin first: the maker is usually a kernel or two away on another core, and a futex sleep
    // and wake-up costs more than that (Note [Replay by device]).
    for (int round = 0; round < kSpinRounds; ++round) {
      if (flags_[s].made.load(std::memory_order_acquire) == kMade) return;
      pause();
    }
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    for (;;) {
      const uint8_t f = flags_[s].made.load(std::memory_order_seq_cst);
      if (f == kMade) break;
      if (stopped_.load(std::memory_order_acquire)) {
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        throw LaneStopped{};
      }
      flags_[s].made.wait(f, std::memory_order_acquire);
    }
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }
  // Every slot pending again, nothing stopped: flags kept from one replay to the next (Note
  // [Lane scratch] in runtime/jit_replay.cpp). Only while no lane runs.
  void reset() {
    for (auto& f : flags_) f.made.store(kPending, std::memory_order_relaxed);
    stopped_.store(false, std::memory_order_relaxed);
    sleepers_.store(0, std::memory_order_relaxed);
  }
  size_t size() const { return flags_.size(); }
  // Wakes every waiter and makes every later wait throw LaneStopped.
  void stop() {
    stopped_.store(true, std::memory_order_release);
    for (auto& f : flags_) {
      uint8_t expected = kPending;
      f.made.compare_exchange_strong(expected, kStopped, std::memory_order_acq_rel);
      f.made.notify_all();
    }
  }

 private:
  static constexpr uint8_t kPending = 0, kMade = 1, kStopped = 2;
  static constexpr int kSpinRounds = 2000;  // tens of microseconds: shorter than a sleep and wake-up
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  struct alignas(64) Flag {
    std::atomic<uint8_t> made{kPending};
  };
  std::vector<Flag> flags_;
  std::atomic<bool> stopped_{false};
  mutable std::atomic<int> sleepers_{0};  // lanes blocked (or about to block) in wait_made
};

// Worker threads kept between replays: lane k > 0 runs on worker k - 1.
class DeviceLanes {
 public:
  DeviceLanes();  // out of line: Worker is complete only in device_lanes.cpp
  DeviceLanes(const DeviceLanes&) = delete;
  DeviceLanes& operator=(const DeviceLanes&) = delete;
  ~DeviceLanes();

  // Runs lane(k) for every k in [0, n) at once, lane 0 on the calling thread, and returns when all
  // have returned. `on_failure` runs once, on the lane that failed first (it must wake the others:
  // SlotFlags::stop); the first failure is then rethrown here.
  void run(size_t n, const std::function<void(size_t)>& lane, const std::function<void()>& on_failure);

 private:
  struct Worker;
  void ensure(size_t workers);
  void run_lane(size_t k);

  std::vector<std::unique_ptr<Worker>> workers_;
  const std::function<void(size_t)>* lane_ = nullptr;
  const std::function<void()>* on_failure_ = nullptr;
  std::atomic<int> pending_{0};
  std::atomic<bool> caller_sleeping_{false};  // run() is blocked on pending_ (Note [Waking only sleepers])
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace ravel::detail
