// tbb_cpu's devices and object registry (Note [Devices]).
#include "devices.hpp"

#include "block_cache.hpp"

#include <tbb/info.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tbbcpu {

namespace {

// An environment variable's value, "" when unset.
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A decimal integer in [lo, hi] and nothing else (no sign, no spaces, no suffix), or throws
// naming the variable: a typo must not silently give one device, or 64.
int64_t parse_int(const char* name, const std::string& text, int64_t lo, int64_t hi, const char* meaning,
                  const char* alternative = "") {
  bool digits = !text.empty() && text.size() <= 18;
  for (char c : text) digits = digits && c >= '0' && c <= '9';
  const int64_t v = digits ? std::strtoll(text.c_str(), nullptr, 10) : -1;
  if (!digits || v < lo || v > hi)
    rvl::invalid(std::string(name) + "='" + text + "' is not " + meaning + ": expected an integer from " +
                 std::to_string(lo) + " to " + std::to_string(hi) + alternative);
  return v;
}

}  // namespace

Config read_config() {
  Config c;
  const std::string devices = env("RAVEL_TBB_DEVICES");
  if (devices == "numa") {
    const std::vector<tbb::numa_node_id> nodes = tbb::info::numa_nodes();
    if (nodes.size() > 1)  // a single node (or none known: {-1}) is one unbound device
      for (size_t i = 0; i < nodes.size() && i < static_cast<size_t>(kMaxDevices); ++i) c.numa_nodes.push_back(nodes[i]);
    c.devices = std::max<int32_t>(1, static_cast<int32_t>(c.numa_nodes.size()));
  } else if (!devices.empty()) {
    c.devices = static_cast<int32_t>(
        parse_int("RAVEL_TBB_DEVICES", devices, 1, kMaxDevices, "a device count", " or numa (one per NUMA node)"));
  }
  // Note [Queues by core count] in devices.hpp.
  const int cores = std::max(1, tbb::info::default_concurrency());
  if (c.devices > 1 && cores >= 2 * c.devices) c.queues = Queues::All;
  const std::string async = env("RAVEL_TBB_ASYNC");
  if (!async.empty()) {
    if (async != "0" && async != "1" && async != "caller")
      rvl::invalid("RAVEL_TBB_ASYNC='" + async + "' is not a mode: expected 0 (no queues), 1 (a queue per device) "
                   "or caller (device 0 on the launching thread, a queue for each other device)");
    c.queues = async == "1" ? Queues::All : async == "caller" ? Queues::Caller : Queues::None;
  }
  const std::string fault = env("RAVEL_TBB_TEST_FAULT");
  if (!fault.empty()) c.fault_at = parse_int("RAVEL_TBB_TEST_FAULT", fault, 1, INT64_MAX / 2, "a kernel number");
  return c;
}

bool has_queue(const Config& c, int32_t i) {
  return c.queues == Queues::All || (c.queues == Queues::Caller && i > 0);
}

bool queues_spin(const Config& c) {
  const int32_t workers = c.queues == Queues::All ? c.devices : c.queues == Queues::Caller ? c.devices - 1 : 0;
  return workers + 1 <= std::max(1, tbb::info::default_concurrency());
}

int threads_for(const Config& c, int32_t i) {
  if (!c.numa_nodes.empty()) return std::max(1, tbb::info::default_concurrency(c.numa_nodes[static_cast<size_t>(i)]));
  const int cores = std::max(1, tbb::info::default_concurrency());
  return c.devices == 1 ? cores : std::max(1, cores / c.devices);
}

State& state() {
  // Never destroyed: the host may call shutdown() from its own static destructors at exit.
  static State* s = new State;
  return *s;
}

int32_t current_device_count() {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.initialized) return static_cast<int32_t>(s.devices.size());
  }
  return read_config().devices;
}

void require_initialized() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) rvl::invalid("backend not initialized: call initialize() first");
}

Device& device_at(int32_t device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) rvl::invalid("backend not initialized: call initialize() first");
  if (device < 0 || device >= static_cast<int32_t>(s.devices.size()))
    rvl::invalid("device " + std::to_string(device) + " does not exist: this plugin has " +
                 std::to_string(s.devices.size()) + " device(s) (RAVEL_TBB_DEVICES)");
  return *s.devices[static_cast<size_t>(device)];
}

rvl_buffer* lookup_buffer(const rvl_buffer* b, const char* what, int32_t device) {
  rvl_buffer* live = state().buffers.get(b, what);
  if (device >= 0 && live->device != device)
    rvl::invalid(std::string(what) + ": the buffer is on device " + std::to_string(live->device) +
                 ", the work on device " + std::to_string(device) +
                 " (move data between devices with buffer_copy_peer)");
  return live;
}

int32_t stream_device(const rvl_stream* st, int32_t fallback, const char* what) {
  if (st == nullptr) return fallback;
  const int32_t device = state().streams.get(st, what)->device;
  if (fallback >= 0 && device != fallback)
    rvl::invalid(std::string(what) + ": the stream belongs to device " + std::to_string(device) +
                 ", the buffer to device " + std::to_string(fallback));
  return device;
}

void submit(Device& d, DeviceQueue::Task task) {
  if (d.queue) d.queue->push(std::move(task));
  else task();
}

void synchronize_device(Device& d) {
  if (!d.queue) return;  // synchronous: everything has completed, errors were returned
  d.queue->drain();
  d.queue->take_error();
}

void destroy_buffer(const rvl_buffer* b) noexcept {
  if (b->release) b->release(b->release_context);
  else if (b->data) block_cache().release(b->data, b->size);
  delete b;
}

}  // namespace tbbcpu
