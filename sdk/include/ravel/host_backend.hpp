// Header-only object model for backends whose "device" is host memory (CPU backends, and the
// SDK template): buffers, streams, events and their registry, written once so a plugin keeps
// only what is its own (probe, get_info, device_properties and running kernels).
//
// Why it exists: the C ABI (backend.h) hands out opaque handles and gets them back from the
// host. A correct plugin must reject every stale or foreign handle with
// RVL_STATUS_INVALID_ARGUMENT instead of crashing, range-check every byte range without
// overflow, free what is still alive at shutdown, and never let an exception escape. That is
// ~200 lines that are the same in every host-memory backend; here they are in one place, tested
// by ravel-conformance through every plugin that uses them.
//
// Model (one device, device 0; all work completes before a call returns):
//  - a buffer is `bytes` of host memory from Hooks::allocate (calloc by default: zero-filled);
//  - streams and events exist only to be validated, so every synchronise call is a no-op;
//  - a live-object registry (rvl::LiveSet of <ravel/plugin_kit.hpp> per kind of handle, its
//    mutex held only for a lookup or an insert/erase) records every handle handed out. Freeing
//    a buffer while a kernel on another thread uses it is a host bug (the ABI serialises per
//    stream, and the host owns lifetimes).
//
// Use (see sdk/template/src/plugin.cpp for a complete plugin):
//   struct Hooks : rvl::host::DefaultHooks {   // in an anonymous namespace (see Backend below)
//     static constexpr const char* name = "mycpu", *version = "0.1.0", *description = "...";
//     static constexpr int32_t probe_score = 5;
//     static void describe_device(rvl_device_properties* out);    // name, compute_units
//     static void execute_program(const rvl_program* p);          // validate, then run
//     static void execute_contraction(const rvl_contraction* c);  // validate, then run
//   };
//   constexpr rvl_backend_api kTable = rvl::host::Backend<Hooks>::table();
//   RVL_DEFINE_BACKEND_ENTRY(kTable)
//
// Hooks (static member functions; derive from DefaultHooks and redefine what you need):
//   void* allocate(uint64_t bytes)             memory for a new buffer (bytes > 0), NULL when out
//                                              of memory. Called without the registry lock.
//   void  deallocate(void* data, uint64_t n)   gives back a block from allocate(); must not throw
//                                              (shutdown() cannot stop half-way). Called with the
//                                              registry lock held from shutdown(), without it from
//                                              buffer_free(): it must not call into Backend.
//   void  on_initialize(), on_shutdown()       called under the registry lock by initialize() and
//                                              shutdown() (after every live buffer was given back
//                                              through deallocate): release what the hooks keep.
//   bool  available(std::string* reason)       optional: probe reports 0 devices and the reason when
//                                              it returns false (default: always available)
//   void  execute_program(const rvl_program*), execute_contraction(const rvl_contraction*)
//                                              validate and run a kernel; called
//                                              after the device, stream and initialisation checks.
// and, with no default (they are what makes the plugin itself):
//   const char* name, version, description     what get_info reports (static constexpr members)
//   int32_t probe_score                        probe's score; higher wins (tbb_cpu reports 10)
//   void  describe_device(rvl_device_properties* out)
//                                              sets out->name (set_device_name),
//                                              out->compute_units and, optionally, arch/details
//                                              (set_device_arch); the rest is filled already.
// The other hooks may throw (rvl::fail, std::bad_alloc...): every member runs inside rvl::guard.
//
// Because this header defines rvl_buffer, rvl_stream and rvl_event, a plugin that includes it
// cannot define its own; a device backend with real device memory does not use this header.
#ifndef RAVEL_HOST_BACKEND_HPP
#define RAVEL_HOST_BACKEND_HPP

#include <ravel/backend.hpp>
#include <ravel/plugin_kit.hpp>

#include <unistd.h>  // sysconf: physical memory

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

// Device memory: plain host memory (16-byte aligned with the default calloc hooks).
struct rvl_buffer {
  std::byte* data;  // NULL only when size == 0
  uint64_t size;    // bytes
  // Set for memory someone else owns (buffer_wrap, ABI 1.2): freeing calls release(context)
  // instead of Hooks::deallocate.
  void (*release)(void*) = nullptr;
  void* release_context = nullptr;
};
// All work completes before a call returns, so a stream only carries its device.
struct rvl_stream {
  int32_t device;
};
// An event marks completed work; it records its stream for diagnostics only.
struct rvl_event {
  const rvl_stream* stream;
};

