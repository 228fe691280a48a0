// HIP's collectives across the plugin's own devices: all_reduce (ABI 1.9), reduce_scatter and
// all_gather (ABI 1.12, backend.h).
//
// Note [HIP collectives] (was Note [HIP all-reduce])
// NCCL's ring moves each byte over every link once; this first version is the simplest plan that
// keeps every stream asynchronous and reuses the plugin's own kernels, so it is correct for every
// dtype and op the code generator runs (and needs no hand-written kernels per dtype). What is
// copied where and folded how is the shared plan (Note [Collective plans] in
// <ravel/lowering/collective.hpp>); this file orders it with events:
//   1. barrier in: every device's stream waits for the work queued before the call on every
//      other device's stream (events, as Note [Peer copies]);
//   2. device k's copies on its own stream (hipMemcpyPeerAsync: P2P where the hardware has a
//      link, staged by the runtime otherwise): for all_reduce every other input, for
//      reduce_scatter chunk k of every other input, into scratch blocks of its own; for
//      all_gather every input straight into its slot of the output;
//   3. all_reduce only: a second barrier, so no device writes its output (which may be its
//      input, in place) before every other device has copied that input;
//   4. the reductions: device k runs one generated kernel, the fold of the n parts in the ABI's
//      order (Note [Fold programs] in <ravel/lowering/all_reduce.hpp>: the same program on every
//      device for all_reduce, so every output holds the same bytes; reduce_scatter reads its own
//      chunk in place through the operand's offset);
//   5. barrier out: work queued after the call on any stream waits for every copy and fold.
// all_reduce moves n (n - 1) copies of the data against a ring's 2 (n - 1); reduce_scatter
// (n - 1) chunks per device, as a ring does; all_gather (n - 1) inputs per device, as a ring
// does. The ring for all_reduce (and reading peers' memory in place from the fold, where peer
// access is enabled) is the next step once a real multi-GPU machine can measure it. Nothing
// blocks the host: the scratch blocks go back to the caching allocator fenced behind each
// device's stream into its default stream (Note [Caching allocator]), like buffer_free.
#include "collective.hpp"

#include "allocator.hpp"
#include "device.hpp"
#include "execute.hpp"
#include "peer.hpp"

#include <ravel/lowering/all_reduce.hpp>
#include <ravel/lowering/collective.hpp>
#include <ravel/validate_collective.hpp>

#include <memory>
#include <string>
#include <vector>

