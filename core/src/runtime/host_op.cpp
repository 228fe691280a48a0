// The eager side of host operations (Note [Host operations] in runtime/host_op.hpp).
#include "runtime/host_op.hpp"

#include <mutex>

#include "ravel/error.hpp"
#include "ravel/runtime.hpp"
#include "runtime/capture.hpp"
#include "tensor/internal.hpp"

namespace ravel::detail {

void begin_host_op(const std::shared_ptr<HostOp>& op, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> flat;
  flat.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    RAVEL_CHECK(t.defined(), ValueError, op->label(), ": an input is undefined");
    RAVEL_CHECK(t.node()->kind != NodeKind::Multi, ValueError, op->label(),
                ": the input is sharded over a mesh; collectives over ranks take single-device tensors");
    flat.push_back(view_of(t).is_contiguous() ? t : t.contiguous());
  }
  // Note [Realized inputs skip the scheduler]: an input that already has its buffer (the usual
  // all-reduce of a realized gradient or parameter) needs no realization, and an empty
  // scheduling pass (topo order, hash sets, the realization counters) was about a third of a 4 KiB
  // all-reduce's fixed cost in the core on one rank (perf, docs/distributed.md "The tensor path's
  // fixed cost"). Constants are still realized through the engine (realize_const).
  bool all_realized = true;
  {
    std::lock_guard<std::recursive_mutex> lock(buffer_mutex());  // Note [Threads] in graph/node.hpp
    for (const Tensor& t : flat) {
      const NodePtr base = resolve(t.node()).base;
      if (!base->buffer || base->kind == NodeKind::Const) {
        all_realized = false;
        break;
      }
    }
  }
  if (!all_realized) ravel::realize(flat);  // one scheduling pass for all of them (a backward graph is shared)
  std::vector<std::shared_ptr<DeviceBuffer>> held;
  std::vector<const DeviceBuffer*> bufs;
  held.reserve(flat.size());
  for (const Tensor& t : flat) {
    // Realized and contiguous: its base's buffer (a contiguous view onto a longer base starts at
    // element 0; its tail is never read).
    held.push_back(resolve(t.node()).base->buffer);
    RAVEL_CHECK(held.back() != nullptr, InternalError, op->label(), ": an input has no buffer after realization");
    bufs.push_back(held.back().get());
  }
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());  // Note [Threads] in graph/node.hpp
  op->begin(bufs);
  if (KernelRecorder* rec = active_recorder()) {
    try {
      rec->host_op_begun(op, held);
    } catch (...) {
      op->cancel();
      throw;
    }
  }
}

std::vector<Tensor> end_host_op(const std::shared_ptr<HostOp>& op, const std::vector<HostOutput>& outputs) {
  std::vector<std::shared_ptr<DeviceBuffer>> held;
  std::vector<DeviceBuffer*> bufs;
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
  try {
    held = op->take_outputs();  // an operation that wrote its outputs in begin (HostOp::take_outputs)
    RAVEL_CHECK(held.empty() || held.size() == outputs.size(), InternalError, op->label(), ": wrote ", held.size(),
                " outputs, expected ", outputs.size());
    for (size_t i = 0; held.size() < outputs.size(); ++i) {
      const HostOutput& o = outputs[i];
      int64_t n = 1;
      for (int64_t d : o.shape) n *= d;
      held.push_back(std::make_shared<DeviceBuffer>(Runtime::get().plugin_for(o.device), o.device.index(),
                                                    static_cast<uint64_t>(n) * dtype_size(o.dtype)));
    }
    for (const auto& b : held) bufs.push_back(b.get());
  } catch (...) {
    op->cancel();  // could not even allocate: the operation must not stay in flight
    throw;
  }
  op->end(bufs);
  if (KernelRecorder* rec = active_recorder()) {
    std::vector<Device> devices;
    for (const HostOutput& o : outputs) devices.push_back(o.device);
    rec->host_op_ended(op, held, devices);
  }
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    out.emplace_back(make_buffer_node(outputs[i].dtype, outputs[i].shape, outputs[i].device, held[i]));
  return out;
}

}  // namespace ravel::detail
