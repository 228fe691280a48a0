// Where a Jit replay's time goes, step by step and lane by lane (RAVEL_JIT_PROFILE=1).
#pragma once

#include <chrono>
#include <vector>

namespace ravel::detail::jit_capture {

struct Capture;

// Note [Replay profile]
// A data-parallel step replayed by device (Note [Replay by device]) costs more than its kernels:
// the hand-off to the lanes' threads, the waits for another lane's buffers, the collectives.
// With RAVEL_JIT_PROFILE=1 every replay stamps each step's wait (for its operands made by another
// lane), its launch (for a device without a queue: the kernel's run), and each lane's start and
// end, relative to the replay's start; the sums per capture and replay kind (in order / by
// device) are printed to stderr at exit, one line per step and a summary per lane. Unset, the
// replay pays one branch per step (`ReplayClock::on` is read once per replay).
using ProfileClock = std::chrono::steady_clock;

struct StepTimes {
  double wait_us = 0, launch_us = 0;  // this replay's wait for operands, and launch
};
struct LaneTimes {
  double start_us = 0, end_us = 0, wait_us = 0, launch_us = 0;  // from the replay's start
};

class ReplayClock {
 public:
  // Inactive (no stamps) unless RAVEL_JIT_PROFILE=1.
  ReplayClock(const Capture& c, bool by_device);
  ~ReplayClock();  // adds this replay to the process's sums
  ReplayClock(const ReplayClock&) = delete;
  ReplayClock& operator=(const ReplayClock&) = delete;

  bool on() const { return on_; }
  double now_us() const {
    return std::chrono::duration<double, std::micro>(ProfileClock::now() - t0_).count();
  }
  // Called by lane k (its own entries only: no lock).
  void lane_start(size_t k) { lanes_[k].start_us = now_us(); }
  void lane_end(size_t k) { lanes_[k].end_us = now_us(); }
  void step(size_t k, size_t i, double wait_from_us, double launch_from_us, double end_us) {
    steps_[i] = {launch_from_us - wait_from_us, end_us - launch_from_us};
    lanes_[k].wait_us += steps_[i].wait_us;
    lanes_[k].launch_us += steps_[i].launch_us;
  }

 private:
  const Capture& c_;
  bool by_device_, on_;
  ProfileClock::time_point t0_;
  std::vector<StepTimes> steps_;
  std::vector<LaneTimes> lanes_;
};

}  // namespace ravel::detail::jit_capture
