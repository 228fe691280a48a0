// The tbb_cpu backend: entry table, live-object registry, buffers, streams, events, devices.
//
// Written with sdk/include/ravel/backend.hpp: every table member body runs inside rvl::guard,
// so no exception crosses the ABI and every failure is an rvl_error with a status and message.
//
// Execution model: all work completes before the call returns (the CPU is the "device"), so
// streams and events only exist to be validated; synchronise calls are no-ops.
#include "kernel.hpp"
#include "state.hpp"

#include <tbb/info.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_set>

namespace tbbcpu {
namespace {

struct Registry {
  std::mutex mu;
  bool initialized = false;
  std::unordered_set<const rvl_buffer*> buffers;
  std::unordered_set<const rvl_stream*> streams;
  std::unordered_set<const rvl_event*> events;
  // Recycled memory blocks by exact size (Note [Block cache]).
  std::multimap<uint64_t, std::byte*> cached_blocks;
  uint64_t cached_bytes = 0;
};

// Note [Block cache]
// A training step or a benchmark allocates the same sizes again and again. Fresh large
// allocations come from mmap as untouched pages, and the first write to each page faults:
// for a 64 MiB result that alone costs more than the kernel. So freed blocks of at least
// kCacheMin bytes are kept (up to kCacheMax in total) and handed out again for the same size.
// A recycled block keeps its old contents, which the ABI allows (contents are unspecified).
constexpr uint64_t kCacheMin = 64 * 1024;
constexpr uint64_t kCacheMax = uint64_t{1} << 30;

Registry& registry() {
  // Never destroyed: the host may call shutdown() from its own static destructors at exit,
  // after this library's statics would otherwise be gone.
  static Registry* r = new Registry;
  return *r;
}

void require_initialized() {
  std::lock_guard<std::mutex> lock(registry().mu);
  if (!registry().initialized) rvl::invalid("backend not initialized: call initialize() first");
}

void check_device(int32_t device) {
  if (device != 0)
    rvl::invalid("device " + std::to_string(device) + " does not exist, expected 0");
}

template <class T>
void check_out(T* out, const char* what) {
  if (out == nullptr) rvl::invalid(std::string(what) + ": output pointer is NULL");
}

// Checks [offset, offset + bytes) lies inside a buffer of `size` bytes, without overflow.
void check_range(const char* what, uint64_t offset, uint64_t bytes, uint64_t size) {
  if (offset > size || bytes > size - offset)
    rvl::invalid(std::string(what) + ": byte range [" + std::to_string(offset) + ", " +
                 std::to_string(offset) + " + " + std::to_string(bytes) +
                 ") is outside the buffer of " + std::to_string(size) + " bytes");
}

void drop_cache_locked(Registry& r) {
  for (auto& [size, data] : r.cached_blocks) std::free(data);
  r.cached_blocks.clear();
  r.cached_bytes = 0;
}

// A block of `bytes` from the cache, or NULL.
std::byte* take_cached(uint64_t bytes) {
  if (bytes < kCacheMin) return nullptr;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.cached_blocks.find(bytes);
  if (it == r.cached_blocks.end()) return nullptr;
  std::byte* data = it->second;
  r.cached_blocks.erase(it);
  r.cached_bytes -= bytes;
  return data;
}

// Keeps `data` for reuse if it is worth it and there is room; otherwise frees it.
void release_block(std::byte* data, uint64_t bytes) {
  if (bytes >= kCacheMin) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.initialized && r.cached_bytes + bytes <= kCacheMax) {
      r.cached_blocks.emplace(bytes, data);
      r.cached_bytes += bytes;
      return;
    }
  }
  std::free(data);
}

void free_all_locked(Registry& r) {
  drop_cache_locked(r);
  for (const rvl_buffer* b : r.buffers) {
    std::free(b->data);
    delete b;
  }
  for (const rvl_stream* s : r.streams) delete s;
  for (const rvl_event* e : r.events) delete e;
  r.buffers.clear();
  r.streams.clear();
  r.events.clear();
}

// ---- table members ------------------------------------------------------------------------
rvl_error* probe(rvl_probe_result* out) {
  return rvl::guard([&] {
    rvl::require_struct(out, "probe result");
    out->device_count = 1;  // a CPU is always there; no TBB call, no scheduler start
    out->score = 10;        // the portable fallback: any accelerator backend should win
  });
}

rvl_error* initialize() {
  return rvl::guard([&] {
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().initialized = true;
  });
}

