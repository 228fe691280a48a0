// Streams, events and the per-device state behind them.
//
// Note [Streams]: an rvl_stream is one immediate command list (asynchronous mode) on the
// device's compute engine. Commands in a Level Zero command list may overlap unless separated,
// so every command is followed by a barrier: the stream is in order, as the ABI promises. The
// host never waits while work is queued; it waits (on an event signalled by a barrier after the
// last command) only when it reads a buffer or asks to synchronise. Until then the data the
// queued commands need (staged host copies, kernel meta blocks) lives in the stream's arenas,
// which are reset only after such a wait.
#pragma once

#include <level_zero/ze_api.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "device.hpp"
#include "memory.hpp"
#include "module_cache.hpp"

struct rvl_stream;

namespace rvl::l0 {

// Events come from pools (creating a pool is a driver round trip); freed events are reset and
// reused.
class EventPool {
 public:
  EventPool(const ZeApi& ze, const Device& dev) : ze_(ze), dev_(dev) {}
  ~EventPool();
  ze_event_handle_t get();
  void put(ze_event_handle_t e);

 private:
  const ZeApi& ze_;
  const Device& dev_;
  std::mutex mu_;
  std::vector<ze_event_pool_handle_t> pools_;
  std::vector<ze_event_handle_t> all_, free_;
};

struct DeviceState {
  DeviceState(const ZeApi& z, Device& d) : ze(z), dev(d), alloc(z, d), events(z, d), modules(z, d) {}
  const ZeApi& ze;
  Device& dev;
  DeviceAllocator alloc;
  EventPool events;
  ModuleCache modules;
  rvl_stream* default_stream = nullptr;
  std::mutex streams_mu;
  std::vector<rvl_stream*> streams;  // live streams of this device, the default one included
};

}  // namespace rvl::l0

struct rvl_stream {
  rvl_stream(rvl::l0::DeviceState& d);
  ~rvl_stream();

  // Appends a command followed by a barrier (Note [Streams]); `append` returns its result.
  template <class Append>
  void enqueue(Append&& append, const char* what) {
    std::lock_guard<std::recursive_mutex> lock(mu);
    rvl::l0::ze_check(append(), what);
    rvl::l0::ze_check(dev.ze.zeCommandListAppendBarrier(list, nullptr, 0, nullptr),
                      "zeCommandListAppendBarrier");
    pending = true;
  }
  // Copies host memory that may be freed as soon as the call returns: staged first.
  void write(void* dst, const void* src, uint64_t bytes);
  // Device-visible copy of `bytes` of host data, valid until the next synchronize().
  void* upload(const void* src, uint64_t bytes);
  // The host waits for everything queued so far (wait_idle), and then the arenas are reset.
  void wait_idle();
  void synchronize();
  void signal(ze_event_handle_t e);  // appends a signal of `e` after everything queued
  void wait(ze_event_handle_t e);    // later commands wait for `e`

  rvl::l0::DeviceState& dev;
  ze_command_list_handle_t list = nullptr;
  rvl::l0::Arena staging, meta;
  // Held by whoever appends to the list or resets the arenas. The host serialises calls on one
  // stream, but a device-wide wait (synchronize(device), an allocation that has to recycle
  // deferred blocks) may come from another thread; a launch holds it from uploading its meta
  // block until its kernel is appended.
  std::recursive_mutex mu;
  std::atomic<bool> pending{false};  // work queued since the last synchronize()
};

struct rvl_event {
  rvl::l0::DeviceState* dev;
  ze_event_handle_t handle;
};
