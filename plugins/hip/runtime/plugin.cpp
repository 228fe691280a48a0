// The hip backend's table: lifetime, devices, buffers, streams and events. Kernels are in
// execute.cpp. Every member runs inside rvl::guard, so no exception crosses the ABI.
//
// Execution model (docs/hip.md): buffers are device memory from the caching allocator; writes
// are staged through pinned memory and queued; kernels are queued on the stream (NULL = the
// device's legacy default stream); only buffer_read and the synchronize members wait.
#include "collective.hpp"
#include "allocator.hpp"
#include "device.hpp"
#include "execute.hpp"
#include "kernels.hpp"
#include "objects.hpp"
#include "peer.hpp"
#include "sharing.hpp"
#include "staging.hpp"

#include <ravel/plugin_kit.hpp>  // RVL_BACKEND_TABLE_OF_FUNCTIONS

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace rvl::hip {
namespace {

constexpr uint64_t kZeroFillBelow = 64 * 1024;

void copy_string(char* dst, size_t cap, const std::string& s) {
  std::memset(dst, 0, cap);
  std::strncpy(dst, s.c_str(), cap - 1);
}

rvl_error* probe(rvl_probe_result* out) {
  return guard([&] {
    require_struct(out, "probe result", RVL_PROBE_RESULT_STRUCT_SIZE_1_0);
    const ProbeResult p = probe_devices();
    out->device_count = p.count;
    out->score = 100;  // above tbb_cpu's 10: a GPU is preferred where there is one
    if (RVL_HAS_MEMBER(out, rvl_probe_result, reason))
      copy_string(out->reason, sizeof out->reason, p.reason);
  });
}

rvl_error* initialize() {
  return guard([&] {
    load_devices();
    registry().initialized = true;
  });
}

// Frees everything still alive (the ABI says so) once the devices are idle.
void shutdown() {
  guard_void([&] {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.last_stream_mu);
    for (size_t d = 0; d < devices().size(); ++d) {
      (void)hipSetDevice(int(d));
      (void)hipDeviceSynchronize();
    }
    for (rvl_buffer* b : r.buffers.take_all()) {
      if (b->release) b->release(b->release_context);  // foreign memory goes back to its owner
      else if (b->data) (void)hipFree(b->data);
      delete b;
    }
    for (rvl_stream* s : r.streams.take_all()) {
      (void)hipStreamDestroy(s->stream);
      delete s;
    }
    for (rvl_event* e : r.events.take_all()) {
      (void)hipEventDestroy(e->event);
      delete e;
    }
    r.initialized = false;
    kernel_cache().clear();
    allocator().empty_all();
    staging().release_all();
  });
}

rvl_error* get_info(rvl_backend_info* out) {
  return guard([&] {
    require_struct(out, "backend info", RVL_BACKEND_INFO_STRUCT_SIZE_1_0);
    static const std::string description =
        std::string("HIP backend: kernels generated from the op table and compiled at run time; ") +
        platform_label();
    out->name = "hip";
    out->version = "0.1.0";
    out->description = description.c_str();
  });
}

rvl_error* device_count(int32_t* out) {
  return guard([&] {
    if (!out) invalid("device_count: output pointer is NULL");
    load_devices();
    *out = int32_t(devices().size());
  });
}

rvl_error* device_properties(int32_t d, rvl_device_properties* out) {
  return guard([&] {
    load_devices();
    const DeviceInfo& info = device(d);
    require_struct(out, "device properties", RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_0);
    copy_string(out->name, sizeof out->name, info.name);
    out->kind = RVL_DEVICE_GPU;
    out->memory_bytes = info.memory;
    out->compute_units = info.target.compute_units;
    // Every dtype (ABI 1.7's too): halves as bits computed in f32 (Note [Halves in kernels]).
    out->dtypes = RVL_DTYPES_ALL;
    out->max_rank = RVL_MAX_RANK;
    if (RVL_HAS_MEMBER(out, rvl_device_properties, details)) {
      copy_string(out->arch, sizeof out->arch, info.target.arch);
      out->warp_size = info.target.warp_size;
      copy_string(out->details, sizeof out->details, info.details);
    }
    if (RVL_HAS_MEMBER(out, rvl_device_properties, dlpack_device_id)) {
      out->dlpack_device_type = info.dlpack_type;
      out->dlpack_device_id = d;  // the HIP (= CUDA) device ordinal
    }
    // ABI 1.4: the online LOGSUMEXP reduction (codegen/program.cpp, Accumulator); 1.10: each of
    // them with a row epilogue (Note [Row epilogues on GPUs]); 1.11: chains of them (Note [Row
    // chains on GPUs], decision 70).
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_ops)) out->reduce_ops = reduce_ops();
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_epilogue_ops)) out->reduce_epilogue_ops = reduce_ops();
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_chain_ops)) out->reduce_chain_ops = reduce_ops();
    // ABI 1.6: every row (the HIP C++ emitter switches over all of them; a row it misses does not compile).
    if (RVL_HAS_MEMBER(out, rvl_device_properties, ops)) out->ops = RVL_OPS_ALL;
  });
}

