// Device memory: a caching allocator by size class (Note [Caching allocator]).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace rvl::hip {

// The capacity a request of `bytes` is served with: powers of two up to 1 MiB (at least 512
// bytes), multiples of 2 MiB above, so a freed block fits the next request of similar size.
uint64_t size_class(uint64_t bytes);

class Allocator {
 public:
  // A block of size_class(bytes) on `device` (the caller has selected the device). Throws
  // RVL_STATUS_OUT_OF_MEMORY naming the device, the request and the free memory.
  void* allocate(int32_t device, uint64_t bytes);
  // Gives a block back to the cache (never fails; the block is reused by a later allocate).
  void release(int32_t device, void* p, uint64_t bytes) noexcept;
  // hipFree every cached block of the device (out of memory, shutdown).
  void empty(int32_t device) noexcept;
  void empty_all() noexcept;
  uint64_t cached_bytes() const;

 private:
  mutable std::mutex mu_;
  std::map<int32_t, std::multimap<uint64_t, void*>> free_;  // device -> capacity -> blocks
  uint64_t cached_ = 0;
};

Allocator& allocator();

}  // namespace rvl::hip
