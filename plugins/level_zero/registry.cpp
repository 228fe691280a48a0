#include "registry.hpp"

#include <ravel/backend.hpp>

#include <string>

namespace rvl::l0 {

Registry& registry() {
  // Never destroyed: the host may call shutdown() from its static destructors at exit.
  static Registry* r = new Registry;
  return *r;
}

DeviceState& device_state(int32_t device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.initialized) invalid("level_zero: backend not initialized: call initialize() first");
  if (device < 0 || size_t(device) >= r.devices.size())
    invalid("level_zero: device " + std::to_string(device) + " does not exist, expected 0.." +
            std::to_string(int64_t(r.devices.size()) - 1));
  return *r.devices[size_t(device)];
}

rvl_buffer* lookup_buffer(const rvl_buffer* b, const char* what) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (b == nullptr || r.buffers.count(b) == 0)
    invalid(std::string(what) + ": buffer " + (b ? "is not live (freed or foreign)" : "is NULL"));
  return const_cast<rvl_buffer*>(b);
}

rvl_event* lookup_event(const rvl_event* e, const char* what) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (e == nullptr || r.events.count(e) == 0)
    invalid(std::string(what) + ": not a live event");
  return const_cast<rvl_event*>(e);
}

rvl_stream& resolve_stream(rvl_stream* s, DeviceState* dev, const char* what) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.initialized) invalid("level_zero: backend not initialized: call initialize() first");
  if (s == nullptr) {
    if (!dev) invalid(std::string(what) + ": no device to take the default stream of");
    return *dev->default_stream;
  }
  if (r.streams.count(s) == 0) invalid(std::string(what) + ": stream is not live (destroyed or foreign)");
  if (dev && &s->dev != dev)
    invalid(std::string(what) + ": the stream belongs to device " +
            std::to_string(s->dev.dev.index) + ", the work to device " +
            std::to_string(dev->dev.index));
  return *s;
}

bool device_busy(DeviceState& dev) {
  std::lock_guard<std::mutex> lock(dev.streams_mu);
  for (const rvl_stream* s : dev.streams)
    if (s->pending) return true;
  return false;
}

void synchronize_device(DeviceState& dev) {
  std::vector<rvl_stream*> streams;
  {
    std::lock_guard<std::mutex> lock(dev.streams_mu);
    streams = dev.streams;
  }
  for (rvl_stream* s : streams) s->synchronize();
  dev.alloc.device_idle();
}

}  // namespace rvl::l0
