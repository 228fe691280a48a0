// HIP's all_reduce (ABI 1.9, backend.h): a collective across the plugin's own devices.
//
// Note [HIP all-reduce]
// NCCL's ring moves each byte over every link once; this first version is the simplest plan that
// keeps every stream asynchronous and reuses the plugin's own kernels, so it is correct for every
// dtype and op the code generator runs (and needs no hand-written kernels per dtype):
//   1. barrier in: every device's stream waits for the work queued before the call on every
//      other device's stream (events, as Note [Peer copies]);
//   2. device k copies every other input into scratch blocks of its own (hipMemcpyPeerAsync on
//      its stream: P2P where the hardware has a link, staged by the runtime otherwise);
//   3. a second barrier, so no device writes its output (which may be its input, in place)
//      before every other device has copied that input;
//   4. device k runs one generated kernel, the fold of the n parts in the ABI's order (Note
//      [Fold programs] in <ravel/lowering/all_reduce.hpp>: the same program on every device, so
//      every output holds the same bytes);
//   5. barrier out: work queued after the call on any stream waits for every fold.
// Each device receives (n - 1) parts: n (n - 1) copies of the data in all, against a ring's
// 2 (n - 1); the ring (and reading peers' memory in place from the fold, where peer access is
// enabled) is the next step once a real multi-GPU machine can measure it. Nothing blocks the
// host: the scratch blocks go back to the caching allocator fenced behind each device's stream
// into its default stream (Note [Caching allocator]), like buffer_free.
#include "all_reduce.hpp"

#include "allocator.hpp"
#include "device.hpp"
#include "execute.hpp"
#include "peer.hpp"

#include <ravel/lowering/all_reduce.hpp>
#include <ravel/validate.hpp>

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

std::vector<Part> parts_of(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                           rvl_buffer* const* outputs) {
  std::vector<Part> parts;
  for (int32_t k = 0; k < n; ++k) {
    const std::string which = "all_reduce stream " + std::to_string(k);
    rvl_buffer* in = live_buffer(inputs[k], "all_reduce input");
    rvl_stream* s = streams ? live_stream(streams[k], which.c_str()) : nullptr;
    parts.push_back({in, live_buffer(outputs[k], "all_reduce output"), s, stream_on(s, in->device, which.c_str())});
  }
  return parts;
}

// Every stream waits for the work queued so far on every other one.
void barrier(const std::vector<Part>& parts, const char* what) {
  for (const Part& waiter : parts)
    for (const Part& p : parts)
      if (&p != &waiter) order_streams(p.in->device, p.stream, waiter.in->device, waiter.stream, what);
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
        registry().buffers.take(b, "all_reduce scratch");
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

void run_all_reduce(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs, rvl_buffer* const* outputs,
                    uint64_t count, int32_t dtype, int32_t op) {
  require_initialized();
  const uint64_t bytes = validate::validate_all_reduce(
      n, static_cast<int32_t>(devices().size()), inputs, outputs, count, dtype, op,
      [](const rvl_buffer* b, const char* what) {
        const rvl_buffer* live = live_buffer(b, what);
        return validate::CollectiveBuffer{live->device, live->size};
      });
  const std::vector<Part> parts = parts_of(n, streams, inputs, outputs);  // checks the streams
  if (count == 0) return;
  if (n == 1) {  // a copy on the device's stream (or nothing, in place)
    if (parts[0].out != parts[0].in) {
      use_device(parts[0].in->device);
      check(hipMemcpyAsync(parts[0].out->data, parts[0].in->data, bytes, hipMemcpyDeviceToDevice, parts[0].stream),
            "all_reduce of one part: copying on hip:" + std::to_string(parts[0].in->device));
    }
    return;
  }
  barrier(parts, "all_reduce (before)");
  Scratch scratch;
  std::vector<std::vector<rvl_buffer*>> sources(parts.size());
  for (size_t k = 0; k < parts.size(); ++k) {
    const Part& me = parts[k];
    for (size_t j = 0; j < parts.size(); ++j) {
      if (j == k) {
        sources[k].push_back(me.in);
        continue;
      }
      rvl_buffer* copy = scratch.add(me.in->device, bytes, me.stream);
      use_device(me.in->device);
      check(hipMemcpyPeerAsync(copy->data, me.in->device, parts[j].in->data, parts[j].in->device, bytes, me.stream),
            "all_reduce: hip:" + std::to_string(parts[j].in->device) + " -> hip:" + std::to_string(me.in->device));
      sources[k].push_back(copy);
    }
  }
  barrier(parts, "all_reduce (copies done)");
  for (size_t k = 0; k < parts.size(); ++k) {
    const lower::FoldProgram fold(sources[k], parts[k].out, count, dtype, op);  // Note [Fold programs]
    launch_program(parts[k].in->device, parts[k].handle, &fold.program);
  }
  barrier(parts, "all_reduce (after)");
}

}  // namespace rvl::hip
