// Level Zero's collectives across the plugin's own devices: all_reduce (ABI 1.9),
// reduce_scatter and all_gather (ABI 1.12, backend.h).
//
// Note [Level Zero collectives] (was Note [Level Zero all-reduce])
// The shared plan (Note [Collective plans] in <ravel/lowering/collective.hpp>: what is copied
// where, and the fold) in the simplest form that keeps the contract with the pieces this plugin
// already has, ordered by the host like its peer copies (Note [Peer copies on Level Zero], whose
// event-chained version waits for a real multi-GPU machine too):
//   1. the host waits for the work queued so far on every part's stream (the barrier in);
//   2. each device's copies (buffer_copy_peer's path: straight between devices of one driver's
//      context, through host memory otherwise): for all_reduce every other input, for
//      reduce_scatter chunk k of every other input, into scratch blocks of device k; for
//      all_gather every input into its slot of device k's output;
//   3. the host waits for the copies (for all_reduce no output, which may be its input, is
//      written before every device has copied that input; the others need it only because a
//      copy into a scratch block must be complete before the fold on another list reads it);
//   4. the reductions: each device runs one generated kernel, the fold of the n parts in the
//      ABI's order (Note [Fold programs] in <ravel/lowering/all_reduce.hpp>: for all_reduce the
//      same SPIR-V on every device; reduce_scatter reads its own chunk in place by offset);
//   5. the host waits for the folds (the barrier out), and the scratch blocks go back to the
//      allocator.
// So a call blocks the host for its duration, which the ABI allows; all_reduce moves n (n - 1)
// copies of the data, the others what a ring moves. Both are what a measured multi-GPU version
// would improve.
#include "collective.hpp"

#include "kernels.hpp"
#include "peer.hpp"
#include "stream.hpp"

#include <ravel/lowering/all_reduce.hpp>
#include <ravel/lowering/collective.hpp>
#include <ravel/validate_collective.hpp>

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
      rvl::fail(RVL_STATUS_OUT_OF_MEMORY, "level_zero: collective: out of device memory for a scratch block of " +
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

void run_collective(validate::CollectiveKind kind, int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                    rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op) {
  int32_t devices = 0;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    if (!registry().initialized) invalid("level_zero: backend not initialized: call initialize() first");
    devices = static_cast<int32_t>(registry().devices.size());
  }
  const validate::Collective c = validate::validate_collective(
      kind, n, devices, streams, inputs, outputs, count, dtype, op,
      [](const rvl_buffer* b, const char* what) {
        const rvl_buffer* live = lookup_buffer(b, what);
        return validate::CollectiveMemory{static_cast<std::byte*>(live->ptr), live->size, live->dev->dev.index};
      },
      [](const rvl_stream* s, int32_t device, const char* what) {
        (void)resolve_stream(const_cast<rvl_stream*>(s), &device_state(device), what);
      });
  const std::string name = validate::collective_name(kind);
  std::vector<rvl_buffer*> in, out;
  std::vector<rvl_stream*> handles;
  std::vector<rvl_stream*> queues;  // resolved: the default stream for NULL
  for (int32_t k = 0; k < n; ++k) {
    in.push_back(lookup_buffer(inputs[k], (name + " input").c_str()));
    out.push_back(lookup_buffer(outputs[k], (name + " output").c_str()));
    handles.push_back(streams ? streams[k] : nullptr);
    queues.push_back(&resolve_stream(handles.back(), in.back()->dev, (name + " stream " + std::to_string(k)).c_str()));
  }
  if (count == 0) return;
  const lower::CollectivePlan plan = lower::plan_collective(kind, n, count, c.element_size);  // Note [Collective plans]
  if (n > 1)
    for (rvl_stream* q : queues) q->wait_idle();
  Scratch scratch;
  std::vector<std::vector<rvl_buffer*>> blocks(static_cast<size_t>(n));
  for (int32_t k = 0; k < n; ++k) {
    for (int32_t b = 0; b < plan.scratch_blocks; ++b) blocks[k].push_back(scratch.add(*in[k]->dev, plan.scratch_bytes));
    for (const lower::CollectivePlan::Copy& cp : plan.shares[k].copies) {
      rvl_buffer* to = cp.scratch < 0 ? out[k] : blocks[k][static_cast<size_t>(cp.scratch)];
      if (to == in[cp.from] && cp.to_byte == cp.from_byte) continue;  // all_reduce of one part, in place
      copy_peer(handles[cp.from], in[cp.from], cp.from_byte, handles[k], to, cp.to_byte, cp.bytes);
    }
  }
  if (n == 1) return;  // one copy, ordered on its stream
  for (rvl_stream* q : queues) q->wait_idle();
  for (int32_t k = 0; k < n; ++k) {
    const auto& fold = plan.shares[k].fold;
    if (fold.empty()) continue;
    std::vector<rvl_buffer*> sources;
    std::vector<int64_t> offsets;
    for (const lower::CollectivePlan::Operand& o : fold) {
      sources.push_back(o.scratch < 0 ? in[k] : blocks[k][static_cast<size_t>(o.scratch)]);
      offsets.push_back(o.element);
    }
    const lower::FoldProgram program(sources, out[k], count, dtype, op, offsets);  // Note [Fold programs]
    execute_program(in[k]->dev->dev.index, handles[k], &program.program);
  }
  for (rvl_stream* q : queues) q->wait_idle();
}

}  // namespace rvl::l0
