// Note [Staging]
// buffer_write may return before the copy is done (the ABI allows asynchronous copies), but the
// caller may reuse its memory at once, and pageable memory makes the driver copy synchronously
// anyway. So a write copies into a pinned block and queues the DMA from there; the block is
// reused once the event recorded after its copy has completed. Reads go through a pinned block
// too (DMA at full speed), then the host waits on the stream and copies out. Transfers above
// 64 MiB go directly (pinned memory is scarce) and wait for their copy to finish.
#include "staging.hpp"

#include "device.hpp"

#include <cstring>

namespace rvl::hip {
namespace {
constexpr uint64_t kDirect = uint64_t(64) << 20;
constexpr uint64_t kMinBlock = uint64_t(1) << 20;
}  // namespace

Staging::Block* Staging::acquire(int32_t device, uint64_t bytes) {
  auto& list = blocks_[device];
  for (Block* b : list)
    if (!b->busy && b->capacity >= bytes && hipEventQuery(b->done) == hipSuccess) return b;
  uint64_t cap = kMinBlock;
  while (cap < bytes) cap <<= 1;
  auto* b = new Block;
  b->capacity = cap;
  hipError_t e = hipHostMalloc(&b->host, cap, hipHostMallocDefault);
  if (e == hipSuccess) e = hipEventCreateWithFlags(&b->done, hipEventDisableTiming);
  if (e == hipSuccess) e = hipEventRecord(b->done, nullptr);  // completes at once: block is idle
  if (e != hipSuccess) {
    if (b->host) (void)hipHostFree(b->host);
    delete b;
    check(e, "pinned staging block of " + std::to_string(cap) + " bytes");
  }
  list.push_back(b);
  return b;
}

void Staging::write(int32_t device, hipStream_t s, void* dst, const void* src, uint64_t bytes) {
  if (bytes > kDirect) {
    check(hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, s), "buffer_write");
    check(hipStreamSynchronize(s), "buffer_write: waiting for the copy");
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Block* b = acquire(device, bytes);
  std::memcpy(b->host, src, bytes);
  check(hipMemcpyAsync(dst, b->host, bytes, hipMemcpyHostToDevice, s), "buffer_write");
  check(hipEventRecord(b->done, s), "buffer_write: event");
}

void Staging::read(int32_t device, hipStream_t s, void* dst, const void* src, uint64_t bytes) {
  if (bytes > kDirect) {
    check(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, s), "buffer_read");
    check(hipStreamSynchronize(s), "buffer_read: waiting for the copy");
    return;
  }
  Block* b;
  {
    std::lock_guard<std::mutex> lock(mu_);
    b = acquire(device, bytes);
    b->busy = true;
  }
  struct Release {  // the block is idle again however this ends
    Staging* st;
    Block* b;
    ~Release() { std::lock_guard<std::mutex> lock(st->mu_); b->busy = false; }
  } release{this, b};
  check(hipMemcpyAsync(b->host, src, bytes, hipMemcpyDeviceToHost, s), "buffer_read");
  check(hipStreamSynchronize(s), "buffer_read: waiting for the stream");
  std::memcpy(dst, b->host, bytes);
}

void Staging::release_all() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [dev, list] : blocks_) {
    for (Block* b : list) {
      (void)hipEventDestroy(b->done);
      (void)hipHostFree(b->host);
      delete b;
    }
  }
  blocks_.clear();
}

Staging& staging() {
  static auto* s = new Staging;
  return *s;
}

}  // namespace rvl::hip
