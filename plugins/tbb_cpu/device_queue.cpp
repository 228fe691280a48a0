// The in-order queue of one tbb_cpu device (Note [Device queues]).
#include "device_queue.hpp"

#include <exception>
#include <new>
#include <utility>

namespace tbbcpu {

DeviceQueue::DeviceQueue(int32_t device, tbb::task_arena* arena)
    : device_(device), arena_(arena), worker_([this] { run(); }) {}

DeviceQueue::~DeviceQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();
  worker_.join();  // the worker runs every queued task before it sees stop_
}

uint64_t DeviceQueue::push_locked(Task&& task) {
  tasks_.push_back(std::move(task));
  return ++pushed_;
}

uint64_t DeviceQueue::push(Task task) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = push_locked(std::move(task));
  }
  work_cv_.notify_one();
  return ticket;
}

void DeviceQueue::push_pair(DeviceQueue& a, Task on_a, DeviceQueue& b, Task on_b) {
  {
    std::scoped_lock lock(a.mu_, b.mu_);  // deadlock-free acquisition of both
    a.push_locked(std::move(on_a));
    b.push_locked(std::move(on_b));
  }
  a.work_cv_.notify_one();
  b.work_cv_.notify_one();
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

void DeviceQueue::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop_, and nothing is left to run
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    try {
      if (arena_) arena_->execute([&] { task(); });
      else task();
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
    if (waiters_ > 0) done_cv_.notify_all();
  }
}

}  // namespace tbbcpu
