// Note [Caching allocator]
// hipMalloc/hipFree synchronise the device and cost tens of microseconds; a training step frees
// and allocates the same sizes every iteration. Freed blocks are kept by size class and handed
// out again. Reuse is safe without waiting: work is stream-ordered, the default stream is the
// legacy (synchronising) one and plugin streams are blocking streams, and a buffer last used on
// a plugin stream is fenced into the default stream when it is freed (plugin.cpp), so any later
// user of the block runs after the last use of its previous owner. On hipMalloc failure the
// cache is emptied and the allocation retried once; then OUT_OF_MEMORY says how much was asked
// for and how much is free.
#include "allocator.hpp"

#include "device.hpp"

namespace rvl::hip {

uint64_t size_class(uint64_t bytes) {
  if (bytes <= 512) return 512;
  if (bytes <= (uint64_t(1) << 20)) {
    uint64_t c = 512;
    while (c < bytes) c <<= 1;
    return c;
  }
  const uint64_t chunk = uint64_t(2) << 20;
  return (bytes + chunk - 1) / chunk * chunk;
}

void* Allocator::allocate(int32_t device, uint64_t bytes) {
  const uint64_t cap = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& blocks = free_[device];
    auto it = blocks.find(cap);
    if (it != blocks.end()) {
      void* p = it->second;
      blocks.erase(it);
      cached_ -= cap;
      return p;
    }
  }
  void* p = nullptr;
  hipError_t e = hipMalloc(&p, cap);
  if (e != hipSuccess) {
    empty(device);  // the cached blocks are worth more to the device now
    e = hipMalloc(&p, cap);
  }
  if (e != hipSuccess) {
    size_t free_bytes = 0, total = 0;
    (void)hipMemGetInfo(&free_bytes, &total);
    fail(RVL_STATUS_OUT_OF_MEMORY,
         "hip:" + std::to_string(device) + " (" + hip::device(device).name + "): out of memory: " +
             std::to_string(bytes) + " bytes requested, " + std::to_string(free_bytes) +
             " bytes free of " + std::to_string(total) + " (" + rvl_hip_error(e) + ")");
  }
  return p;
}

void Allocator::release(int32_t device, void* p, uint64_t bytes) noexcept {
  if (!p) return;
  const uint64_t cap = size_class(bytes);
  try {
    std::lock_guard<std::mutex> lock(mu_);
    free_[device].emplace(cap, p);
    cached_ += cap;
  } catch (...) {  // no room for the map node: give the memory back instead
    (void)hipFree(p);
  }
}

void Allocator::empty(int32_t device) noexcept {
  std::multimap<uint64_t, void*> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(device);
    if (it == free_.end()) return;
    blocks.swap(it->second);
    for (auto& [cap, p] : blocks) cached_ -= cap;
  }
  for (auto& [cap, p] : blocks) (void)hipFree(p);
}

void Allocator::empty_all() noexcept {
  std::vector<int32_t> devs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [d, b] : free_) devs.push_back(d);
  }
  for (int32_t d : devs) {
    (void)hipSetDevice(d);
    empty(d);
  }
}

uint64_t Allocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

Allocator& allocator() {
  static auto* a = new Allocator;  // never destroyed: blocks are freed by shutdown()
  return *a;
}

}  // namespace rvl::hip
