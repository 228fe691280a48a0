// RAVEL_JIT_PROFILE=1: the sums of every replay's step and lane times, printed at exit
// (Note [Replay profile] in runtime/jit_profile.hpp).
#include "runtime/jit_profile.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/jit_capture.hpp"

namespace ravel::detail::jit_capture {

namespace {

bool jit_profiling() {
  static const bool on = [] {
    const char* v = std::getenv("RAVEL_JIT_PROFILE");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

// One capture's sums over its replays of one kind.
struct ReplaySums {
  std::vector<std::string> labels;  // per step: "kernel label, bytes, device" or the host op
  std::vector<int32_t> lane_of;
  std::vector<StepTimes> steps;
  std::vector<LaneTimes> lanes;
  std::vector<double> walls;  // per replay, us
};

class ReplayProfile {
 public:
  ~ReplayProfile() {
    std::lock_guard<std::mutex> lock(mu_);
    int id = 0;
    for (auto& [key, s] : sums_) print(id++, key.second, s);
  }
  void add(const Capture& c, bool by_device, const std::vector<StepTimes>& steps, const std::vector<LaneTimes>& lanes,
           double wall_us) {
    std::lock_guard<std::mutex> lock(mu_);
    ReplaySums& s = sums_[{&c, by_device}];
    if (s.steps.size() != steps.size()) {  // first replay (or another capture at a reused address)
      s = ReplaySums{};
      for (const Step& step : c.steps) {
        const Slot& o = c.slots[step.host ? (step.host_slots.empty() ? 0 : step.host_slots[0]) : step.out];
        s.labels.push_back(step.host ? step.label() + (step.host_end ? " (end)" : " (begin)")
                                     : step.label() + " " + std::to_string(o.bytes) + " B " + o.device.str());
      }
      s.lane_of = c.lane_of;
      s.steps.assign(steps.size(), {});
      s.lanes.assign(lanes.size(), {});
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      s.steps[i].wait_us += steps[i].wait_us;
      s.steps[i].launch_us += steps[i].launch_us;
    }
    for (size_t k = 0; k < lanes.size(); ++k) {
      s.lanes[k].start_us += lanes[k].start_us;
      s.lanes[k].end_us += lanes[k].end_us;
      s.lanes[k].wait_us += lanes[k].wait_us;
      s.lanes[k].launch_us += lanes[k].launch_us;
    }
    s.walls.push_back(wall_us);
  }

 private:
  static void print(int id, bool by_device, ReplaySums& s) {
    const double n = static_cast<double>(s.walls.size());
    std::sort(s.walls.begin(), s.walls.end());
    std::fprintf(stderr, "ravel: Jit profile, capture %d replayed %s, %zu replays: median %.1f us, mean per replay:\n",
                 id, by_device ? "by device" : "in order", s.walls.size(), s.walls[s.walls.size() / 2]);
    for (size_t i = 0; i < s.steps.size(); ++i)
      std::fprintf(stderr, "  step %3zu lane %d  wait %8.2f us  launch %8.2f us  %s\n", i, by_device ? s.lane_of[i] : 0,
                   s.steps[i].wait_us / n, s.steps[i].launch_us / n, s.labels[i].c_str());
    for (size_t k = 0; k < s.lanes.size(); ++k)
      std::fprintf(stderr, "  lane %zu: starts at %.2f us, ends at %.2f us; waits %.2f us, launches %.2f us\n", k,
                   s.lanes[k].start_us / n, s.lanes[k].end_us / n, s.lanes[k].wait_us / n, s.lanes[k].launch_us / n);
  }
  std::mutex mu_;
  std::map<std::pair<const Capture*, bool>, ReplaySums> sums_;
};

ReplayProfile& replay_profile() {
  static ReplayProfile p;
  return p;
}

}  // namespace

ReplayClock::ReplayClock(const Capture& c, bool by_device)
    : c_(c), by_device_(by_device), on_(jit_profiling()), t0_(ProfileClock::now()) {
  if (!on_) return;
  replay_profile();  // constructed before the first replay ends: destroyed (and printed) after it
  steps_.assign(c.steps.size(), {});
  lanes_.assign(by_device ? static_cast<size_t>(c.lanes) : 1, {});
}

ReplayClock::~ReplayClock() {
  if (on_) replay_profile().add(c_, by_device_, steps_, lanes_, now_us());
}

}  // namespace ravel::detail::jit_capture