namespace rvl::host {

// ---- argument checks (throw rvl::Error(INVALID_ARGUMENT) naming what is wrong) --------------
// A host backend has one device: device 0.
inline void check_device(int32_t device) {
  if (device != 0)
    invalid("device " + std::to_string(device) + " does not exist, expected 0");
}

template <class T>
void check_out(T* out, const char* what) {
  if (out == nullptr) invalid(std::string(what) + ": output pointer is NULL");
}

// Checks [offset, offset + bytes) lies inside a buffer of `size` bytes, without overflow.
using rvl::check_range;

// Copies a string into a fixed char array (truncated to fit, always NUL-terminated, the rest
// of the array zeroed).
inline void set_chars(char* dst, size_t size, const std::string& text) {
  std::memset(dst, 0, size);
  std::strncpy(dst, text.c_str(), size - 1);
}
inline void set_device_name(rvl_device_properties* out, const std::string& name) {
  set_chars(out->name, sizeof(out->name), name);
}
// Sets the 1.1 members arch and details, if the host's struct has them.
inline void set_device_arch(rvl_device_properties* out, const std::string& arch,
                            const std::string& details) {
  if (!RVL_HAS_MEMBER(out, rvl_device_properties, details)) return;
  set_chars(out->arch, sizeof(out->arch), arch);
  set_chars(out->details, sizeof(out->details), details);
}

// The default hooks: calloc'd memory (fresh memory is zero-filled, which makes results
// deterministic, and large requests get lazily zeroed pages), nothing kept between calls.
struct DefaultHooks {
  static void* allocate(uint64_t bytes) { return std::calloc(bytes, 1); }
  static void deallocate(void* data, uint64_t /*bytes*/) { std::free(data); }
  static void on_initialize() {}
  static void on_shutdown() {}
};

// The registry and every table member; the plugin's own parts come from Hooks.
//
// All state is a static of this class template, so each Hooks type gets its own registry. Declare
// Hooks in an anonymous namespace: then the registry is private to the plugin even if two
// plugins built from this header are loaded into one process with default symbol visibility.
template <class Hooks>
class Backend {
 public:
  // ---- for the plugin's own code ------------------------------------------------------------
  // Returns a buffer's memory to whoever owns it: the hooks' allocator, or a wrapped buffer's
  // owner through its release callback.
  static void give_back(const rvl_buffer* b) {
    if (b->release) b->release(b->release_context);
    else if (b->data) Hooks::deallocate(b->data, b->size);
  }

  // Throws INVALID_ARGUMENT (naming `what`) unless `b` is a live buffer of this plugin.
  static rvl_buffer* lookup_buffer(const rvl_buffer* b, const char* what) {
    return registry().buffers.get(b, what);
  }

  // lookup_buffer in the shape of the validator's BufferLookup (<ravel/validate.hpp>):
  //   rvl::validate::validate_program(p, Host::buffer_ref<rvl::validate::BufferRef>)
  // A template so that this header does not depend on Ravel::validate.
  template <class Ref>
  static Ref buffer_ref(const rvl_buffer* b, const char* what) {
    const rvl_buffer* live = lookup_buffer(b, what);
    return Ref{live->data, live->size};
  }

  // NULL (the default stream) is accepted; anything else must be a live stream.
  static void check_stream(const rvl_stream* s) {
    if (s != nullptr) registry().streams.get(s, "stream");
  }

  static void require_initialized() {
    if (!registry().initialized) invalid("backend not initialized: call initialize() first");
  }

  // The plugin's entry table: every member of RVL_BACKEND_MEMBERS this class defines (all but
  // buffer_copy_peer: a host backend has one device).
  static constexpr rvl_backend_api table() { return rvl::backend_table<Backend>(); }

  // ---- table members ------------------------------------------------------------------------
  // Cheap and side-effect free, as the ABI requires: host memory is always there.
  static rvl_error* probe(rvl_probe_result* out) {
    return guard([&] {
      // A 1.0 host passes the 1.0 size: accept it, and write 1.1 members only when they fit.
      require_struct(out, "probe result", RVL_PROBE_RESULT_STRUCT_SIZE_1_0);
      std::string reason;
      out->device_count = available(&reason) ? 1 : 0;
      out->score = Hooks::probe_score;
      if (RVL_HAS_MEMBER(out, rvl_probe_result, reason))
        set_chars(out->reason, sizeof out->reason, reason);
    });
  }

