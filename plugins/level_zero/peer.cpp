// Note [Peer copies on Level Zero]
// buffer_copy_peer (ABI 1.5, backend.h) is a two-sided barrier between the source's and the
// destination's streams. Devices of one driver share its context (device.hpp), so a command list
// of the destination device copies straight from the source device's memory (the driver uses
// its copy path between the devices, P2P where the hardware has it). The ordering is kept by the
// host, simply: it waits for the source stream's queued work, appends the copy to the destination
// stream (in order after that stream's work), and waits for the copy, so later work on either
// stream runs after it. That blocks the caller for the copy's duration; an event-chained version
// (the source stream signals, the destination waits, and the other way round) would not, but
// needs events visible to both devices' lists and a point at which both have passed them before
// the pool may reuse them: left for when a real multi-GPU machine can measure it.
// Devices of different drivers share no context: the bytes go through host memory.
#include "peer.hpp"

#include <ravel/plugin_kit.hpp>  // check_range

#include <cstring>
#include <string>
#include <vector>

namespace rvl::l0 {

void copy_peer(rvl_stream* src_stream, const rvl_buffer* src, uint64_t so, rvl_stream* dst_stream, rvl_buffer* dst,
               uint64_t dof, uint64_t n) {
  rvl_buffer* sb = lookup_buffer(src, "buffer_copy_peer source");
  rvl_buffer* db = lookup_buffer(dst, "buffer_copy_peer destination");
  rvl_stream& ss = resolve_stream(src_stream, sb->dev, "buffer_copy_peer source stream");
  rvl_stream& ds = resolve_stream(dst_stream, db->dev, "buffer_copy_peer destination stream");
  check_range("buffer_copy_peer source", so, n, sb->size);
  check_range("buffer_copy_peer destination", dof, n, db->size);
  if (sb == db && n > 0 && so < dof + n && dof < so + n)
    invalid("buffer_copy_peer: source and destination ranges of one buffer overlap");
  if (n == 0) return;
  const char* from = static_cast<const char*>(sb->ptr) + so;
  char* to = static_cast<char*>(db->ptr) + dof;
  const ZeApi& ze = ds.dev.ze;
  if (&ss == &ds) {  // one stream orders it already
    ds.enqueue([&] { return ze.zeCommandListAppendMemoryCopy(ds.list, to, from, n, nullptr, 0, nullptr); },
               "zeCommandListAppendMemoryCopy (buffer_copy_peer)");
    return;
  }
  if (sb->dev->dev.context != db->dev->dev.context) {  // different drivers: through the host
    std::vector<char> host(n);
    {
      std::lock_guard<std::recursive_mutex> lock(ss.mu);
      void* staged = ss.staging.take(n);
      ss.enqueue([&] { return ss.dev.ze.zeCommandListAppendMemoryCopy(ss.list, staged, from, n, nullptr, 0, nullptr); },
                 "zeCommandListAppendMemoryCopy (buffer_copy_peer, device to host)");
      ss.wait_idle();
      std::memcpy(host.data(), staged, n);
      ss.synchronize();
    }
    ds.write(to, host.data(), n);
    ds.wait_idle();
    return;
  }
  ss.wait_idle();  // the source's pending writes are complete
  ds.enqueue([&] { return ze.zeCommandListAppendMemoryCopy(ds.list, to, from, n, nullptr, 0, nullptr); },
             "zeCommandListAppendMemoryCopy (buffer_copy_peer, device to device)");
  ds.wait_idle();  // later work on the source stream may overwrite it
}

}  // namespace rvl::l0