rvl_error* buffer_allocate(int32_t d, uint64_t bytes, rvl_buffer** out) {
  return guard([&] {
    if (!out) invalid("buffer_allocate: output pointer is NULL");
    require_initialized();
    use_device(d);
    if (bytes > uint64_t(INT64_MAX))
      fail(RVL_STATUS_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes");
    void* data = bytes ? allocator().allocate(d, bytes) : nullptr;
    // Contents of a new buffer are unspecified (docs/abi.md 4), but small buffers read as zeros
    // as on tbb_cpu (whose small blocks are fresh calloc memory): ravel-conformance's malformed
    // cases rely on it. One queued memset; large buffers keep whatever the block held.
    if (data && bytes < kZeroFillBelow) {
      const hipError_t e = hipMemsetAsync(data, 0, bytes, nullptr);
      if (e != hipSuccess) {
        allocator().release(d, data, bytes);
        check(e, "buffer_allocate: clearing " + std::to_string(bytes) + " bytes");
      }
    }
    rvl_buffer* b = nullptr;
    try {
      b = new rvl_buffer{d, data, bytes, nullptr};
      registry().buffers.add(b);
    } catch (...) {
      allocator().release(d, data, bytes);
      delete b;
      throw;
    }
    *out = b;
  });
}

rvl_error* buffer_free(rvl_buffer* b) {
  return guard([&] {
    rvl_stream* last = nullptr;
    {
      std::lock_guard<std::mutex> lock(registry().last_stream_mu);
      registry().buffers.take(b, "buffer_free");
      last = b->last_stream;
    }
    (void)hipSetDevice(b->device);
    if (b->release) {  // foreign memory: its owner may reuse it at once, so every use must be over
      (void)hipDeviceSynchronize();
      b->release(b->release_context);
      delete b;
      return;
    }
    if (last) {  // fence its last plugin stream into the default stream (Note [Caching allocator])
      hipEvent_t e = nullptr;
      if (hipEventCreateWithFlags(&e, hipEventDisableTiming) == hipSuccess) {
        (void)hipEventRecord(e, last->stream);
        (void)hipStreamWaitEvent(nullptr, e, 0);
        (void)hipEventDestroy(e);
      } else {
        (void)hipStreamSynchronize(last->stream);
      }
    }
    allocator().release(b->device, b->data, b->size);
    delete b;
  });
}

rvl_error* buffer_size(const rvl_buffer* b, uint64_t* out) {
  return guard([&] {
    if (!out) invalid("buffer_size: output pointer is NULL");
    *out = live_buffer(b, "buffer_size")->size;
  });
}


rvl_error* buffer_write(rvl_stream* stream, rvl_buffer* dst, uint64_t off, const void* src, uint64_t n) {
  return guard([&] {
    rvl_buffer* b = live_buffer(dst, "buffer_write");
    const hipStream_t s = stream_on(stream, b->device, "buffer_write");
    check_range("buffer_write", off, n, b->size);
    if (n == 0) return;
    if (!src) invalid("buffer_write: source pointer is NULL");
    use_device(b->device);
    staging().write(b->device, s, static_cast<char*>(b->data) + off, src, n);
    remember_stream(b, stream);
  });
}

rvl_error* buffer_read(rvl_stream* stream, const rvl_buffer* src, uint64_t off, void* dst, uint64_t n) {
  return guard([&] {
    rvl_buffer* b = live_buffer(src, "buffer_read");
    const hipStream_t s = stream_on(stream, b->device, "buffer_read");
    check_range("buffer_read", off, n, b->size);
    if (n == 0) return;
    if (!dst) invalid("buffer_read: destination pointer is NULL");
    use_device(b->device);
    staging().read(b->device, s, dst, static_cast<const char*>(b->data) + off, n);
  });
}

rvl_error* buffer_copy(rvl_stream* stream, const rvl_buffer* src, uint64_t so, rvl_buffer* dst,
                       uint64_t dof, uint64_t n) {
  return guard([&] {
    rvl_buffer* s = live_buffer(src, "buffer_copy source");
    rvl_buffer* d = live_buffer(dst, "buffer_copy destination");
    check_range("buffer_copy source", so, n, s->size);
    check_range("buffer_copy destination", dof, n, d->size);
    if (n == 0) return;
    if (s->device != d->device) {  // a peer copy, with `stream` standing for its own device's side
      rvl_stream* st = live_stream(stream, "buffer_copy");
      copy_peer(st && st->device == s->device ? st : nullptr, s, so, st && st->device == d->device ? st : nullptr, d,
                dof, n);
      return;
    }
    const hipStream_t st = stream_on(stream, d->device, "buffer_copy");
    use_device(d->device);
    char* to = static_cast<char*>(d->data) + dof;
    const char* from = static_cast<const char*>(s->data) + so;
    if (s == d && to < from + n && from < to + n) {  // overlapping: hipMemcpy* may not overlap
      void* tmp = allocator().allocate(d->device, n);
      check(hipMemcpyAsync(tmp, from, n, hipMemcpyDeviceToDevice, st), "buffer_copy");
      check(hipMemcpyAsync(to, tmp, n, hipMemcpyDeviceToDevice, st), "buffer_copy");
      check(hipStreamSynchronize(st), "buffer_copy");
      allocator().release(d->device, tmp, n);
    } else {
      check(hipMemcpyAsync(to, from, n, hipMemcpyDeviceToDevice, st), "buffer_copy");
    }
    remember_stream(s, stream);
    remember_stream(d, stream);
  });
}

rvl_error* stream_create(int32_t d, rvl_stream** out) {
  return guard([&] {
    if (!out) invalid("stream_create: output pointer is NULL");
    require_initialized();
    use_device(d);
    hipStream_t s = nullptr;
    check(hipStreamCreateWithFlags(&s, hipStreamDefault), "hipStreamCreate");
    auto* st = new rvl_stream{d, s};
    try {
      registry().streams.add(st);
    } catch (...) {
      (void)hipStreamDestroy(s);
      delete st;
      throw;
    }
    *out = st;
  });
}

rvl_error* stream_destroy(rvl_stream* stream) {
  return guard([&] {
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.last_stream_mu);
      r.streams.take(stream, "stream_destroy");
      r.buffers.for_each([&](rvl_buffer* b) {  // their work is ordered by the sync below
        if (b->last_stream == stream) b->last_stream = nullptr;
      });
    }
    (void)hipSetDevice(stream->device);
    const hipError_t e = hipStreamSynchronize(stream->stream);
    (void)hipStreamDestroy(stream->stream);
    delete stream;
    check(e, "stream_destroy: waiting for the stream");
  });
}

