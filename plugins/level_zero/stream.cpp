#include "stream.hpp"

#include <ravel/backend.hpp>

#include <cstdint>
#include <cstring>

namespace rvl::l0 {

namespace {
constexpr uint32_t kEventsPerPool = 64;
}

EventPool::~EventPool() {
  for (ze_event_handle_t e : all_) ze_.zeEventDestroy(e);
  for (ze_event_pool_handle_t p : pools_) ze_.zeEventPoolDestroy(p);
}

ze_event_handle_t EventPool::get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) {
    ze_event_pool_desc_t pd{};
    pd.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC;
    pd.flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE;  // the host waits on them
    pd.count = kEventsPerPool;
    ze_event_pool_handle_t pool = nullptr;
    ze_device_handle_t d = dev_.handle;
    ze_check(ze_.zeEventPoolCreate(dev_.context, &pd, 1, &d, &pool), "zeEventPoolCreate");
    pools_.push_back(pool);
    for (uint32_t i = 0; i < kEventsPerPool; ++i) {
      ze_event_desc_t ed{};
      ed.stype = ZE_STRUCTURE_TYPE_EVENT_DESC;
      ed.index = i;
      ed.signal = ZE_EVENT_SCOPE_FLAG_HOST;  // results visible to the host once signalled
      ed.wait = ZE_EVENT_SCOPE_FLAG_HOST;
      ze_event_handle_t e = nullptr;
      ze_check(ze_.zeEventCreate(pool, &ed, &e), "zeEventCreate");
      all_.push_back(e);
      free_.push_back(e);
    }
  }
  ze_event_handle_t e = free_.back();
  free_.pop_back();
  return e;
}

void EventPool::put(ze_event_handle_t e) {
  ze_.zeEventHostReset(e);
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(e);
}

}  // namespace rvl::l0

using rvl::l0::ze_check;

rvl_stream::rvl_stream(rvl::l0::DeviceState& d)
    : dev(d),
      staging(d.ze, d.dev, rvl::l0::Arena::Kind::Host),
      meta(d.ze, d.dev, rvl::l0::Arena::Kind::Device) {
  ze_command_queue_desc_t qd{};
  qd.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
  qd.ordinal = d.dev.compute_ordinal;
  qd.mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
  qd.priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL;
  ze_check(d.ze.zeCommandListCreateImmediate(d.dev.context, d.dev.handle, &qd, &list),
           "zeCommandListCreateImmediate");
}

rvl_stream::~rvl_stream() {
  if (list) dev.ze.zeCommandListDestroy(list);
}

void rvl_stream::write(void* dst, const void* src, uint64_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  void* staged = staging.take(bytes);
  std::memcpy(staged, src, bytes);
  enqueue([&] { return dev.ze.zeCommandListAppendMemoryCopy(list, dst, staged, bytes, nullptr, 0,
                                                            nullptr); },
          "zeCommandListAppendMemoryCopy (host to device)");
}

void* rvl_stream::upload(const void* src, uint64_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  void* d = meta.take(bytes);
  write(d, src, bytes);
  return d;
}

void rvl_stream::signal(ze_event_handle_t e) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  // A barrier that signals: the event fires once everything queued before it has finished.
  ze_check(dev.ze.zeCommandListAppendBarrier(list, e, 0, nullptr), "zeCommandListAppendBarrier");
}

void rvl_stream::wait(ze_event_handle_t e) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  ze_check(dev.ze.zeCommandListAppendWaitOnEvents(list, 1, &e), "zeCommandListAppendWaitOnEvents");
  pending = true;
}

void rvl_stream::wait_idle() {
  std::lock_guard<std::recursive_mutex> lock(mu);
  if (pending) {
    ze_event_handle_t e = dev.events.get();
    struct Put {
      rvl::l0::EventPool& pool;
      ze_event_handle_t e;
      ~Put() { pool.put(e); }
    } put{dev.events, e};
    signal(e);
    ze_check(dev.ze.zeEventHostSynchronize(e, UINT64_MAX), "zeEventHostSynchronize");
    pending = false;
  }
}

void rvl_stream::synchronize() {
  std::lock_guard<std::recursive_mutex> lock(mu);
  wait_idle();
  staging.reset();
  meta.reset();
}