  static rvl_error* get_info(rvl_backend_info* out) {
    return guard([&] {
      require_struct(out, "backend info", RVL_BACKEND_INFO_STRUCT_SIZE_1_0);
      out->name = Hooks::name;
      out->version = Hooks::version;
      out->description = Hooks::description;
    });
  }

  // A CPU device: all of physical memory, every dtype, every rank; Hooks names it and counts
  // its compute units.
  static rvl_error* device_properties(int32_t device, rvl_device_properties* out) {
    return guard([&] {
      check_device(device);
      require_struct(out, "device properties", RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_0);
      set_device_name(out, "");
      out->kind = RVL_DEVICE_CPU;
      const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
      out->memory_bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
      out->compute_units = 1;
      out->dtypes = RVL_DTYPES_1_0;  // not the 1.7 dtypes: its kernels do not implement them
      out->max_rank = RVL_MAX_RANK;
      if (RVL_HAS_MEMBER(out, rvl_device_properties, details)) {
        set_chars(out->arch, sizeof out->arch, "");
        out->warp_size = 1;
        set_chars(out->details, sizeof out->details, "");
      }
      Hooks::describe_device(out);
    });
  }

  static rvl_error* initialize() {
    return guard([&] {
      if (std::string why; !available(&why)) fail(RVL_STATUS_UNSUPPORTED, why);
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      r.initialized = true;
      Hooks::on_initialize();
    });
  }

  // Frees everything still alive (the ABI says so), then lets the hooks drop what they keep.
  static void shutdown() {
    guard_void([&] {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      for (rvl_buffer* b : r.buffers.take_all()) {
        give_back(b);
        delete b;
      }
      for (rvl_stream* s : r.streams.take_all()) delete s;
      for (rvl_event* e : r.events.take_all()) delete e;
      r.initialized = false;
      Hooks::on_shutdown();
    });
  }

  static rvl_error* device_count(int32_t* out) {
    return guard([&] {
      check_out(out, "device_count");
      *out = 1;
    });
  }

