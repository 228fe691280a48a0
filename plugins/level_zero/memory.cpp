#include "memory.hpp"

#include <ravel/backend.hpp>

#include <algorithm>
#include <bit>

namespace rvl::l0 {

namespace {
constexpr uint64_t kMinBlock = 256;
constexpr uint64_t kMaxCached = uint64_t(2) << 30;  // cache at most 2 GiB of freed blocks
constexpr uint64_t kChunk = uint64_t(1) << 20;      // arena chunk
}  // namespace

// Powers of two up to 64 MiB (at most 2x waste on small blocks, which dominate), then 16 MiB
// steps for large ones.
uint64_t DeviceAllocator::size_class(uint64_t bytes) {
  bytes = std::max(bytes, kMinBlock);
  if (bytes <= (uint64_t(64) << 20)) return std::bit_ceil(bytes);
  const uint64_t step = uint64_t(16) << 20;
  return (bytes + step - 1) / step * step;
}

void* DeviceAllocator::driver_alloc(uint64_t bytes) {
  ze_device_mem_alloc_desc_t desc{};
  desc.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC;
  void* p = nullptr;
  const ze_result_t r = ze_.zeMemAllocDevice(dev_.context, &desc, bytes, 64, dev_.handle, &p);
  if (r == ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY || r == ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    return nullptr;
  ze_check(r, "zeMemAllocDevice");
  return p;
}

void* DeviceAllocator::allocate(uint64_t bytes, uint64_t* capacity) {
  const uint64_t cls = size_class(bytes);
  *capacity = cls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(cls);
    if (it != free_.end()) {
      void* p = it->second;
      free_.erase(it);
      cached_bytes_ -= cls;
      return p;
    }
  }
  if (void* p = driver_alloc(cls)) return p;
  trim();  // out of memory: give the cache back and try once more
  return driver_alloc(cls);
}

void DeviceAllocator::release(void* p, uint64_t capacity, bool device_busy) {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_busy) {
    deferred_.emplace_back(capacity, p);
    return;
  }
  if (cached_bytes_ + capacity > kMaxCached) {
    ze_.zeMemFree(dev_.context, p);
    return;
  }
  free_.emplace(capacity, p);
  cached_bytes_ += capacity;
}

void DeviceAllocator::device_idle() {
  std::vector<std::pair<uint64_t, void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(deferred_);
  }
  for (auto& [cap, p] : blocks) release(p, cap, false);
}

bool DeviceAllocator::has_deferred() {
  std::lock_guard<std::mutex> lock(mu_);
  return !deferred_.empty();
}

void DeviceAllocator::trim() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [cap, p] : free_) ze_.zeMemFree(dev_.context, p);
  free_.clear();
  cached_bytes_ = 0;
}

void DeviceAllocator::release_all() {
  device_idle();
  trim();
}

Arena::~Arena() {
  for (const Chunk& c : chunks_) ze_.zeMemFree(dev_.context, c.base);
}

void* Arena::take(uint64_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  while (current_ < chunks_.size() && used_ + bytes > chunks_[current_].size) {
    ++current_;
    used_ = 0;
  }
  if (current_ == chunks_.size()) {
    const uint64_t size = std::max(kChunk, bytes);
    void* p = nullptr;
    ze_result_t r;
    if (kind_ == Kind::Host) {
      ze_host_mem_alloc_desc_t desc{};
      desc.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC;
      r = ze_.zeMemAllocHost(dev_.context, &desc, size, 64, &p);
    } else {
      ze_device_mem_alloc_desc_t desc{};
      desc.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC;
      r = ze_.zeMemAllocDevice(dev_.context, &desc, size, 64, dev_.handle, &p);
    }
    ze_check(r, kind_ == Kind::Host ? "zeMemAllocHost (staging)" : "zeMemAllocDevice (meta)");
    chunks_.push_back({static_cast<char*>(p), size});
    used_ = 0;
  }
  void* out = chunks_[current_].base + used_;
  used_ += bytes;
  in_use_ += bytes;
  return out;
}

void Arena::reset() {
  // Keep a few chunks for the next burst; give large one-off chunks back.
  while (chunks_.size() > 4) {
    ze_.zeMemFree(dev_.context, chunks_.back().base);
    chunks_.pop_back();
  }
  current_ = 0;
  used_ = 0;
  in_use_ = 0;
}

}  // namespace rvl::l0