rvl_error* stream_synchronize(rvl_stream* stream) {
  return guard([&] {
    rvl_stream* s = live_stream(stream, "stream_synchronize");
    if (s) {
      use_device(s->device);
      check(hipStreamSynchronize(s->stream), "stream_synchronize");
      return;
    }
    for (size_t d = 0; d < devices().size(); ++d) {  // NULL: every device's default stream
      use_device(int32_t(d));
      check(hipStreamSynchronize(nullptr), "stream_synchronize");
    }
  });
}

rvl_error* event_record(rvl_stream* stream, rvl_event** out) {
  return guard([&] {
    if (!out) invalid("event_record: output pointer is NULL");
    require_initialized();
    rvl_stream* s = live_stream(stream, "event_record");
    const int32_t d = s ? s->device : 0;
    use_device(d);
    hipEvent_t e = nullptr;
    check(hipEventCreateWithFlags(&e, hipEventDisableTiming), "hipEventCreate");
    const hipError_t r = hipEventRecord(e, s ? s->stream : nullptr);
    if (r != hipSuccess) (void)hipEventDestroy(e);
    check(r, "hipEventRecord");
    auto* ev = new rvl_event{d, e};
    try {
      registry().events.add(ev);
    } catch (...) {
      (void)hipEventDestroy(e);
      delete ev;
      throw;
    }
    *out = ev;
  });
}

