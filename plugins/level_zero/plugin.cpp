// The Level Zero backend's entry table: lifetime, devices, buffers, streams and events.
// Kernels are in kernels.cpp; see docs/level-zero.md for the design.
#include <cstdlib>
#include <ravel/backend.hpp>
#include <ravel/plugin_kit.hpp>  // check_range, the table

#include <cstddef>
#include <cstring>
#include <string>

#include "collective.hpp"
#include "device.hpp"
#include "kernels.hpp"
#include "peer.hpp"
#include "registry.hpp"
#include "sharing.hpp"

namespace {

using namespace rvl::l0;
using rvl::check_range;
using rvl::guard;
using rvl::invalid;

constexpr int32_t kProbeScore = 50;  // above the CPU backend (10)

template <class T>
void check_out(T* out, const char* what) {
  if (out == nullptr) invalid(std::string(what) + ": output pointer is NULL");
}

// Copies a C string into a fixed array, truncated and NUL-terminated, the rest zeroed.
template <size_t N>
void set_text(char (&dst)[N], const std::string& s) {
  std::memset(dst, 0, N);
  std::strncpy(dst, s.c_str(), N - 1);
}

rvl_error* probe(rvl_probe_result* out) {
  return guard([&] {
    rvl::require_struct(out, "probe result");
    // Discovery runs zeInit and enumerates devices once; it creates no context, allocates
    // nothing on a device and starts no thread of ours.
    Discovery& d = discovery();
    out->device_count = int32_t(d.devices.size());
    out->score = kProbeScore;
#if RVL_ABI_MINOR >= 1
    if (RVL_HAS_MEMBER(out, rvl_probe_result, reason)) set_text(out->reason, d.reason);
#endif
  });
}

rvl_error* initialize() {
  return guard([&] {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.initialized) return;
    Discovery& d = discovery();
    if (d.devices.empty()) rvl::fail(RVL_STATUS_UNSUPPORTED, "level_zero: " + d.reason);
    create_contexts(d);
    for (Device& dev : d.devices) {
      auto state = std::make_unique<DeviceState>(*d.api, dev);
      state->default_stream = new rvl_stream(*state);
      state->streams.push_back(state->default_stream);
      r.devices.push_back(std::move(state));
    }
    r.initialized = true;
  });
}

void shutdown() {
  rvl::guard_void([&] {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (!r.initialized) return;
    for (auto& dev : r.devices)
      for (rvl_stream* s : dev->streams) rvl::guard_void([&] { s->synchronize(); });
    for (const rvl_event* e : r.events) {
      e->dev->events.put(e->handle);
      delete e;
    }
    for (const rvl_buffer* b : r.buffers) {
      if (b->release) b->release(b->release_context);  // foreign memory goes back to its owner
      else if (b->ptr) b->dev->alloc.release(b->ptr, b->capacity, false);
      delete b;
    }
    for (auto& dev : r.devices) {
      for (rvl_stream* s : dev->streams) delete s;
      dev->streams.clear();
    }
    r.events.clear();
    r.buffers.clear();
    r.streams.clear();
    r.devices.clear();  // modules, cached blocks and event pools go back to the driver
    destroy_contexts(discovery());
    r.initialized = false;
  });
}

rvl_error* get_info(rvl_backend_info* out) {
  return guard([&] {
    rvl::require_struct(out, "backend info");
    out->name = "level_zero";
    out->version = "0.1.0";
    out->description =
        "Intel GPUs through Level Zero; kernels are SPIR-V emitted in process (no compiler)";
  });
}

rvl_error* device_count(int32_t* out) {
  return guard([&] {
    check_out(out, "device_count");
    *out = int32_t(discovery().devices.size());
  });
}

