#include "runtime/device_lanes.hpp"

#include <chrono>

namespace ravel::detail {

// Note [Waking only sleepers]
// A replay by device hands each worker its lane and waits for the lanes to end: two hand-offs per
// replay, and a flag per kernel for the lanes that read another lane's buffers. As first built,
// each was an atomic wait/notify: the worker slept between replays, so every replay's start paid
// a futex wake-up (the second lane started 14-28 us after the first in a 200-300 us makemore
// step, and the first lane then waited for it at the loss's all-reduce), and every notify was a
// system call whether or not anyone slept. Now
//  - a worker spins for kIdleSpin after its lane before it sleeps (a training loop calls the
//    step again within that: the next hand-off is a store the spinning worker sees), and the
//    caller spins for kIdleSpin on the lanes' end likewise;
//  - a notify is made only when the other side said it sleeps: the sleeper stores its flag and
//    then reads the condition, the waker stores the condition and then reads the flag, all
//    sequentially consistent, so at least one of the two sees the other (no lost wake-up).
// The spinning costs a core for at most kIdleSpin after a replay: the replay used every core.
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kIdleSpin = std::chrono::microseconds(200);

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until pred() or kIdleSpin has passed; returns pred().
template <class Pred>
bool spin_for(Pred&& pred) {
  const Clock::time_point until = Clock::now() + kIdleSpin;
  for (int i = 0;; ++i) {
    if (pred()) return true;
    if ((i & 63) == 63 && Clock::now() > until) return pred();
    pause();
  }
}

}  // namespace

struct DeviceLanes::Worker {
  std::thread thread;
  std::atomic<uint64_t> generation{0};  // bumped once per run(): the worker's signal to go
  std::atomic<bool> quit{false};
  std::atomic<bool> sleeping{false};  // blocked (or about to block) on generation
};

DeviceLanes::DeviceLanes() = default;

DeviceLanes::~DeviceLanes() {
  for (auto& w : workers_) {
    w->quit.store(true, std::memory_order_seq_cst);
    w->generation.fetch_add(1, std::memory_order_seq_cst);
    w->generation.notify_one();
  }
  for (auto& w : workers_) w->thread.join();
}

void DeviceLanes::ensure(size_t workers) {
  while (workers_.size() < workers) {
    auto w = std::make_unique<Worker>();
    const size_t k = workers_.size() + 1;
    Worker* self = w.get();
    w->thread = std::thread([this, self, k] {
      uint64_t seen = 0;
      for (;;) {
        if (!spin_for([&] { return self->generation.load(std::memory_order_acquire) != seen; })) {
          self->sleeping.store(true, std::memory_order_seq_cst);
          while (self->generation.load(std::memory_order_seq_cst) == seen)
            self->generation.wait(seen, std::memory_order_acquire);
          self->sleeping.store(false, std::memory_order_relaxed);
        }
        seen = self->generation.load(std::memory_order_acquire);
        if (self->quit.load(std::memory_order_acquire)) return;
        run_lane(k);
        if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_sleeping_.load(std::memory_order_seq_cst))
          pending_.notify_all();
      }
    });
    workers_.push_back(std::move(w));
  }
}

void DeviceLanes::run_lane(size_t k) {
  try {
    (*lane_)(k);
  } catch (const LaneStopped&) {
    // Another lane failed first; its error is the one reported.
  } catch (...) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception(), first = true;
    }
    if (first) (*on_failure_)();
  }
}

void DeviceLanes::run(size_t n, const std::function<void(size_t)>& lane, const std::function<void()>& on_failure) {
  if (n == 0) return;
  ensure(n - 1);
  lane_ = &lane;
  on_failure_ = &on_failure;
  error_ = nullptr;
  pending_.store(static_cast<int>(n - 1), std::memory_order_seq_cst);
  for (size_t k = 1; k < n; ++k) {
    Worker& w = *workers_[k - 1];
    w.generation.fetch_add(1, std::memory_order_seq_cst);
    if (w.sleeping.load(std::memory_order_seq_cst)) w.generation.notify_one();
  }
  run_lane(0);
  if (!spin_for([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    for (int left; (left = pending_.load(std::memory_order_seq_cst)) != 0;) pending_.wait(left, std::memory_order_acquire);
    caller_sleeping_.store(false, std::memory_order_relaxed);
  }
  lane_ = nullptr;
  on_failure_ = nullptr;
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace ravel::detail