void shutdown() {
  rvl::guard_void([&] {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    free_all_locked(r);
    r.initialized = false;
  });
}

rvl_error* get_info(rvl_backend_info* out) {
  return rvl::guard([&] {
    rvl::require_struct(out, "backend info");
    out->name = "tbb_cpu";
    out->version = "0.1.0";
    out->description = "Reference CPU backend: block-interpreted programs on oneTBB";
  });
}

rvl_error* device_count(int32_t* out) {
  return rvl::guard([&] {
    check_out(out, "device_count");
    *out = 1;
  });
}

rvl_error* device_properties(int32_t device, rvl_device_properties* out) {
  return rvl::guard([&] {
    check_device(device);
    rvl::require_struct(out, "device properties");
    const int threads = tbb::info::default_concurrency();
    const std::string name = "CPU (oneTBB, " + std::to_string(threads) + " threads)";
    std::memset(out->name, 0, sizeof(out->name));
    std::strncpy(out->name, name.c_str(), sizeof(out->name) - 1);
    out->kind = RVL_DEVICE_CPU;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    out->memory_bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
    out->compute_units = threads;
    out->dtypes = (1u << RVL_DTYPE_COUNT_) - 1u;
    out->max_rank = RVL_MAX_RANK;
  });
}

rvl_error* buffer_allocate(int32_t device, uint64_t bytes, rvl_buffer** out) {
  return rvl::guard([&] {
    check_device(device);
    check_out(out, "buffer_allocate");
    require_initialized();
    if (bytes > uint64_t(INT64_MAX))
      rvl::fail(RVL_STATUS_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes");
    // A recycled block (Note [Block cache]), else calloc: fresh memory is zero-filled, and large
    // requests get lazily zeroed pages. Out of memory drops the cache and tries once more.
    void* data = take_cached(bytes);
    if (!data && bytes) data = std::calloc(bytes, 1);
    if (bytes && !data) {
      {
        std::lock_guard<std::mutex> lock(registry().mu);
        drop_cache_locked(registry());
      }
      data = std::calloc(bytes, 1);
    }
    if (bytes && !data)
      rvl::fail(RVL_STATUS_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes");
    rvl_buffer* b = nullptr;
    try {
      b = new rvl_buffer{static_cast<std::byte*>(data), bytes};
      std::lock_guard<std::mutex> lock(registry().mu);
      registry().buffers.insert(b);
    } catch (...) {
      std::free(data);
      delete b;
      throw;
    }
    *out = b;
  });
}

rvl_error* buffer_free(rvl_buffer* buffer) {
  return rvl::guard([&] {
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      if (registry().buffers.erase(buffer) == 0)
        rvl::invalid("buffer_free: not a live buffer (freed twice, or never allocated here)");
    }
    release_block(buffer->data, buffer->size);
    delete buffer;
  });
}

rvl_error* buffer_size(const rvl_buffer* buffer, uint64_t* out) {
  return rvl::guard([&] {
    check_out(out, "buffer_size");
    *out = lookup_buffer(buffer, "buffer_size")->size;
  });
}

rvl_error* buffer_write(rvl_stream* stream, rvl_buffer* dst, uint64_t dst_offset, const void* src,
                        uint64_t bytes) {
  return rvl::guard([&] {
    check_stream(stream);
    rvl_buffer* b = lookup_buffer(dst, "buffer_write");
    check_range("buffer_write", dst_offset, bytes, b->size);
    if (bytes == 0) return;
    if (src == nullptr) rvl::invalid("buffer_write: source pointer is NULL");
    std::memcpy(b->data + dst_offset, src, bytes);
  });
}

rvl_error* buffer_read(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset, void* dst,
                       uint64_t bytes) {
  return rvl::guard([&] {
    check_stream(stream);
    rvl_buffer* b = lookup_buffer(src, "buffer_read");
    check_range("buffer_read", src_offset, bytes, b->size);
    if (bytes == 0) return;
    if (dst == nullptr) rvl::invalid("buffer_read: destination pointer is NULL");
    std::memcpy(dst, b->data + src_offset, bytes);
  });
}

rvl_error* buffer_copy(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset,
                       rvl_buffer* dst, uint64_t dst_offset, uint64_t bytes) {
  return rvl::guard([&] {
    check_stream(stream);
    rvl_buffer* s = lookup_buffer(src, "buffer_copy source");
    rvl_buffer* d = lookup_buffer(dst, "buffer_copy destination");
    check_range("buffer_copy source", src_offset, bytes, s->size);
    check_range("buffer_copy destination", dst_offset, bytes, d->size);
    if (bytes) std::memmove(d->data + dst_offset, s->data + src_offset, bytes);  // may overlap
  });
}

rvl_error* stream_create(int32_t device, rvl_stream** out) {
  return rvl::guard([&] {
    check_device(device);
    check_out(out, "stream_create");
    require_initialized();
    auto* s = new rvl_stream{device};
    std::lock_guard<std::mutex> lock(registry().mu);
    try {
      registry().streams.insert(s);
    } catch (...) {
      delete s;
      throw;
    }
    *out = s;
  });
}

rvl_error* stream_destroy(rvl_stream* stream) {
  return rvl::guard([&] {
    std::lock_guard<std::mutex> lock(registry().mu);
    if (registry().streams.erase(stream) == 0) rvl::invalid("stream_destroy: not a live stream");
    delete stream;
  });
}

rvl_error* stream_synchronize(rvl_stream* stream) {
  return rvl::guard([&] { check_stream(stream); });  // work is already complete
}

rvl_error* event_record(rvl_stream* stream, rvl_event** out) {
  return rvl::guard([&] {
    check_stream(stream);
    check_out(out, "event_record");
    auto* e = new rvl_event{stream};
    std::lock_guard<std::mutex> lock(registry().mu);
    try {
      registry().events.insert(e);
    } catch (...) {
      delete e;
      throw;
    }
    *out = e;
  });
}

void check_event(const rvl_event* e, const char* what) {
  std::lock_guard<std::mutex> lock(registry().mu);
  if (registry().events.count(e) == 0) rvl::invalid(std::string(what) + ": not a live event");
}

rvl_error* event_wait(rvl_stream* stream, rvl_event* event) {
  return rvl::guard([&] {
    check_stream(stream);
    check_event(event, "event_wait");
  });
}

rvl_error* event_synchronize(rvl_event* event) {
  return rvl::guard([&] { check_event(event, "event_synchronize"); });
}

rvl_error* event_destroy(rvl_event* event) {
  return rvl::guard([&] {
    std::lock_guard<std::mutex> lock(registry().mu);
    if (registry().events.erase(event) == 0) rvl::invalid("event_destroy: not a live event");
    delete event;
  });
}

// The validator's view of this plugin's buffers: throws unless `b` is live.
rvl::validate::BufferRef buffer_ref(const rvl_buffer* b, const char* what) {
  const rvl_buffer* live = lookup_buffer(b, what);
  return {live->data, live->size};
}

rvl_error* execute_program(int32_t device, rvl_stream* stream, const rvl_program* program) {
  return rvl::guard([&] {
    check_device(device);
    check_stream(stream);
    require_initialized();
    run_program(rvl::validate::validate_program(program, buffer_ref));
  });
}

rvl_error* execute_contraction(int32_t device, rvl_stream* stream, const rvl_contraction* c) {
  return rvl::guard([&] {
    check_device(device);
    check_stream(stream);
    require_initialized();
    run_contraction(rvl::validate::validate_contraction(c, buffer_ref));
  });
}

rvl_error* synchronize(int32_t device) {
  return rvl::guard([&] { check_device(device); });
}

const rvl_backend_api kTable = {
    sizeof(rvl_backend_api), RVL_ABI_MAJOR, RVL_ABI_MINOR,
    rvl::error_code, rvl::error_message, rvl::error_destroy,
    probe, initialize, shutdown, get_info,
    device_count, device_properties,
    buffer_allocate, buffer_free, buffer_size, buffer_write, buffer_read, buffer_copy,
    stream_create, stream_destroy, stream_synchronize,
    event_record, event_wait, event_synchronize, event_destroy,
    execute_program, execute_contraction, synchronize,
};

}  // namespace

rvl_buffer* lookup_buffer(const rvl_buffer* b, const char* what) {
  std::lock_guard<std::mutex> lock(registry().mu);
  if (b == nullptr || registry().buffers.count(b) == 0)
    rvl::invalid(std::string(what) + ": buffer " + (b ? "is not live (freed or foreign)" : "is NULL"));
  return const_cast<rvl_buffer*>(b);  // the registry holds what buffer_allocate created
}

void check_stream(const rvl_stream* s) {
  if (s == nullptr) return;
  std::lock_guard<std::mutex> lock(registry().mu);
  if (registry().streams.count(s) == 0) rvl::invalid("stream is not live (destroyed or foreign)");
}

}  // namespace tbbcpu

RVL_DEFINE_BACKEND_ENTRY(tbbcpu::kTable)
