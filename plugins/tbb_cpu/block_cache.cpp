// The caching host allocator: Note [Block cache] in block_cache.hpp.
#include "block_cache.hpp"
#include "tuning_env.hpp"

#include <sys/mman.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace tbbcpu {
namespace {

constexpr int kSmallClasses = 16;  // 64, 128, ..., 1024 bytes

// Under AddressSanitizer the cache is off by default and every block comes from the heap: a
// recycled or mapped block would hide use-after-free and overruns from it.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
constexpr uint64_t kDefaultCap = kSanitized ? 0 : uint64_t{1024} << 20;
constexpr int kClasses = kSmallClasses + 4 * 54;

uint64_t cap_from_env() {
  // At most 1 TiB idle; a larger number (2^44 MiB wrapped the shift) is clamped, with a warning.
  const int64_t mb = tuning_int("RAVEL_TBB_CACHE_MB", static_cast<int64_t>(kDefaultCap >> 20), 0, int64_t{1} << 20);
  return static_cast<uint64_t>(mb) << 20;
}

std::string mib(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  return buf;
}

// Blocks of at least kMapMin bytes are mapped (page aligned, zero-filled by the kernel, given
// back with munmap); those of at least 2 MiB ask for transparent huge pages, so a fresh 64 MiB
// block takes 32 page faults instead of 16384. Smaller blocks come from the heap.
constexpr uint64_t kMapMin = kSanitized ? UINT64_MAX : 64 * 1024;

void* system_allocate(uint64_t c) {
  if (c < kMapMin) {
    void* p = std::aligned_alloc(BlockCache::kAlign, c);
    if (p) std::memset(p, 0, c);
    return p;
  }
  void* p = mmap(nullptr, c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
  if (c >= (uint64_t{2} << 20)) madvise(p, c, MADV_HUGEPAGE);
#endif
  return p;
}

void system_free(void* p, uint64_t c) {
  if (c < kMapMin) std::free(p);
  else munmap(p, c);
}

}  // namespace

uint64_t BlockCache::class_size(uint64_t bytes) {
  if (bytes <= 1024) return bytes <= kAlign ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  const int k = std::bit_width(bytes) - 1;  // 2^k <= bytes < 2^(k+1), k >= 10
  const uint64_t step = uint64_t{1} << (k - 2);
  return (bytes + step - 1) / step * step;  // 2^k x {1, 1.25, 1.5, 1.75} or 2^(k+1)
}

int BlockCache::class_index(uint64_t c) {
  if (c <= 1024) return static_cast<int>(c / kAlign) - 1;
  const int k = std::bit_width(c) - 1;
  return kSmallClasses + (k - 10) * 4 + static_cast<int>((c >> (k - 2)) - 4);
}

uint64_t BlockCache::class_of_index(int i) {
  if (i < kSmallClasses) return static_cast<uint64_t>(i + 1) * kAlign;
  const int k = 10 + (i - kSmallClasses) / 4;
  return static_cast<uint64_t>(4 + (i - kSmallClasses) % 4) << (k - 2);
}

void* BlockCache::allocate(uint64_t bytes) {
  const uint64_t c = class_size(bytes);
  {
    std::lock_guard<rvl::SpinThenBlockMutex> lock(mu_);
    ++st_.requests;
    const int i = class_index(c);
    if (enabled_ && !free_[i].empty()) {
      void* data = free_[i].back();
      free_[i].pop_back();
      // Recycled blocks keep their old contents (the ABI leaves a new buffer's contents
      // unspecified, and every kernel overwrites its output): zeroing them was 2-3% of the
      // makemore step (Note [Per-launch cost] in evaluator.hpp).
      ++st_.hits;
      st_.idle_bytes -= c;
      st_.live_bytes += c;
      if (st_.live_bytes > st_.peak_live_bytes) st_.peak_live_bytes = st_.live_bytes;
      return data;
    }
  }
  void* data = system_allocate(c);
  if (!data) {
    drop();
    data = system_allocate(c);
    if (!data) return nullptr;
  }
  std::lock_guard<rvl::SpinThenBlockMutex> lock(mu_);
  ++st_.fresh;
  st_.live_bytes += c;
  if (st_.live_bytes > st_.peak_live_bytes) st_.peak_live_bytes = st_.live_bytes;
  return data;
}

void BlockCache::release(void* data, uint64_t bytes) noexcept {
  const uint64_t c = class_size(bytes);
  {
    std::lock_guard<rvl::SpinThenBlockMutex> lock(mu_);
    ++st_.released;
    st_.live_bytes -= c;
    if (enabled_) {
      if (st_.idle_bytes + c <= st_.cap_bytes) {
        try {  // a deallocate hook must not throw: no room in the list, no caching
          free_[class_index(c)].push_back(data);
          st_.idle_bytes += c;
          if (st_.idle_bytes > st_.peak_idle_bytes) st_.peak_idle_bytes = st_.idle_bytes;
          return;
        } catch (const std::bad_alloc&) {
        }
      }
      ++st_.evicted;
    }
  }
  system_free(data, c);
}

void BlockCache::drop() {
  std::lock_guard<rvl::SpinThenBlockMutex> lock(mu_);
  drop_locked();
}

void BlockCache::set_enabled(bool on) {
  std::lock_guard<rvl::SpinThenBlockMutex> lock(mu_);
  if (on) {
    st_ = CacheStats{};
    st_.cap_bytes = cap_from_env();
    free_.assign(kClasses, {});
  } else {
    const char* debug = std::getenv("RAVEL_DEBUG");
    if (debug && *debug && *debug != '0')
      std::fprintf(stderr, "[tbb_cpu] block cache at shutdown: %s\n", summary_locked().c_str());
    drop_locked();
  }
  enabled_ = on && st_.cap_bytes > 0;
}

void BlockCache::drop_locked() {
  for (size_t i = 0; i < free_.size(); ++i) {
    for (void* p : free_[i]) system_free(p, class_of_index(static_cast<int>(i)));
    free_[i].clear();
  }
  st_.idle_bytes = 0;
}

CacheStats BlockCache::stats() {
  std::lock_guard<rvl::SpinThenBlockMutex> lock(mu_);
  return st_;
}

std::string BlockCache::summary() {
  std::lock_guard<rvl::SpinThenBlockMutex> lock(mu_);
  return summary_locked();
}

std::string BlockCache::summary_locked() const {
  const CacheStats& s = st_;
  return "cache cap " + mib(s.cap_bytes) + ", " + std::to_string(s.requests) + " allocations (" +
         std::to_string(s.hits) + " reused, " + std::to_string(s.fresh) + " fresh), " +
         std::to_string(s.evicted) + " evicted, idle " + mib(s.idle_bytes) + " (peak " +
         mib(s.peak_idle_bytes) + "), in use " + mib(s.live_bytes) + " (peak " +
         mib(s.peak_live_bytes) + ")";
}

std::string BlockCache::details() {
  const CacheStats s = stats();
  auto m = [](uint64_t b) { return std::to_string((b + (1 << 19)) >> 20); };
  return "cache_cap_mib=" + m(s.cap_bytes) + "; cache_allocs=" + std::to_string(s.requests) +
         "; cache_reused=" + std::to_string(s.hits) + "; cache_idle_mib=" + m(s.idle_bytes) +
         "; cache_peak_live_mib=" + m(s.peak_live_bytes);
}

BlockCache& block_cache() {
  static BlockCache* c = new BlockCache;  // never destroyed, like the registry (host_backend.hpp)
  return *c;
}

}  // namespace tbbcpu
