#include "runtime/device_lanes.hpp"

namespace ravel::detail {

struct DeviceLanes::Worker {
  std::thread thread;
  std::atomic<uint64_t> generation{0};  // bumped once per run(): the worker's signal to go
  std::atomic<bool> quit{false};
};

DeviceLanes::DeviceLanes() = default;

DeviceLanes::~DeviceLanes() {
  for (auto& w : workers_) {
    w->quit.store(true, std::memory_order_release);
    w->generation.fetch_add(1, std::memory_order_acq_rel);
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
        self->generation.wait(seen, std::memory_order_acquire);
        seen = self->generation.load(std::memory_order_acquire);
        if (self->quit.load(std::memory_order_acquire)) return;
        run_lane(k);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_all();
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
  pending_.store(static_cast<int>(n - 1), std::memory_order_release);
  for (size_t k = 1; k < n; ++k) {
    workers_[k - 1]->generation.fetch_add(1, std::memory_order_acq_rel);
    workers_[k - 1]->generation.notify_one();
  }
  run_lane(0);
  for (int left = pending_.load(std::memory_order_acquire); left != 0; left = pending_.load(std::memory_order_acquire))
    pending_.wait(left, std::memory_order_acquire);
  lane_ = nullptr;
  on_failure_ = nullptr;
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace ravel::detail
