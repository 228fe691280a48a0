// tbb_cpu buffers: allocation with per-device accounting, host transfers, copies within a device
// and between devices (buffer_copy_peer, ABI 1.5), all ordered by the owning device's queue when
// it has one (Note [Device queues]).
#include "block_cache.hpp"
#include "devices.hpp"
#include "members.hpp"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>

namespace tbbcpu {

namespace {

// Reserves `bytes` of the device's share; false when it does not fit.
bool reserve(Device& d, uint64_t bytes) {
  uint64_t used = d.used.load();
  do {
    if (bytes > d.memory_limit || used > d.memory_limit - bytes) return false;
  } while (!d.used.compare_exchange_weak(used, used + bytes));
  return true;
}

[[noreturn]] void out_of_memory(Device& d, uint64_t bytes) {
  const uint64_t used = d.used.load();
  rvl::fail(RVL_STATUS_OUT_OF_MEMORY,
            "device " + std::to_string(d.index) + ": cannot allocate " + std::to_string(bytes) + " bytes: " +
                std::to_string(used < d.memory_limit ? d.memory_limit - used : 0) + " of its " +
                std::to_string(d.memory_limit) + " bytes are free (RAVEL_TBB_DEVICES shares memory between devices)");
}

rvl_buffer* register_buffer(rvl_buffer* b) {
  return state().buffers.adopt(b);
}

// Note [Peer copies]
// A copy between two devices is a two-sided barrier: one task on each device's queue, and the
// two tasks wait for each other. When both have arrived, every task queued before the copy on
// either device has finished (the source's writes are complete, nothing still reads the
// destination); each side then copies half of the bytes (two threads copy faster than one), and
// neither side goes on before both halves are done, so later work on either device sees the copy
// and may overwrite the source. DeviceQueue::push_pair queues both tasks atomically, so any two
// barriers are queued in the same order on every queue they share, and tasks that wait for
// earlier tasks of other queues can never wait in a cycle.
// The two sides meet on atomics (C++20 wait/notify, which spin briefly before a futex): a
// condition variable made every copy of a training step's small tensors two sleeps and two
// wake-ups (Note [Spinning] in device_queue.cpp). Below kSplitBytes one side copies everything:
// splitting a few kilobytes over two threads costs more than it saves.
struct PeerCopy {
  static constexpr uint64_t kSplitBytes = 256 * 1024;
  const std::byte* src;
  std::byte* dst;
  uint64_t bytes;
  std::atomic<int> arrived{0}, finished{0};