rvl_error* device_properties(int32_t device, rvl_device_properties* out) {
  return guard([&] {
    rvl::require_struct(out, "device properties", RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_0);
    const Discovery& d = discovery();
    if (device < 0 || size_t(device) >= d.devices.size())
      invalid("level_zero: device " + std::to_string(device) + " does not exist (" +
              std::to_string(d.devices.size()) + " devices)");
    const Device& dev = d.devices[size_t(device)];
    set_text(out->name, dev.name);
    out->kind = RVL_DEVICE_GPU;
    out->memory_bytes = dev.memory_bytes;
    out->compute_units = dev.eu_count;
    out->dtypes = dtypes_of(dev);
    out->max_rank = RVL_MAX_RANK;
#if RVL_ABI_MINOR >= 1
    if (RVL_HAS_MEMBER(out, rvl_device_properties, arch)) set_text(out->arch, dev.arch);
    if (RVL_HAS_MEMBER(out, rvl_device_properties, warp_size)) out->warp_size = dev.subgroup_size;
    if (RVL_HAS_MEMBER(out, rvl_device_properties, details)) set_text(out->details, dev.details);
#endif
#if RVL_ABI_MINOR >= 3
    if (RVL_HAS_MEMBER(out, rvl_device_properties, dlpack_device_id)) {
      out->dlpack_device_type = kDLOneAPI;  // buffers are USM device allocations
      out->dlpack_device_id = device;
    }
#endif
#if RVL_ABI_MINOR >= 4
    // The online LOGSUMEXP reduction (emit_program.cpp, ScalarOps::lse_merge).
    // RAVEL_L0_NO_LOGSUMEXP=1 hides it, so the core's max / exp-sum fallback runs instead.
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_ops)) out->reduce_ops = reduce_ops();
#endif
#if RVL_ABI_MINOR >= 10
    // Row epilogues of every reduction it runs (emit_program.cpp, decision 70).
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_epilogue_ops)) out->reduce_epilogue_ops = reduce_ops();
#endif
#if RVL_ABI_MINOR >= 11
    // Chains of them (Note [Row chains on GPUs], decision 70).
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_chain_ops)) out->reduce_chain_ops = reduce_ops();
#endif
#if RVL_ABI_MINOR >= 6
    // Every row (the SPIR-V emitter switches over all of them; a row it misses does not compile).
    if (RVL_HAS_MEMBER(out, rvl_device_properties, ops)) out->ops = RVL_OPS_ALL;
#endif
  });
}

// New buffers read as zeros, fresh or recycled, as on the CPU backend: results never depend on
// what an earlier owner left behind (and ravel-conformance relies on it). The fill is queued on
// the default stream; when other streams exist the host waits for it, because their work is
// not ordered after the default stream's.
void zero_fill(DeviceState& dev, void* p, uint64_t bytes) {
  rvl_stream& s = *dev.default_stream;
  const uint8_t zero = 0;
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  s.enqueue([&] {
    return dev.ze.zeCommandListAppendMemoryFill(s.list, p, &zero, 1, bytes, nullptr, 0, nullptr);
  }, "zeCommandListAppendMemoryFill");
  bool alone;
  {
    std::lock_guard<std::mutex> slock(dev.streams_mu);
    alone = dev.streams.size() == 1;
  }
  if (!alone) s.wait_idle();
}

rvl_error* buffer_allocate(int32_t device, uint64_t bytes, rvl_buffer** out) {
  return guard([&] {
    check_out(out, "buffer_allocate");
    DeviceState& dev = device_state(device);
    if (bytes > uint64_t(INT64_MAX))
      rvl::fail(RVL_STATUS_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes");
    uint64_t cap = 0;
    void* p = nullptr;
    if (bytes) {
      p = dev.alloc.allocate(bytes, &cap);
      if (!p && dev.alloc.has_deferred()) {  // blocks wait for queued work: wait, recycle, retry
        synchronize_device(dev);
        p = dev.alloc.allocate(bytes, &cap);
      }
      if (!p)
        rvl::fail(RVL_STATUS_OUT_OF_MEMORY, "level_zero: out of device memory allocating " +
                                                std::to_string(bytes) + " bytes");
    }
    if (p) zero_fill(dev, p, bytes);
    auto* b = new rvl_buffer{&dev, p, bytes, cap};
    Registry& r = registry();
    try {
      std::lock_guard<std::mutex> lock(r.mu);
      r.buffers.insert(b);
    } catch (...) {
      if (p) dev.alloc.release(p, cap, true);
      delete b;
      throw;
    }
    *out = b;
  });
}

rvl_error* buffer_free(rvl_buffer* buffer) {
  return guard([&] {
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      if (r.buffers.erase(buffer) == 0)
        invalid("buffer_free: not a live buffer (freed twice, or never allocated here)");
    }
    if (buffer->release) {  // foreign memory: its owner may reuse it at once, so wait for every use
      // The buffer has left the registry: release exactly once even if the wait fails.
      rvl::guard_void([&] { synchronize_device(*buffer->dev); });
      buffer->release(buffer->release_context);
      delete buffer;
      return;
    }
    if (buffer->ptr) buffer->dev->alloc.release(buffer->ptr, buffer->capacity,
                                                device_busy(*buffer->dev));
    delete buffer;
  });
}

