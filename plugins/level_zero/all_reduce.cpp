// Note [Level Zero all-reduce]
// The all-reduce (ABI 1.9, backend.h) in the simplest form that keeps the contract with the
// pieces this plugin already has, ordered by the host like its peer copies (Note [Peer copies on
// Level Zero], whose event-chained version waits for a real multi-GPU machine too):
//   1. the host waits for the work queued so far on every part's stream (the barrier in);
//   2. every other part is copied into a scratch block of each device (buffer_copy_peer's path:
//      straight between devices of one driver's context, through host memory otherwise);
//   3. the host waits for the copies (no output, which may be its input, is written before
//      every device has copied that input);
//   4. each device runs one generated kernel, the fold of the n parts in the ABI's order (Note
//      [Fold programs] in <ravel/lowering/all_reduce.hpp>: the same SPIR-V on every device);
//   5. the host waits for the folds (the barrier out), and the scratch blocks go back to the
//      allocator.
// So the call blocks the host for its duration, which the ABI allows, and moves n (n - 1) copies
// of the data; both are what a measured multi-GPU version would improve.
#include "all_reduce.hpp"

#include "kernels.hpp"
#include "peer.hpp"
#include "stream.hpp"

#include <ravel/lowering/all_reduce.hpp>
#include <ravel/validate.hpp>

#include <memory>
#include <string>
#include <vector>

namespace rvl::l0 {

namespace {

// Scratch blocks registered as buffers (buffer_copy_peer and the kernel look their handles up);
// unregistered and given back when destroyed.
struct Scratch {
  std::vector<rvl_buffer*> blocks;
  rvl_buffer* add(DeviceState& dev, uint64_t bytes) {
    uint64_t cap = 0;
    void* p = dev.alloc.allocate(bytes, &cap);
    if (!p && dev.alloc.has_deferred()) {
      synchronize_device(dev);
      p = dev.alloc.allocate(bytes, &cap);
    }
    if (!p)
      rvl::fail(RVL_STATUS_OUT_OF_MEMORY, "level_zero: all_reduce: out of device memory for a scratch block of " +
                                              std::to_string(bytes) + " bytes");
    auto b = std::make_unique<rvl_buffer>(rvl_buffer{&dev, p, bytes, cap});
    try {
      std::lock_guard<std::mutex> lock(registry().mu);
      registry().buffers.insert(b.get());
    } catch (...) {
      dev.alloc.release(p, cap, true);
      throw;
    }
    blocks.push_back(b.release());
    return blocks.back();
  }
  ~Scratch() {
    for (rvl_buffer* b : blocks) {
      {
        std::lock_guard<std::mutex> lock(registry().mu);
        registry().buffers.erase(b);
      }
      b->dev->alloc.release(b->ptr, b->capacity, device_busy(*b->dev));
      delete b;
    }
  }
};

}  // namespace

void run_all_reduce(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs, rvl_buffer* const* outputs,
                    uint64_t count, int32_t dtype, int32_t op) {
  int32_t devices = 0;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    if (!registry().initialized) invalid("level_zero: backend not initialized: call initialize() first");
    devices = static_cast<int32_t>(registry().devices.size());
  }
  const uint64_t bytes = validate::validate_all_reduce(n, devices, inputs, outputs, count, dtype, op,
                                                       [](const rvl_buffer* b, const char* what) {
                                                         const rvl_buffer* live = lookup_buffer(b, what);
                                                         return validate::CollectiveBuffer{live->dev->dev.index, live->size};
                                                       });
  std::vector<rvl_buffer*> in, out;
  std::vector<rvl_stream*> handles;
  std::vector<rvl_stream*> queues;  // resolved: the default stream for NULL
  for (int32_t k = 0; k < n; ++k) {
    in.push_back(lookup_buffer(inputs[k], "all_reduce input"));
    out.push_back(lookup_buffer(outputs[k], "all_reduce output"));
    handles.push_back(streams ? streams[k] : nullptr);
    queues.push_back(&resolve_stream(handles.back(), in.back()->dev, ("all_reduce stream " + std::to_string(k)).c_str()));
  }
  if (count == 0) return;
  if (n == 1) {  // a copy on the device's stream (or nothing, in place)
    if (out[0] != in[0]) copy_peer(handles[0], in[0], 0, handles[0], out[0], 0, bytes);
    return;
  }
  for (rvl_stream* q : queues) q->wait_idle();
  Scratch scratch;
  std::vector<std::vector<rvl_buffer*>> sources(static_cast<size_t>(n));
  for (int32_t k = 0; k < n; ++k)
    for (int32_t j = 0; j < n; ++j) {
      if (j == k) {
        sources[k].push_back(in[k]);
        continue;
      }
      rvl_buffer* copy = scratch.add(*in[k]->dev, bytes);
      copy_peer(handles[j], in[j], 0, handles[k], copy, 0, bytes);
      sources[k].push_back(copy);
    }
  for (rvl_stream* q : queues) q->wait_idle();
  for (int32_t k = 0; k < n; ++k) {
    const lower::FoldProgram fold(sources[k], out[k], count, dtype, op);
    execute_program(in[k]->dev->dev.index, handles[k], &fold.program);
  }
  for (rvl_stream* q : queues) q->wait_idle();
}

}  // namespace rvl::l0
