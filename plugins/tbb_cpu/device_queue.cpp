// The in-order queue of one tbb_cpu device (Note [Device queues]).
#include "device_queue.hpp"

#include <algorithm>
#include <exception>
#include <new>
#include <utility>

namespace tbbcpu {

// Note [Spinning]
// A queue's hand-offs are a producer (the core's thread, launching) and a consumer (the worker),
// and the kernels of a training step are microseconds each: makemore's data-parallel step on two
// devices ran 66 kernels in 6 ms, nearly all of it futex wake-ups (a sleeping worker woken per
// kernel, a sleeping host woken per read; on this VM each costs tens of microseconds). So both
// sides poll for a short while before they sleep: the worker for new work after it ran out, a
// waiter for the ticket it wants. The poll pauses the core between checks (and yields now and
// then), and gives up after about kSpinRounds checks: an idle device costs no CPU beyond that.
// Only where the workers and the host thread fit on the cores: with more threads than cores a
// spinning thread takes the core from the very thread it waits for (four devices on two cores
// went from 6 to 15 ms per makemore step).
namespace {
constexpr int kSpinRounds = 4000;

inline void relax(int round) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
  if ((round & 63) == 63) std::this_thread::yield();
}
}  // namespace

DeviceQueue::DeviceQueue(int32_t device, tbb::task_arena* arena, bool spin)
    : device_(device), arena_(arena), spin_rounds_(spin ? kSpinRounds : 0), worker_([this] { run(); }) {}

DeviceQueue::~DeviceQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stop_seen_.store(true, std::memory_order_release);
  }
  work_cv_.notify_one();
  worker_.join();  // the worker runs every queued task before it sees stop_
}

uint64_t DeviceQueue::push_locked(Task&& task) {
  tasks_.push_back(std::move(task));
  pushed_seen_.store(pushed_ + 1, std::memory_order_release);
  return ++pushed_;
}

uint64_t DeviceQueue::push(Task task) {
  uint64_t ticket;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = push_locked(std::move(task));
    wake = sleeping_;  // a spinning worker sees pushed_seen_ (Note [Spinning])
  }
  if (wake) work_cv_.notify_one();
  return ticket;
}

void DeviceQueue::push_pair(DeviceQueue& a, Task on_a, DeviceQueue& b, Task on_b) {
  {
    std::scoped_lock lock(a.mu_, b.mu_);  // deadlock-free acquisition of both
    a.push_locked(std::move(on_a));
    b.push_locked(std::move(on_b));
  }
  a.work_cv_.notify_one();  // both may be asleep; a notify with no waiter costs no system call
  b.work_cv_.notify_one();
}

void DeviceQueue::push_group(std::vector<std::pair<DeviceQueue*, Task>> group) {
  // Locks in device order: any two groups (and push_pair's scoped_lock, which backs off rather
  // than wait holding a lock) acquire shared queues consistently.
  std::sort(group.begin(), group.end(), [](const auto& a, const auto& b) { return a.first->device_ < b.first->device_; });
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(group.size());
  for (auto& g : group) locks.emplace_back(g.first->mu_);
  for (auto& g : group) g.first->push_locked(std::move(g.second));
  locks.clear();
  for (auto& g : group) g.first->work_cv_.notify_one();
}

uint64_t DeviceQueue::last_ticket() {
  std::lock_guard<std::mutex> lock(mu_);
  return pushed_;
}

bool DeviceQueue::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ == pushed_;
}

// No deadline: the only party waited for is this plugin's own worker, which always finishes a
// task (kernels are validated before they are queued; a task that waits for another queue waits
// for an earlier task there, Note [Device queues]).
void DeviceQueue::wait(uint64_t ticket) {
  for (int round = 0; round < spin_rounds_; ++round) {  // Note [Spinning]
    if (done_seen_.load(std::memory_order_acquire) >= ticket) return;
    relax(round);
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (done_ >= ticket) return;
  ++waiters_;
  done_cv_.wait(lock, [&] { return done_ >= ticket; });
  --waiters_;
}

void DeviceQueue::take_error() {
  std::string message;
  rvl_status code;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_code_ == RVL_STATUS_OK) return;
    code = error_code_;
    message = std::move(error_message_);
    error_code_ = RVL_STATUS_OK;
    error_message_.clear();
  }
  rvl::fail(code, "device " + std::to_string(device_) + ": queued work failed: " + message);
}

void DeviceQueue::record(rvl_status code, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_code_ != RVL_STATUS_OK) return;  // the first error is the one that explains the rest
  error_code_ = code;
  error_message_ = message;
}

// The worker enters the device's arena once and runs every task inside it (entering it per task
// cost a few microseconds each).
void DeviceQueue::run() {
  if (arena_) arena_->execute([&] { loop(); });
  else loop();
}

void DeviceQueue::loop() {
  uint64_t taken = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (tasks_.empty() && !stop_) {
      lock.unlock();  // Note [Spinning]: poll a while for the next task before sleeping
      for (int round = 0; round < spin_rounds_; ++round) {
        if (pushed_seen_.load(std::memory_order_acquire) > taken || stop_seen_.load(std::memory_order_acquire)) break;
        relax(round);
      }
      lock.lock();
      sleeping_ = true;
      work_cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      sleeping_ = false;
    }
    if (tasks_.empty()) return;  // stop_, and nothing is left to run
    ++taken;
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    try {
      task();
    } catch (const rvl::Error& e) {
      record(e.code(), e.what());
    } catch (const std::bad_alloc&) {
      record(RVL_STATUS_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
      record(RVL_STATUS_INTERNAL, e.what());
    } catch (...) {
      record(RVL_STATUS_INTERNAL, "unknown exception");
    }
    task = nullptr;  // what the task captured (program copies, buffers to free) goes now
    lock.lock();
    ++done_;
    done_seen_.store(done_, std::memory_order_release);
    if (waiters_ > 0) done_cv_.notify_all();
  }
}

}  // namespace tbbcpu