  static void meet(std::atomic<int>& count) {
    if (count.fetch_add(1, std::memory_order_acq_rel) + 1 == 2) {
      count.notify_all();
      return;
    }
    for (int round = 0; round < 4000; ++round) {
      if (count.load(std::memory_order_acquire) == 2) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    for (int seen = count.load(std::memory_order_acquire); seen != 2; seen = count.load(std::memory_order_acquire))
      count.wait(seen, std::memory_order_acquire);
  }
  void side(int half) {
    meet(arrived);
    const uint64_t mid = bytes < kSplitBytes ? 0 : (bytes / 2) & ~uint64_t{63};  // cache-line aligned split
    if (half == 0) std::memcpy(dst, src, mid);
    else std::memcpy(dst + mid, src + mid, bytes - mid);
    meet(finished);
  }
};

void check_no_overlap(const char* what, const rvl_buffer* s, uint64_t so, const rvl_buffer* d, uint64_t doff,
                      uint64_t bytes) {
  if (s == d && bytes > 0 && so < doff + bytes && doff < so + bytes)
    rvl::invalid(std::string(what) + ": source and destination ranges of one buffer overlap");
}

// Copies between any two buffers of this plugin, ordered on both devices (Note [Peer copies]).
void copy_between(const rvl_buffer* s, uint64_t so, rvl_buffer* d, uint64_t doff, uint64_t bytes) {
  Device& sd = device_at(s->device);
  Device& dd = device_at(d->device);
  const std::byte* from = s->data + so;
  std::byte* to = d->data + doff;
  if (bytes == 0) return;
  if (&sd == &dd || (!sd.queue && !dd.queue)) {  // one queue orders it, or nothing is queued
    submit(dd, [from, to, bytes] { std::memmove(to, from, bytes); });
    return;
  }
  if (!sd.queue || !dd.queue) {
    // One side runs on the launching thread (Note [Queues by core count]): the queued side's
    // earlier work must finish first (its writes to the source, or its reads of the destination),
    // and the copy itself must be done before this returns, since the launching thread's next
    // call may free or overwrite the source. So: drain that queue, then copy here.
    DeviceQueue& queued = sd.queue ? *sd.queue : *dd.queue;
    queued.drain();
    std::memmove(to, from, bytes);
    return;
  }
  auto pc = std::make_shared<PeerCopy>();
  pc->src = from;
  pc->dst = to;
  pc->bytes = bytes;
  DeviceQueue::push_pair(*sd.queue, [pc] { pc->side(0); }, *dd.queue, [pc] { pc->side(1); });
}

}  // namespace

rvl_error* buffer_allocate(int32_t device, uint64_t bytes, rvl_buffer** out) {
  return rvl::guard([&] {
    Device& d = device_at(device);
    if (out == nullptr) rvl::invalid("buffer_allocate: output pointer is NULL");
    if (!reserve(d, bytes)) {
      if (d.queue) d.queue->drain();  // frees still queued give their bytes back first (an
                                      // asynchronous error stays for the next synchronisation)
      if (!reserve(d, bytes)) out_of_memory(d, bytes);
    }
    void* data = bytes ? block_cache().allocate(bytes) : nullptr;
    if (bytes && !data) {
      d.used -= bytes;
      out_of_memory(d, bytes);
    }
    rvl_buffer* b = nullptr;
    try {
      b = new rvl_buffer{static_cast<std::byte*>(data), bytes, device};
    } catch (...) {
      if (data) block_cache().release(data, bytes);
      d.used -= bytes;
      throw;
    }
    *out = register_buffer(b);
  });
}

// The memory goes back once the work queued on the device before the free has run; a wrapped
// buffer's release runs on this thread, as the ABI promises, after waiting for that work.
rvl_error* buffer_free(rvl_buffer* buffer) {
  return rvl::guard([&] {
    state().buffers.take(buffer, "buffer_free");  // erase-or-fail: a second free finds nothing
    Device& d = device_at(buffer->device);
    if (buffer->release) {
      if (d.queue) d.queue->drain();
      destroy_buffer(buffer);
      return;
    }
    submit(d, [buffer, &d] {
      const uint64_t bytes = buffer->size;
      destroy_buffer(buffer);
      d.used -= bytes;
    });
  });
}

rvl_error* buffer_size(const rvl_buffer* buffer, uint64_t* out) {
  return rvl::guard([&] {
    if (out == nullptr) rvl::invalid("buffer_size: output pointer is NULL");
    *out = lookup_buffer(buffer, "buffer_size")->size;
  });
}

// Ordered after the work queued on the device: written now when nothing is queued, else from a
// staged copy by the queue (the host may reuse `src` as soon as this returns).
rvl_error* buffer_write(rvl_stream* stream, rvl_buffer* dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
  return rvl::guard([&] {
    rvl_buffer* b = lookup_buffer(dst, "buffer_write");
    stream_device(stream, b->device, "buffer_write");
    check_range("buffer_write", dst_offset, bytes, b->size);
    if (bytes == 0) return;
    if (src == nullptr) rvl::invalid("buffer_write: source pointer is NULL");
    Device& d = device_at(b->device);
    std::byte* to = b->data + dst_offset;
    if (!d.queue || d.queue->idle()) {
      std::memcpy(to, src, bytes);
      return;
    }
    std::shared_ptr<std::byte[]> staged(new std::byte[bytes]);
    std::memcpy(staged.get(), src, bytes);
    d.queue->push([staged, to, bytes] { std::memcpy(to, staged.get(), bytes); });
  });
}

// Synchronising: waits for the device's queued work and reports its asynchronous error, if any.
rvl_error* buffer_read(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset, void* dst, uint64_t bytes) {
  return rvl::guard([&] {
    rvl_buffer* b = lookup_buffer(src, "buffer_read");
    stream_device(stream, b->device, "buffer_read");
    check_range("buffer_read", src_offset, bytes, b->size);
    if (bytes == 0) return;
    if (dst == nullptr) rvl::invalid("buffer_read: destination pointer is NULL");
    synchronize_device(device_at(b->device));
    std::memcpy(dst, b->data + src_offset, bytes);
  });
}

// Within one device (the ranges may overlap: memmove), or between two, then as buffer_copy_peer
// with `stream` standing for the stream of whichever device it belongs to.
rvl_error* buffer_copy(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset, rvl_buffer* dst,
                       uint64_t dst_offset, uint64_t bytes) {
  return rvl::guard([&] {
    rvl_buffer* s = lookup_buffer(src, "buffer_copy source");
    rvl_buffer* d = lookup_buffer(dst, "buffer_copy destination");
    const int32_t sd = stream_device(stream, -1, "buffer_copy");
    if (stream && sd != s->device && sd != d->device)
      rvl::invalid("buffer_copy: the stream belongs to device " + std::to_string(sd) + ", the buffers to devices " +
                   std::to_string(s->device) + " and " + std::to_string(d->device));
    check_range("buffer_copy source", src_offset, bytes, s->size);
    check_range("buffer_copy destination", dst_offset, bytes, d->size);
    copy_between(s, src_offset, d, dst_offset, bytes);
  });
}

rvl_error* buffer_copy_peer(rvl_stream* src_stream, const rvl_buffer* src, uint64_t src_offset,
                            rvl_stream* dst_stream, rvl_buffer* dst, uint64_t dst_offset, uint64_t bytes) {
  return rvl::guard([&] {
    rvl_buffer* s = lookup_buffer(src, "buffer_copy_peer source");
    rvl_buffer* d = lookup_buffer(dst, "buffer_copy_peer destination");
    stream_device(src_stream, s->device, "buffer_copy_peer source stream");
    stream_device(dst_stream, d->device, "buffer_copy_peer destination stream");
    check_range("buffer_copy_peer source", src_offset, bytes, s->size);
    check_range("buffer_copy_peer destination", dst_offset, bytes, d->size);
    check_no_overlap("buffer_copy_peer", s, src_offset, d, dst_offset, bytes);
    copy_between(s, src_offset, d, dst_offset, bytes);
  });
}

// ABI 1.2: host memory is addressable as it is; wrapped memory is released, never freed.
rvl_error* buffer_address(const rvl_buffer* buffer, void** out) {
  return rvl::guard([&] {
    if (out == nullptr) rvl::invalid("buffer_address: output pointer is NULL");
    *out = lookup_buffer(buffer, "buffer_address")->data;
  });
}

rvl_error* buffer_wrap(int32_t device, void* address, uint64_t bytes, void (*release)(void*), void* context,
                       rvl_buffer** out) {
  return rvl::guard([&] {
    device_at(device);
    if (out == nullptr) rvl::invalid("buffer_wrap: output pointer is NULL");
    if (address == nullptr || bytes == 0) rvl::invalid("buffer_wrap: address is NULL or bytes is 0");
    // release is not called on error (the ABI says so): register_buffer deletes only the handle.
    *out = register_buffer(new rvl_buffer{static_cast<std::byte*>(address), bytes, device, release, context});
  });
}

}  // namespace tbbcpu
