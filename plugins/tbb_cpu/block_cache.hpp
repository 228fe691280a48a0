// Note [Block cache]
// The plugin's caching host allocator. A training step or a benchmark allocates the same sizes
// again and again. Fresh large allocations come from mmap as untouched pages, and the first
// write to each page faults (about 19 ms per 64 MiB on the CI machine, more than the kernel
// that writes it). So freed buffers are kept and handed out again:
//  - size classes: a request is rounded up to a class (64-byte steps up to 1 KiB, then four
//    classes per power of two: 2^k x {1, 1.25, 1.5, 1.75}, so at most 25% is wasted), and a freed
//    block goes back to its class's free list; any later request of that class reuses it. Blocks
//    are 64-byte aligned (a cache line, an AVX-512 vector).
//  - a cap on the bytes held idle (RAVEL_TBB_CACHE_MB, default 1024, or 0 under AddressSanitizer
//    so that it still sees every use-after-free; 0 turns caching off): a block that does not fit
//    is freed. Out of memory drops every idle block and retries once.
//  - statistics (requests, hits, fresh allocations, bytes idle and in use, their peaks), shown by
//    ravel-info in the device's details and printed at shutdown under RAVEL_DEBUG.
// Contents of a new buffer are unspecified by the ABI: fresh blocks are zero-filled (mapped pages,
// or memset below 64 KiB), recycled blocks of every size keep their old contents (zeroing them
// again cost 2-3% of the makemore step, and every kernel overwrites its output). Blocks of 64 KiB and more are mapped directly (huge pages from 2 MiB).
// The cache only fills between initialize() and shutdown(), which empties it.
#pragma once

#include <ravel/plugin_kit.hpp>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace tbbcpu {

struct CacheStats {
  uint64_t requests = 0;     // allocate() calls
  uint64_t hits = 0;         // served from an idle block (no new memory, no page faults)
  uint64_t fresh = 0;        // served by the system allocator
  uint64_t released = 0;     // deallocate() calls
  uint64_t evicted = 0;      // freed because the idle blocks would exceed the cap
  uint64_t idle_bytes = 0, peak_idle_bytes = 0;  // held for reuse
  uint64_t live_bytes = 0, peak_live_bytes = 0;  // handed out (class sizes)
  uint64_t cap_bytes = 0;
};

class BlockCache {
 public:
  static constexpr uint64_t kAlign = 64;

  // The class a request of `bytes` (> 0) is rounded up to, in bytes; index by class_index().
  static uint64_t class_size(uint64_t bytes);
  static int class_index(uint64_t class_bytes);
  static uint64_t class_of_index(int index);  // the inverse of class_index

  // A block of at least `bytes` (a class size, 64-byte aligned), or NULL when out of memory.
  void* allocate(uint64_t bytes);
  // Gives back a block from allocate(bytes); never throws.
  void release(void* data, uint64_t bytes) noexcept;
  // Frees every idle block.
  void drop();
  // initialize() turns caching on (reading RAVEL_TBB_CACHE_MB), shutdown() off (freeing all).
  void set_enabled(bool on);
  CacheStats stats();
  std::string summary();  // one line for RAVEL_DEBUG
  std::string details();  // "key=value; ..." for the device's details (ravel-info)

 private:
  // Never held while taking the registry's lock, so the two cannot deadlock; spins before it
  // sleeps (Note [Registry locks] in plugin_kit.hpp).
  rvl::SpinThenBlockMutex mu_;
  bool enabled_ = false;
  std::vector<std::vector<void*>> free_;  // idle blocks per class index
  CacheStats st_;

  void drop_locked();
  std::string summary_locked() const;
};

BlockCache& block_cache();

}  // namespace tbbcpu
