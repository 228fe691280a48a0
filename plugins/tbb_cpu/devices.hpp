// Note [Devices]
// tbb_cpu exposes RAVEL_TBB_DEVICES=N devices (1..64, default 1; JAX's
// --xla_force_host_platform_device_count), so that sharded programs and transfers between devices
// run on any machine; RAVEL_TBB_DEVICES=numa gives one device per NUMA node, each arena bound to
// its node (one device where oneTBB sees one node, or cannot see the topology). The plugin has no other configuration channel (the ABI passes no config),
// so the environment is it: read by probe() and device_count() until initialize(), which fixes
// the configuration until shutdown() (a test may change the variable and initialise again).
// Each device has
//  - a share of the cores: max(1, cores / N) threads, a oneTBB task_arena of that concurrency in
//    which all the device's kernels run, queued or not (with N = 1 no arena: kernels run on the
//    calling thread and the global arena, exactly as before devices existed);
//  - its own memory accounting: memory_bytes = physical memory / N, a counter of the bytes its
//    live buffers hold (allocation beyond the share is OUT_OF_MEMORY), both in the properties;
//  - an in-order queue (Note [Device queues]) when execution is asynchronous (Note [Queues by
//    core count]). With one device the queue buys nothing and costs a thread hand-off per kernel
//    (docs/performance.md), so one device runs synchronously.
// Memory itself comes from the one block cache (Note [Block cache]): host memory is host memory,
// only its accounting is per device.
#pragma once

#include "device_queue.hpp"

#include <ravel/backend.hpp>
#include <ravel/plugin_kit.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace tbbcpu {

constexpr int32_t kMaxDevices = 64;

// Note [Queues by core count]
// Two devices compute at once only if launching a kernel returns before it has run: the core
// launches device 0's kernels, then device 1's, and waits only to read. But a queue's worker is a
// thread, and where workers and the launching thread outnumber the cores every hand-off is a
// sleep and a wake-up (6.3 ms for a 2-device makemore step on 2 cores, against 0.24 ms with no
// queues at all). So, with N devices on C cores:
//  - C >= 2N: a queue per device (All; RAVEL_TBB_ASYNC=1 forces it);
//  - else no queues (None; RAVEL_TBB_ASYNC=0), one device after another;
//  - RAVEL_TBB_ASYNC=caller: device 0 runs its kernels on the launching thread, devices 1..N-1
//    on queues: N busy threads, and while the host computes device 0's kernel the workers compute
//    the others' (the core interleaves the devices' kernels, Note [Device interleaving] in
//    core/src/schedule/interleave.cpp). Meant for N <= C < 2N, but not the default there: on
//    this shared 2-core VM it measured slower than None (a 2-device makemore step 290-400 us
//    against 215, docs/performance.md §6): a worker preempted while the host waits for it costs
//    more than the overlap gains. To be measured again on an idle machine.
// Workers and waiters poll before they sleep only where workers + the host fit on the cores.
enum class Queues { None, All, Caller };

struct Config {
  int32_t devices = 1;
  // RAVEL_TBB_DEVICES=numa: one device per NUMA node, its arena bound to the node (oneTBB's
  // tbbbind); the node of each device, empty when devices are not bound.
  std::vector<int> numa_nodes;
  Queues queues = Queues::None;
  int64_t fault_at = 0;  // RAVEL_TBB_TEST_FAULT: the n-th queued kernel fails (tests only); 0: never
};
// Whether device i has a queue, and whether queue hand-offs poll before sleeping.
bool has_queue(const Config& c, int32_t i);
bool queues_spin(const Config& c);
// Reads RAVEL_TBB_DEVICES, RAVEL_TBB_ASYNC and RAVEL_TBB_TEST_FAULT strictly; throws
// rvl::Error(INVALID_ARGUMENT) naming the variable, its value and what is expected.
Config read_config();
// The threads of device `i`: all the cores for one device, the node's cores for a NUMA device,
// else max(1, cores / N).
int threads_for(const Config& c, int32_t i);

// Its own cache line or more: `used` changes with every allocation, from the device's own host
// thread in a Jit replay by device (Note [Registry locks] in plugin_kit.hpp).
struct alignas(64) Device {
  int32_t index = 0;
  int threads = 1;
  int numa_node = -1;  // -1: not bound
  uint64_t memory_limit = 0;
  std::atomic<uint64_t> used{0};             // bytes held by live buffers (as requested)
  std::unique_ptr<tbb::task_arena> arena;    // its share of the cores; NULL with one device
  std::unique_ptr<DeviceQueue> queue;        // NULL: synchronous (declared last: joined first)
};

}  // namespace tbbcpu

// The ABI's opaque objects. A buffer is host memory owned by one device; it is freed through the
// device's queue (after the work queued on it), so `data` stays valid for every queued task.
struct rvl_buffer {
  std::byte* data;  // NULL only when size == 0
  uint64_t size;    // bytes
  int32_t device;
  void (*release)(void*) = nullptr;  // buffer_wrap (ABI 1.2): memory someone else owns
  void* release_context = nullptr;
};
// Every stream of a device is that device's one queue (stricter ordering than the ABI asks).
struct rvl_stream {
  int32_t device;
};
// An event marks a point of its device's queue: the ticket of the last task queued before it.
struct rvl_event {
  int32_t device;
  uint64_t ticket;
};

namespace tbbcpu {

// Everything between initialize and shutdown. One lock guards the flag; the device list itself is
// only written by initialize/shutdown, which the host never runs concurrently with other calls.
// The live handles are in the SDK's registry (<ravel/plugin_kit.hpp>), one set per kind.
struct State {
  std::mutex mu;
  bool initialized = false;
  Config config;
  std::vector<std::unique_ptr<Device>> devices;
  rvl::LiveSet<rvl_buffer> buffers{"buffer"};
  rvl::LiveSet<rvl_stream> streams{"stream"};
  rvl::LiveSet<rvl_event> events{"event"};
  std::atomic<int64_t> kernels_queued{0};  // for RAVEL_TBB_TEST_FAULT
};
State& state();

// The device count the plugin reports now: the fixed one while initialised, else the
// environment's (throws on a bad RAVEL_TBB_DEVICES).
int32_t current_device_count();
// Throws INVALID_ARGUMENT unless initialised; returns the device.
Device& device_at(int32_t device);
void require_initialized();
// Throws unless `b` is a live buffer (of `device`, when device >= 0).
rvl_buffer* lookup_buffer(const rvl_buffer* b, const char* what, int32_t device = -1);
// The device of a stream: NULL means `fallback`; a live stream of another device is refused.
int32_t stream_device(const rvl_stream* s, int32_t fallback, const char* what);
using rvl::check_range;  // [offset, offset + bytes) inside `size` bytes, without overflow
// Runs `task` on the device: queued when the device has a queue, else now on this thread.
// (Kernels run inside the device's arena either way: see run_on in plugin.cpp.)
void submit(Device& d, DeviceQueue::Task task);
// Waits for the device's queued work and throws its pending asynchronous error, if any.
void synchronize_device(Device& d);
// Returns a buffer's memory to its owner and deletes the handle (not the registry entry).
void destroy_buffer(const rvl_buffer* b) noexcept;

}  // namespace tbbcpu
