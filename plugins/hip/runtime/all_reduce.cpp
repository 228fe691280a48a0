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
//   4. device k runs one generated kernel, the fold of the n parts in the ABI's order
//      ((p0 op p1) op p2 ...: the same program on every device, so every output holds the same
//      bytes), halves rounded after every step by an explicit CAST as two stored ADDs would be;
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

#include <memory>
#include <set>
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

std::vector<Part> validate(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                           rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op) {
  const int32_t devices = static_cast<int32_t>(hip::devices().size());
  if (n < 1 || n > devices)
    invalid("all_reduce: n = " + std::to_string(n) + "; expected 1 to " + std::to_string(devices) +
            " (one buffer per device of this plugin)");
  if (inputs == nullptr || outputs == nullptr) invalid("all_reduce: the inputs or outputs array is NULL");
  if (op < RVL_ALL_REDUCE_SUM || op > RVL_ALL_REDUCE_MIN)
    invalid("all_reduce: op " + std::to_string(op) + " is not an rvl_all_reduce_op (SUM 1, MAX 2, PROD 3, MIN 4)");
  if (dtype < 0 || dtype >= RVL_DTYPE_COUNT_) invalid("all_reduce: dtype " + std::to_string(dtype) + " is not an rvl_dtype");
  const uint64_t size = rvl::dtype_size(dtype);
  if (count > UINT64_MAX / size / 2) invalid("all_reduce: count " + std::to_string(count) + " overflows");
  const uint64_t bytes = count * size;
  std::vector<Part> parts;
  std::set<int32_t> seen;
  std::set<const rvl_buffer*> written;
  for (int32_t k = 0; k < n; ++k) {
    const std::string which = std::to_string(k);
    rvl_buffer* in = live_buffer(inputs[k], ("all_reduce input " + which).c_str());
    rvl_buffer* out = live_buffer(outputs[k], ("all_reduce output " + which).c_str());
    if (out->device != in->device)
      invalid("all_reduce: output " + which + " lives on hip:" + std::to_string(out->device) + ", input " + which +
              " on hip:" + std::to_string(in->device) + "; expected both on one device");
    if (!seen.insert(in->device).second)
      invalid("all_reduce: device hip:" + std::to_string(in->device) + " appears twice (input " + which +
              "); expected n distinct devices");
    if (in->size < bytes || out->size < bytes)
      invalid("all_reduce: " + std::to_string(count) + " elements of " + std::to_string(size) + " bytes need " +
              std::to_string(bytes) + " bytes; input " + which + " has " + std::to_string(in->size) + ", output " +
              which + " " + std::to_string(out->size));
    if (!written.insert(out).second) invalid("all_reduce: output " + which + " is also another output");
    rvl_stream* s = streams ? live_stream(streams[k], ("all_reduce stream " + which).c_str()) : nullptr;
    parts.push_back({in, out, s, stream_on(s, in->device, ("all_reduce stream " + which).c_str())});
  }
  for (int32_t k = 0; k < n; ++k)
    for (int32_t j = 0; j < n; ++j)
      if (j != k && parts[static_cast<size_t>(j)].out == parts[static_cast<size_t>(k)].in)
        invalid("all_reduce: output " + std::to_string(j) + " is input " + std::to_string(k) +
                " (only outputs[k] == inputs[k] may alias)");
  return parts;
}

// Every stream waits for the work queued so far on every other one.
void barrier(const std::vector<Part>& parts, const char* what) {
  for (const Part& waiter : parts)
    for (const Part& p : parts)
      if (&p != &waiter) order_streams(p.in->device, p.stream, waiter.in->device, waiter.stream, what);
}

rvl_instruction instruction(rvl_op op, int32_t dtype, int32_t a = -1, int32_t b = -1, int32_t c = -1) {
  rvl_instruction in{};
  in.op = op;
  in.dtype = dtype;
  in.src[0] = a, in.src[1] = b, in.src[2] = c;
  return in;
}

// The fold of n LOADs in order (Note [HIP all-reduce]): MIN is -max(-a, -b) for floats (MAX
// propagates NaN) and a compare for the others, as the reference's fold; halves are rounded
// after every step.
std::vector<rvl_instruction> fold_code(int32_t n, int32_t dt, int32_t op) {
  std::vector<rvl_instruction> code;
  for (int32_t k = 0; k < n; ++k) {
    code.push_back(instruction(RVL_OP_LOAD, dt));
    code.back().arg = k;
  }
  const bool fp = rvl::dtype_is_float(dt);
  int32_t acc = 0;
  auto push = [&](rvl_instruction in) {
    code.push_back(in);
    return static_cast<int32_t>(code.size() - 1);
  };
  for (int32_t k = 1; k < n; ++k) {
    switch (op) {
      case RVL_ALL_REDUCE_SUM: acc = push(instruction(RVL_OP_ADD, dt, acc, k)); break;
      case RVL_ALL_REDUCE_PROD: acc = push(instruction(RVL_OP_MUL, dt, acc, k)); break;
      case RVL_ALL_REDUCE_MAX: acc = push(instruction(RVL_OP_MAX, dt, acc, k)); break;
      default:
        if (fp) {
          const int32_t na = push(instruction(RVL_OP_NEG, dt, acc)), nb = push(instruction(RVL_OP_NEG, dt, k));
          acc = push(instruction(RVL_OP_NEG, dt, push(instruction(RVL_OP_MAX, dt, na, nb))));
        } else {
          const int32_t less = push(instruction(RVL_OP_CMPLT, RVL_DTYPE_BOOL, k, acc));
          acc = push(instruction(RVL_OP_WHERE, dt, less, k, acc));
        }
    }
    if (rvl::dtype_is_half(dt)) acc = push(instruction(RVL_OP_CAST, dt, acc));
  }
  return code;
}

rvl_operand contiguous(rvl_buffer* b, int32_t dtype, uint64_t count) {
  rvl_operand o{};
  o.struct_size = sizeof o;
  o.buffer = b;
  o.dtype = dtype;
  o.view.struct_size = sizeof o.view;
  o.view.strides[0] = 1;
  o.view.valid_hi[0] = static_cast<int64_t>(count);
  return o;
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
  const std::vector<Part> parts = validate(n, streams, inputs, outputs, count, dtype, op);
  if (count == 0) return;
  const uint64_t bytes = count * rvl::dtype_size(dtype);
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
  const std::vector<rvl_instruction> code = fold_code(n, dtype, op);
  for (size_t k = 0; k < parts.size(); ++k) {
    std::vector<rvl_operand> ins;
    for (rvl_buffer* b : sources[k]) ins.push_back(contiguous(b, dtype, count));
    rvl_program p{};
    p.struct_size = sizeof p;
    p.rank = 1;
    p.shape[0] = static_cast<int64_t>(count);
    p.n_inputs = static_cast<int32_t>(ins.size());
    p.inputs = ins.data();
    p.n_instructions = static_cast<int32_t>(code.size());
    p.instructions = code.data();
    p.reduce_op = RVL_REDUCE_NONE;
    p.output = contiguous(parts[k].out, dtype, count);
    launch_program(parts[k].in->device, parts[k].handle, &p);
  }
  barrier(parts, "all_reduce (after)");
}

}  // namespace rvl::hip