  static rvl_error* buffer_allocate(int32_t device, uint64_t bytes, rvl_buffer** out) {
    return guard([&] {
      check_device(device);
      check_out(out, "buffer_allocate");
      require_initialized();
      if (bytes > uint64_t(INT64_MAX))
        fail(RVL_STATUS_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes");
      void* data = bytes ? Hooks::allocate(bytes) : nullptr;
      if (bytes && !data)
        fail(RVL_STATUS_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes");
      rvl_buffer* b = nullptr;
      try {  // no leak if the handle or the registry entry cannot be allocated
        b = new rvl_buffer{static_cast<std::byte*>(data), bytes};
        registry().buffers.add(b);
      } catch (...) {
        if (data) Hooks::deallocate(data, bytes);
        delete b;
        throw;
      }
      *out = b;
    });
  }

  static rvl_error* buffer_free(rvl_buffer* buffer) {
    return guard([&] {
      registry().buffers.take(buffer, "buffer_free");  // a second free finds nothing
      give_back(buffer);
      delete buffer;
    });
  }

  // ABI 1.2: host memory is addressable as it is; wrapped memory is released, never freed.
  static rvl_error* buffer_address(const rvl_buffer* buffer, void** out) {
    return guard([&] {
      check_out(out, "buffer_address");
      *out = lookup_buffer(buffer, "buffer_address")->data;
    });
  }

  static rvl_error* buffer_wrap(int32_t device, void* address, uint64_t bytes, void (*release)(void*),
                                void* context, rvl_buffer** out) {
    return guard([&] {
      check_device(device);
      check_out(out, "buffer_wrap");
      require_initialized();
      if (address == nullptr || bytes == 0) invalid("buffer_wrap: address is NULL or bytes is 0");
      // adopt() deletes the handle if it cannot be registered; release is not called on error
      // (the ABI says so).
      *out = registry().buffers.adopt(new rvl_buffer{static_cast<std::byte*>(address), bytes, release, context});
    });
  }

  static rvl_error* buffer_size(const rvl_buffer* buffer, uint64_t* out) {
    return guard([&] {
      check_out(out, "buffer_size");
      *out = lookup_buffer(buffer, "buffer_size")->size;
    });
  }

  static rvl_error* buffer_write(rvl_stream* stream, rvl_buffer* dst, uint64_t dst_offset,
                                 const void* src, uint64_t bytes) {
    return guard([&] {
      check_stream(stream);
      rvl_buffer* b = lookup_buffer(dst, "buffer_write");
      check_range("buffer_write", dst_offset, bytes, b->size);
      if (bytes == 0) return;
      if (src == nullptr) invalid("buffer_write: source pointer is NULL");
      std::memcpy(b->data + dst_offset, src, bytes);
    });
  }

  static rvl_error* buffer_read(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset,
                                void* dst, uint64_t bytes) {
    return guard([&] {
      check_stream(stream);
      rvl_buffer* b = lookup_buffer(src, "buffer_read");
      check_range("buffer_read", src_offset, bytes, b->size);
      if (bytes == 0) return;
      if (dst == nullptr) invalid("buffer_read: destination pointer is NULL");
      std::memcpy(dst, b->data + src_offset, bytes);
    });
  }

  static rvl_error* buffer_copy(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset,
                                rvl_buffer* dst, uint64_t dst_offset, uint64_t bytes) {
    return guard([&] {
      check_stream(stream);
      rvl_buffer* s = lookup_buffer(src, "buffer_copy source");
      rvl_buffer* d = lookup_buffer(dst, "buffer_copy destination");
      check_range("buffer_copy source", src_offset, bytes, s->size);
      check_range("buffer_copy destination", dst_offset, bytes, d->size);
      if (bytes) std::memmove(d->data + dst_offset, s->data + src_offset, bytes);  // may overlap
    });
  }

  static rvl_error* stream_create(int32_t device, rvl_stream** out) {
    return guard([&] {
      check_device(device);
      check_out(out, "stream_create");
      require_initialized();
      *out = registry().streams.adopt(new rvl_stream{device});
    });
  }

  static rvl_error* stream_destroy(rvl_stream* stream) {
    return guard([&] { delete registry().streams.take(stream, "stream_destroy"); });
  }

  static rvl_error* stream_synchronize(rvl_stream* stream) {
    return guard([&] { check_stream(stream); });  // work is already complete
  }

  static rvl_error* event_record(rvl_stream* stream, rvl_event** out) {
    return guard([&] {
      check_stream(stream);
      check_out(out, "event_record");
      *out = registry().events.adopt(new rvl_event{stream});
    });
  }

  static rvl_error* event_wait(rvl_stream* stream, rvl_event* event) {
    return guard([&] {
      check_stream(stream);
      check_event(event, "event_wait");
    });
  }

  static rvl_error* event_synchronize(rvl_event* event) {
    return guard([&] { check_event(event, "event_synchronize"); });
  }

  static rvl_error* event_destroy(rvl_event* event) {
    return guard([&] { delete registry().events.take(event, "event_destroy"); });
  }

  // The checks every kernel launch needs, then the plugin's own validation and execution.
  static rvl_error* execute_program(int32_t device, rvl_stream* stream,
                                    const rvl_program* program) {
    return guard([&] {
      check_launch(device, stream);
      Hooks::execute_program(program);
    });
  }

  static rvl_error* execute_contraction(int32_t device, rvl_stream* stream,
                                        const rvl_contraction* c) {
    return guard([&] {
      check_launch(device, stream);
      Hooks::execute_contraction(c);
    });
  }

  static rvl_error* synchronize(int32_t device) {
    return guard([&] { check_device(device); });  // work is already complete
  }

 private:
  struct Registry {
    std::mutex mu;  // initialize() and shutdown(), and the hooks they call
    std::atomic<bool> initialized{false};
    LiveSet<rvl_buffer> buffers{"buffer"};
    LiveSet<rvl_stream> streams{"stream"};
    LiveSet<rvl_event> events{"event"};
  };

  // Whether the device is there: always for host memory; a hook `static bool available(std::string*
  // reason)` (a driver to find, as in plugins/opencl) decides otherwise, with the reason for 0.
  static bool available(std::string* reason) {
    if constexpr (requires { Hooks::available(reason); }) return Hooks::available(reason);
    return true;
  }

  static Registry& registry() {
    // Never destroyed: the host may call shutdown() from its own static destructors at exit,
    // after this library's statics would otherwise be gone. Still reachable, so no leak report.
    static Registry* r = new Registry;
    return *r;
  }

  static void check_launch(int32_t device, const rvl_stream* stream) {
    check_device(device);
    check_stream(stream);
    require_initialized();
  }

  static void check_event(const rvl_event* e, const char* what) {
    registry().events.get(e, what);
  }
};

}  // namespace rvl::host

#endif  // RAVEL_HOST_BACKEND_HPP
