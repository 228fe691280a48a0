// Note [Device queues]
// With several tbb_cpu devices (RAVEL_TBB_DEVICES=N > 1, Note [Devices]), each device gets one
// in-order queue: a worker thread that runs the device's work, one task after another, inside
// the device's oneTBB arena (its share of the cores). The core launches kernels one after another
// on each device's default stream and only waits when it reads a result, so a launch must return
// at once for two devices to compute at the same time: a synchronous launch would run device 1's
// kernels only after device 0's, and two devices with half the cores each would be twice as slow
// as one.
//
// Contract:
//  - push() appends a task and returns its ticket (1, 2, 3, ...); tasks run in ticket order, on
//    the worker thread, inside the arena;
//  - wait(t) blocks until every task up to ticket t has run (finished or failed);
//  - a task that throws records the first error (code and message) and the queue goes on with the
//    next task: take_error() hands that error to the next synchronising call on the device (the
//    CUDA model: an asynchronous failure surfaces at the next synchronisation, and it is never
//    lost or reported twice);
//  - push_pair() appends one task to each of two queues under both locks, so that every pair of
//    queues sees two-sided tasks (peer copies) in the same relative order: tasks that wait for
//    each other can then never wait in a cycle (Note [Peer copies] in memory.cpp);
//  - push_group() does the same for n queues (all_reduce's n-sided barrier, Note [Host
//    all-reduce] in collective.cpp), taking the locks in one global order (the queues' device
//    indices), so it cannot deadlock with another group or a pair;
//  - the destructor runs what is queued and joins the worker.
// Every device that has a queue uses it for all its work (kernels, copies, frees of its buffers),
// which is what makes a buffer's device queue the one place that orders every access to it.
#pragma once

#include <ravel/backend.hpp>

#include <tbb/task_arena.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tbbcpu {

class DeviceQueue {
 public:
  using Task = std::function<void()>;

  // Starts the worker, which runs every task inside `arena` (the device's share of the cores),
  // or in its own default arena when `arena` is NULL (one device: all the cores).
  // `spin`: poll before sleeping (Note [Spinning]); only where the workers and the host thread
  // do not outnumber the cores.
  DeviceQueue(int32_t device, tbb::task_arena* arena, bool spin);
  ~DeviceQueue();
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  uint64_t push(Task task);
  static void push_pair(DeviceQueue& a, Task on_a, DeviceQueue& b, Task on_b);
  // One task per queue, queued atomically; the queues are distinct.
  static void push_group(std::vector<std::pair<DeviceQueue*, Task>> group);
  // The ticket of the last task pushed (0 before any).
  uint64_t last_ticket();
  // True when every task pushed so far has run.
  bool idle();
  void wait(uint64_t ticket);
  void drain() { wait(last_ticket()); }
  // Throws (rvl::Error) the first error a task raised since the last take_error, clearing it.
  void take_error();
 private:
  void run();
  uint64_t push_locked(Task&& task);
  void record(rvl_status code, const std::string& message);

  void loop();

  const int32_t device_;
  tbb::task_arena* const arena_;
  const int spin_rounds_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Task> tasks_;
  uint64_t pushed_ = 0, done_ = 0;
  int waiters_ = 0;
  bool stop_ = false;
  bool sleeping_ = false;  // the worker waits on work_cv_: a push must wake it
  // Note [Spinning]: copies of pushed_ and done_ (and stop_) that the worker and waiters poll
  // without the lock for a few microseconds before they sleep.
  std::atomic<uint64_t> pushed_seen_{0}, done_seen_{0};
  std::atomic<bool> stop_seen_{false};
  rvl_status error_code_ = RVL_STATUS_OK;
  std::string error_message_;
  std::thread worker_;  // last: started once everything above exists
};

}  // namespace tbbcpu
