// The tbb_cpu backend: what is its own (info, device description, the block cache, running
// kernels) on top of the SDK's host-memory object model.
//
// Buffers, streams, events, their live-object registry and the table members come from
// <ravel/host_backend.hpp> (rvl::host::Backend): it checks every handle and byte range and runs
// each member inside rvl::guard, so no exception crosses the ABI. This file supplies Hooks.
//
// Execution model: all work completes before the call returns (the CPU is the "device"), so
// streams and events only exist to be validated; synchronise calls are no-ops.
#include "gemm_kernels.hpp"
#include "kernel.hpp"

#include <ravel/host_backend.hpp>

#include <tbb/info.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>

namespace tbbcpu {
namespace {

// Note [Block cache]
// A training step or a benchmark allocates the same sizes again and again. Fresh large
// allocations come from mmap as untouched pages, and the first write to each page faults:
// for a 64 MiB result that alone costs more than the kernel. So freed blocks of at least
// kCacheMin bytes are kept (up to kCacheMax in total) and handed out again for the same size.
// A recycled block keeps its old contents, which the ABI allows (contents are unspecified).
// The cache only fills between initialize() and shutdown(), which empties it.
constexpr uint64_t kCacheMin = 64 * 1024;
constexpr uint64_t kCacheMax = uint64_t{1} << 30;

class BlockCache {
 public:
  // A block of `bytes` from the cache, or NULL.
  std::byte* take(uint64_t bytes) {
    if (bytes < kCacheMin) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(bytes);
    if (it == blocks_.end()) return nullptr;
    std::byte* data = it->second;
    blocks_.erase(it);
    cached_bytes_ -= bytes;
    return data;
  }

  // Keeps `data` for reuse if it is worth it and there is room; otherwise frees it.
  void release(void* data, uint64_t bytes) noexcept {
    if (bytes >= kCacheMin) {
      std::lock_guard<std::mutex> lock(mu_);
      if (enabled_ && cached_bytes_ + bytes <= kCacheMax) {
        try {  // a deallocate hook must not throw: no map node, no caching
          blocks_.emplace(bytes, static_cast<std::byte*>(data));
          cached_bytes_ += bytes;
          return;
        } catch (const std::bad_alloc&) {
        }
      }
    }
    std::free(data);
  }

  // Frees every cached block (out of memory: the blocks are worth more to the allocator).
  void drop() {
    std::lock_guard<std::mutex> lock(mu_);
    drop_locked();
  }

  // Between initialize() and shutdown() only: off frees every block, and release() frees after.
  void set_enabled(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    enabled_ = on;
    if (!on) drop_locked();
  }

 private:
  std::mutex mu_;  // never held while taking the registry's lock, so the two cannot deadlock
  bool enabled_ = false;
  std::multimap<uint64_t, std::byte*> blocks_;  // recycled blocks by exact size
  uint64_t cached_bytes_ = 0;

  void drop_locked() {
    for (auto& [size, data] : blocks_) std::free(data);
    blocks_.clear();
    cached_bytes_ = 0;
  }
};

BlockCache& block_cache() {
  static BlockCache* c = new BlockCache;  // never destroyed, like the registry (host_backend.hpp)
  return *c;
}

// ---- hooks for rvl::host::Backend: what makes this plugin itself ---------------------------
struct Hooks : rvl::host::DefaultHooks {
  static constexpr const char* name = "tbb_cpu";
  static constexpr const char* version = "0.1.0";
  static constexpr const char* description =
      "CPU backend: block-interpreted kernel programs and packed GEMM on oneTBB";
  static constexpr int32_t probe_score = 10;  // the portable fallback: any accelerator should win

  static void describe_device(rvl_device_properties* out) {
    const int threads = tbb::info::default_concurrency();
    rvl::host::set_device_name(out, "CPU (oneTBB, " + std::to_string(threads) + " threads)");
    out->compute_units = threads;
    rvl::host::set_device_arch(out, "x86-64", std::string("gemm=") + gemm::isa_name());
  }

  static void* allocate(uint64_t bytes) {
    // A recycled block (Note [Block cache]), else calloc: fresh memory is zero-filled, and large
    // requests get lazily zeroed pages. Out of memory drops the cache and tries once more.
    void* data = block_cache().take(bytes);
    if (!data) data = std::calloc(bytes, 1);
    if (!data) {
      block_cache().drop();
      data = std::calloc(bytes, 1);
    }
    return data;
  }
  static void deallocate(void* data, uint64_t bytes) { block_cache().release(data, bytes); }
  static void on_initialize() { block_cache().set_enabled(true); }
  static void on_shutdown() { block_cache().set_enabled(false); }

  static void execute_program(const rvl_program* program);
  static void execute_contraction(const rvl_contraction* c);
};
using Host = rvl::host::Backend<Hooks>;

// The validator's view of this plugin's buffers: throws unless `b` is live.
constexpr auto buffer_ref = Host::buffer_ref<rvl::validate::BufferRef>;

void Hooks::execute_program(const rvl_program* program) {
  run_program(rvl::validate::validate_program(program, buffer_ref));
}

void Hooks::execute_contraction(const rvl_contraction* c) {
  run_contraction(rvl::validate::validate_contraction(c, buffer_ref));
}

constexpr rvl_backend_api kTable = Host::table();

}  // namespace
}  // namespace tbbcpu

RVL_DEFINE_BACKEND_ENTRY(tbbcpu::kTable)