namespace rvl::hip {

namespace {

struct Part {
  rvl_buffer* in;
  rvl_buffer* out;
  rvl_stream* handle;  // NULL: the device's default stream
  hipStream_t stream;
};

std::vector<Part> parts_of(const std::string& name, int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                           rvl_buffer* const* outputs) {
  std::vector<Part> parts;
  for (int32_t k = 0; k < n; ++k) {
    const std::string which = name + " stream " + std::to_string(k);
    rvl_buffer* in = live_buffer(inputs[k], (name + " input").c_str());
    rvl_stream* s = streams ? live_stream(streams[k], which.c_str()) : nullptr;
    parts.push_back({in, live_buffer(outputs[k], (name + " output").c_str()), s, stream_on(s, in->device, which.c_str())});
  }
  return parts;
}

// Every stream waits for the work queued so far on every other one.
void barrier(const std::vector<Part>& parts, const std::string& what) {
  for (const Part& waiter : parts)
    for (const Part& p : parts)
      if (&p != &waiter) order_streams(p.in->device, p.stream, waiter.in->device, waiter.stream, what.c_str());
}

// Scratch blocks registered as buffers for the fold's kernel; given back when destroyed.
struct Scratch {
  std::vector<rvl_buffer*> blocks;
  std::vector<hipStream_t> fences;  // the stream each block was last used on
  rvl_buffer* add(int32_t device, uint64_t bytes, hipStream_t used_on) {
    use_device(device);
    void* data = allocator().allocate(device, bytes);
    auto b = std::make_unique<rvl_buffer>(rvl_buffer{device, data, bytes, nullptr});
    try {
      registry().buffers.add(b.get());
    } catch (...) {
      allocator().release(device, data, bytes);
      throw;
    }
    blocks.push_back(b.release());
    fences.push_back(used_on);
    return blocks.back();
  }
  ~Scratch() {
    for (size_t i = 0; i < blocks.size(); ++i) {
      rvl_buffer* b = blocks[i];
      try {
        registry().buffers.take(b, "collective scratch");
      } catch (...) {
      }
      (void)hipSetDevice(b->device);
      if (fences[i] != nullptr) {  // later users of the block (default stream) wait for the fold
        hipEvent_t e = nullptr;
        if (hipEventCreateWithFlags(&e, hipEventDisableTiming) == hipSuccess) {
          (void)hipEventRecord(e, fences[i]);
          (void)hipStreamWaitEvent(nullptr, e, 0);
          (void)hipEventDestroy(e);
        } else {
          (void)hipStreamSynchronize(fences[i]);
        }
      }
      allocator().release(b->device, b->data, b->size);
      delete b;
    }
  }
};

}  // namespace

void run_collective(validate::CollectiveKind kind, int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                    rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op) {
  require_initialized();
  const validate::Collective c = validate::validate_collective(
      kind, n, static_cast<int32_t>(devices().size()), streams, inputs, outputs, count, dtype, op,
      [](const rvl_buffer* b, const char* what) {
        const rvl_buffer* live = live_buffer(b, what);
        return validate::CollectiveMemory{static_cast<std::byte*>(live->data), live->size, live->device};
      },
      [](const rvl_stream* s, int32_t device, const char* what) { (void)stream_on(live_stream(s, what), device, what); });
  const std::string name = validate::collective_name(kind);
  const std::vector<Part> parts = parts_of(name, n, streams, inputs, outputs);
  if (count == 0) return;
  const lower::CollectivePlan plan = lower::plan_collective(kind, n, count, c.element_size);  // Note [Collective plans]
  barrier(parts, name + " (before)");
  Scratch scratch;
  std::vector<std::vector<rvl_buffer*>> blocks(parts.size());
  for (size_t k = 0; k < parts.size(); ++k) {
    const Part& me = parts[k];
    for (int32_t b = 0; b < plan.scratch_blocks; ++b) blocks[k].push_back(scratch.add(me.in->device, plan.scratch_bytes, me.stream));
    for (const lower::CollectivePlan::Copy& cp : plan.shares[k].copies) {
      const Part& from = parts[static_cast<size_t>(cp.from)];
      const auto* src = static_cast<const char*>(from.in->data) + cp.from_byte;
      char* dst = static_cast<char*>(cp.scratch < 0 ? me.out->data : blocks[k][static_cast<size_t>(cp.scratch)]->data) + cp.to_byte;
      if (src == dst) continue;  // all_reduce of one part, in place
      use_device(me.in->device);
      check(hipMemcpyPeerAsync(dst, me.in->device, src, from.in->device, cp.bytes, me.stream),
            name + ": hip:" + std::to_string(from.in->device) + " -> hip:" + std::to_string(me.in->device));
    }
  }
  if (plan.barrier_between) barrier(parts, name + " (copies done)");
  for (size_t k = 0; k < parts.size(); ++k) {
    const auto& fold = plan.shares[k].fold;
    if (fold.empty()) continue;
    std::vector<rvl_buffer*> sources;
    std::vector<int64_t> offsets;
    for (const lower::CollectivePlan::Operand& o : fold) {
      sources.push_back(o.scratch < 0 ? parts[k].in : blocks[k][static_cast<size_t>(o.scratch)]);
      offsets.push_back(o.element);
    }
    const lower::FoldProgram program(sources, parts[k].out, count, dtype, op, offsets);  // Note [Fold programs]
    launch_program(parts[k].in->device, parts[k].handle, &program.program);
  }
  barrier(parts, name + " (after)");
}

}  // namespace rvl::hip