rvl_error* event_wait(rvl_stream* stream, rvl_event* event) {
  return guard([&] {
    rvl_stream* s = live_stream(stream, "event_wait");
    rvl_event* e = live_event(event, "event_wait");
    use_device(s ? s->device : e->device);
    check(hipStreamWaitEvent(s ? s->stream : nullptr, e->event, 0), "event_wait");
  });
}

rvl_error* event_synchronize(rvl_event* event) {
  return guard([&] {
    rvl_event* e = live_event(event, "event_synchronize");
    use_device(e->device);
    check(hipEventSynchronize(e->event), "event_synchronize");
  });
}

rvl_error* event_destroy(rvl_event* event) {
  return guard([&] {
    registry().events.take(event, "event_destroy");
    (void)hipSetDevice(event->device);
    (void)hipEventDestroy(event->event);
    delete event;
  });
}

rvl_error* execute_program(int32_t d, rvl_stream* s, const rvl_program* p) {
  return guard([&] { launch_program(d, s, p); });
}

rvl_error* execute_contraction(int32_t d, rvl_stream* s, const rvl_contraction* c) {
  return guard([&] { launch_contraction(d, s, c); });
}

// ABI 1.5 (peer.cpp, Note [Peer copies]).
rvl_error* buffer_copy_peer(rvl_stream* ss, const rvl_buffer* src, uint64_t so, rvl_stream* ds, rvl_buffer* dst,
                            uint64_t dof, uint64_t n) {
  return guard([&] { copy_peer(ss, src, so, ds, dst, dof, n); });
}

rvl_error* synchronize(int32_t d) {
  return guard([&] {
    use_device(d);
    check(hipDeviceSynchronize(), "synchronize hip:" + std::to_string(d));
  });
}

// ABI 1.9 and 1.12 (collective.cpp, Note [HIP collectives]).
rvl_error* all_reduce(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                      rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op) {
  return guard([&] { run_collective(validate::CollectiveKind::AllReduce, n, streams, inputs, outputs, count, dtype, op); });
}
rvl_error* reduce_scatter(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                          rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op) {
  return guard([&] { run_collective(validate::CollectiveKind::ReduceScatter, n, streams, inputs, outputs, count, dtype, op); });
}
rvl_error* all_gather(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                      rvl_buffer* const* outputs, uint64_t count, int32_t dtype) {
  return guard([&] { run_collective(validate::CollectiveKind::AllGather, n, streams, inputs, outputs, count, dtype, 0); });
}

// Filled from the SDK's one list of members (<ravel/plugin_kit.hpp>).
constexpr rvl_backend_api kTable = RVL_BACKEND_TABLE_OF_FUNCTIONS();

}  // namespace
}  // namespace rvl::hip

RVL_DEFINE_BACKEND_ENTRY(rvl::hip::kTable)
