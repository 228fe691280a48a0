// Device memory: a caching allocator for buffers and bump arenas for per-launch data.
//
// Note [Buffer reuse]: zeMemAlloc/zeMemFree are slow (page-table updates, often a device-wide
// synchronisation in the driver) and a training step frees and allocates the same sizes every
// step, so freed blocks are kept in size classes and handed out again. A block freed while
// queued work may still use it (the host frees a temporary right after enqueueing its last
// reader) is *deferred*: it becomes reusable only after the device is idle, never earlier, so
// a kernel never sees its input overwritten by the next owner. Cached memory is returned to the
// driver when an allocation fails (then retried) and at shutdown.
#pragma once

#include <level_zero/ze_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "device.hpp"

namespace rvl::l0 {

class DeviceAllocator {
 public:
  DeviceAllocator(const ZeApi& ze, const Device& dev) : ze_(ze), dev_(dev) {}
  ~DeviceAllocator() { release_all(); }

  // A block of at least `bytes` (> 0), from the cache or the driver; nullptr when the driver is
  // out of memory even after the cache was emptied. `capacity` receives the block's size class.
  void* allocate(uint64_t bytes, uint64_t* capacity);
  // Gives a block back. `device_busy`: queued work may still use it (Note [Buffer reuse]).
  void release(void* p, uint64_t capacity, bool device_busy);
  // The device is idle: deferred blocks become reusable.
  void device_idle();
  bool has_deferred();
  // Returns every cached (not deferred) block to the driver.
  void trim();
  void release_all();  // shutdown: everything, deferred included (the device is idle)

  static uint64_t size_class(uint64_t bytes);

 private:
  void* driver_alloc(uint64_t bytes);

  const ZeApi& ze_;
  const Device& dev_;
  std::mutex mu_;
  std::multimap<uint64_t, void*> free_;      // capacity -> block
  std::vector<std::pair<uint64_t, void*>> deferred_;
  uint64_t cached_bytes_ = 0;
};

// Bump allocation of short-lived data (kernel meta blocks, staged host copies) that must stay
// alive until the work using it has run: everything is released at once by reset(), which the
// stream calls after the host waited for it. Chunks are kept for reuse.
class Arena {
 public:
  enum class Kind { Host, Device };
  Arena(const ZeApi& ze, const Device& dev, Kind kind) : ze_(ze), dev_(dev), kind_(kind) {}
  ~Arena();
  void* take(uint64_t bytes);  // 64-byte aligned; throws OUT_OF_MEMORY
  void reset();
  uint64_t in_use() const { return in_use_; }

 private:
  struct Chunk {
    char* base;
    uint64_t size;
  };
  const ZeApi& ze_;
  const Device& dev_;
  Kind kind_;
  std::vector<Chunk> chunks_;
  size_t current_ = 0;
  uint64_t used_ = 0;    // in chunks_[current_]
  uint64_t in_use_ = 0;  // bytes handed out since reset()
};

}  // namespace rvl::l0