rvl_error* buffer_size(const rvl_buffer* buffer, uint64_t* out) {
  return guard([&] {
    check_out(out, "buffer_size");
    *out = lookup_buffer(buffer, "buffer_size")->size;
  });
}

rvl_error* buffer_write(rvl_stream* stream, rvl_buffer* dst, uint64_t off, const void* src,
                        uint64_t bytes) {
  return guard([&] {
    rvl_buffer* b = lookup_buffer(dst, "buffer_write");
    rvl_stream& s = resolve_stream(stream, b->dev, "buffer_write");
    check_range("buffer_write", off, bytes, b->size);
    if (bytes == 0) return;
    if (src == nullptr) invalid("buffer_write: source pointer is NULL");
    s.write(static_cast<char*>(b->ptr) + off, src, bytes);
  });
}

// Completes before returning (the ABI says so): copy into staging memory, wait, copy out.
rvl_error* buffer_read(rvl_stream* stream, const rvl_buffer* src, uint64_t off, void* dst,
                       uint64_t bytes) {
  return guard([&] {
    rvl_buffer* b = lookup_buffer(src, "buffer_read");
    rvl_stream& s = resolve_stream(stream, b->dev, "buffer_read");
    check_range("buffer_read", off, bytes, b->size);
    if (bytes == 0) return;
    if (dst == nullptr) invalid("buffer_read: destination pointer is NULL");
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    void* staged = s.staging.take(bytes);
    s.enqueue([&] {
      return s.dev.ze.zeCommandListAppendMemoryCopy(s.list, staged, static_cast<char*>(b->ptr) + off,
                                                    bytes, nullptr, 0, nullptr);
    }, "zeCommandListAppendMemoryCopy (device to host)");
    s.wait_idle();
    std::memcpy(dst, staged, bytes);
    s.synchronize();  // nothing is queued now: only resets the arenas
    if (!device_busy(*b->dev)) b->dev->alloc.device_idle();
  });
}

rvl_error* buffer_copy(rvl_stream* stream, const rvl_buffer* src, uint64_t src_off,
                       rvl_buffer* dst, uint64_t dst_off, uint64_t bytes) {
  return guard([&] {
    rvl_buffer* sb = lookup_buffer(src, "buffer_copy source");
    rvl_buffer* db = lookup_buffer(dst, "buffer_copy destination");
    rvl_stream& s = resolve_stream(stream, db->dev, "buffer_copy");
    check_range("buffer_copy source", src_off, bytes, sb->size);
    check_range("buffer_copy destination", dst_off, bytes, db->size);
    if (bytes == 0) return;
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    const char* from = static_cast<const char*>(sb->ptr) + src_off;
    char* to = static_cast<char*>(db->ptr) + dst_off;
    const ZeApi& ze = s.dev.ze;
    auto copy = [&](void* d, const void* f) {
      s.enqueue([&] { return ze.zeCommandListAppendMemoryCopy(s.list, d, f, bytes, nullptr, 0, nullptr); },
                "zeCommandListAppendMemoryCopy (device to device)");
    };
    // Level Zero copies must not overlap; within one buffer they may (memmove semantics).
    if (sb == db && from < to + bytes && to < from + bytes) {
      void* tmp = s.meta.take(bytes);
      copy(tmp, from);
      copy(to, tmp);
    } else {
      copy(to, from);
    }
  });
}

rvl_error* stream_create(int32_t device, rvl_stream** out) {
  return guard([&] {
    check_out(out, "stream_create");
    DeviceState& dev = device_state(device);
    auto* s = new rvl_stream(dev);
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    std::lock_guard<std::mutex> slock(dev.streams_mu);
    try {
      r.streams.insert(s);
      dev.streams.push_back(s);
    } catch (...) {
      r.streams.erase(s);
      delete s;
      throw;
    }
    *out = s;
  });
}

