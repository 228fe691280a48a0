// Note [Peer copies]
// buffer_copy_peer (backend.h) is a two-sided barrier: the copy starts after the work queued on
// both streams, and later work on both streams starts after it. On HIP (and CUDA) that is
//   event A on the source stream  -> the destination stream waits for A
//   hipMemcpyPeerAsync on the destination stream (the runtime uses the peer link, P2P over
//     PCIe/xGMI/NVLink, where there is one, and stages through the host where there is not)
//   event B on the destination stream -> the source stream waits for B
// Nothing blocks the host. The events are destroyed at once: HIP keeps a recorded event alive
// until the work that waits for it has run. Within one device on one stream it is a plain
// device-to-device copy. The emulator (emu/) runs every call synchronously, which satisfies the
// same contract.
#include "peer.hpp"

#include "device.hpp"

#include <string>

namespace rvl::hip {

void order_streams(int32_t device, hipStream_t s, int32_t waiter_device, hipStream_t waiter, const char* what) {
  use_device(device);
  hipEvent_t e = nullptr;
  check(hipEventCreateWithFlags(&e, hipEventDisableTiming), std::string(what) + ": hipEventCreate");
  hipError_t r = hipEventRecord(e, s);
  if (r == hipSuccess) {
    use_device(waiter_device);
    r = hipStreamWaitEvent(waiter, e, 0);
  }
  (void)hipEventDestroy(e);
  check(r, std::string(what) + ": ordering the work of two devices' streams");
}

void copy_peer(rvl_stream* src_stream, const rvl_buffer* src, uint64_t so, rvl_stream* dst_stream, rvl_buffer* dst,
               uint64_t dof, uint64_t n) {
  rvl_buffer* s = live_buffer(src, "buffer_copy_peer source");
  rvl_buffer* d = live_buffer(dst, "buffer_copy_peer destination");
  rvl_stream* ss_handle = live_stream(src_stream, "buffer_copy_peer source stream");
  rvl_stream* ds_handle = live_stream(dst_stream, "buffer_copy_peer destination stream");
  const hipStream_t ss = stream_on(ss_handle, s->device, "buffer_copy_peer source stream");
  const hipStream_t ds = stream_on(ds_handle, d->device, "buffer_copy_peer destination stream");
  check_range("buffer_copy_peer source", so, n, s->size);
  check_range("buffer_copy_peer destination", dof, n, d->size);
  if (s == d && n > 0 && so < dof + n && dof < so + n)
    invalid("buffer_copy_peer: source and destination ranges of one buffer overlap");
  if (n == 0) return;
  const char* from = static_cast<const char*>(s->data) + so;
  char* to = static_cast<char*>(d->data) + dof;
  const bool one_queue = s->device == d->device && ss == ds;
  if (!one_queue) order_streams(s->device, ss, d->device, ds, "buffer_copy_peer");
  use_device(d->device);
  check(s->device == d->device ? hipMemcpyAsync(to, from, n, hipMemcpyDeviceToDevice, ds)
                               : hipMemcpyPeerAsync(to, d->device, from, s->device, n, ds),
        "buffer_copy_peer: hip:" + std::to_string(s->device) + " -> hip:" + std::to_string(d->device));
  if (!one_queue) order_streams(d->device, ds, s->device, ss, "buffer_copy_peer");
  remember_stream(s, ss_handle);
  remember_stream(d, ds_handle);
}

}  // namespace rvl::hip