rvl_error* stream_destroy(rvl_stream* stream) {
  return guard([&] {
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      if (r.streams.erase(stream) == 0) invalid("stream_destroy: not a live stream");
      std::lock_guard<std::mutex> slock(stream->dev.streams_mu);
      std::erase(stream->dev.streams, stream);
    }
    rvl::guard_void([&] { stream->synchronize(); });  // its work must finish before the list goes
    delete stream;
  });
}

rvl_error* stream_synchronize(rvl_stream* stream) {
  return guard([&] {
    rvl_stream& s = resolve_stream(stream, nullptr, "stream_synchronize");
    s.synchronize();
    if (!device_busy(s.dev)) s.dev.alloc.device_idle();
  });
}

rvl_error* event_record(rvl_stream* stream, rvl_event** out) {
  return guard([&] {
    check_out(out, "event_record");
    Registry& r = registry();
    DeviceState* dev = nullptr;
    if (!stream) dev = &device_state(0);  // the ABI: NULL is the default stream (of device 0)
    rvl_stream& s = resolve_stream(stream, dev, "event_record");
    ze_event_handle_t h = s.dev.events.get();
    auto* e = new rvl_event{&s.dev, h};
    try {
      s.signal(h);
      std::lock_guard<std::mutex> lock(r.mu);
      r.events.insert(e);
    } catch (...) {
      s.dev.events.put(h);
      delete e;
      throw;
    }
    *out = e;
  });
}

rvl_error* event_wait(rvl_stream* stream, rvl_event* event) {
  return guard([&] {
    rvl_event* e = lookup_event(event, "event_wait");
    rvl_stream& s = resolve_stream(stream, stream ? nullptr : e->dev, "event_wait");
    s.wait(e->handle);
  });
}

rvl_error* event_synchronize(rvl_event* event) {
  return guard([&] {
    rvl_event* e = lookup_event(event, "event_synchronize");
    ze_check(e->dev->ze.zeEventHostSynchronize(e->handle, UINT64_MAX), "zeEventHostSynchronize");
  });
}

rvl_error* event_destroy(rvl_event* event) {
  return guard([&] {
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      if (r.events.erase(event) == 0) invalid("event_destroy: not a live event");
    }
    // An event still queued must fire before it is reset and reused.
    event->dev->ze.zeEventHostSynchronize(event->handle, UINT64_MAX);
    event->dev->events.put(event->handle);
    delete event;
  });
}

rvl_error* execute_program(int32_t device, rvl_stream* stream, const rvl_program* p) {
  return guard([&] { rvl::l0::execute_program(device, stream, p); });
}

rvl_error* execute_contraction(int32_t device, rvl_stream* stream, const rvl_contraction* c) {
  return guard([&] { rvl::l0::execute_contraction(device, stream, c); });
}

// ABI 1.5 (peer.cpp, Note [Peer copies on Level Zero]).
rvl_error* buffer_copy_peer(rvl_stream* ss, const rvl_buffer* src, uint64_t so, rvl_stream* ds, rvl_buffer* dst,
                            uint64_t dof, uint64_t n) {
  return guard([&] { rvl::l0::copy_peer(ss, src, so, ds, dst, dof, n); });
}

rvl_error* synchronize(int32_t device) {
  return guard([&] { synchronize_device(device_state(device)); });
}

// ABI 1.9 and 1.12 (collective.cpp, Note [Level Zero collectives]).
rvl_error* all_reduce(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                      rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op) {
  return guard([&] { rvl::l0::run_collective(rvl::validate::CollectiveKind::AllReduce, n, streams, inputs, outputs, count, dtype, op); });
}
rvl_error* reduce_scatter(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                          rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op) {
  return guard([&] { rvl::l0::run_collective(rvl::validate::CollectiveKind::ReduceScatter, n, streams, inputs, outputs, count, dtype, op); });
}
rvl_error* all_gather(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                      rvl_buffer* const* outputs, uint64_t count, int32_t dtype) {
  return guard([&] { rvl::l0::run_collective(rvl::validate::CollectiveKind::AllGather, n, streams, inputs, outputs, count, dtype, 0); });
}

// The entry table from the SDK's one list of members (<ravel/plugin_kit.hpp>).
constexpr rvl_backend_api kTable = RVL_BACKEND_TABLE_OF_FUNCTIONS();

}  // namespace

RVL_DEFINE_BACKEND_ENTRY(kTable)
