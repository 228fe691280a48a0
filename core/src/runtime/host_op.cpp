// The eager side of host operations (Note [Host operations] in runtime/host_op.hpp).
#include "runtime/host_op.hpp"

#include <mutex>

#include "ravel/error.hpp"
#include "ravel/runtime.hpp"
#include "runtime/capture.hpp"
#include "runtime/realize.hpp"
#include "tensor/internal.hpp"

namespace ravel::detail {

namespace {

// Single-device, contiguous (a copy kernel of the same realization where they were not).
std::vector<Tensor> flat_inputs(const HostOp& op, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> flat;
  flat.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    RAVEL_CHECK(t.defined(), ValueError, op.label(), ": an input is undefined");
    RAVEL_CHECK(t.node()->kind != NodeKind::Multi, ValueError, op.label(),
                ": the input is sharded over a mesh; collectives over ranks take single-device tensors");
    flat.push_back(view_of(t).is_contiguous() ? t : t.contiguous());
  }
  return flat;
}

// op->begin on the buffers of `flat`, every one realized, reported to the active recorder.
void begin_realized(const std::shared_ptr<HostOp>& op, const std::vector<Tensor>& flat) {
  std::vector<std::shared_ptr<DeviceBuffer>> held;
  std::vector<const DeviceBuffer*> bufs;
  held.reserve(flat.size());
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());  // Note [Threads] in graph/node.hpp
  for (const Tensor& t : flat) {
    // Realized and contiguous: its base's buffer (a contiguous view onto a longer base starts at
    // element 0; its tail is never read).
    held.push_back(resolve(t.node()).base->buffer);
    RAVEL_CHECK(held.back() != nullptr, InternalError, op->label(), ": an input has no buffer after realization");
    bufs.push_back(held.back().get());
  }
  op->hold_inputs(held);
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

}  // namespace

void begin_host_op(const std::shared_ptr<HostOp>& op, const std::vector<Tensor>& inputs) {
  const std::vector<Tensor> flat = flat_inputs(*op, inputs);
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
  begin_realized(op, flat);
}

// Note [Host operations begun as their inputs are made]
// PyTorch's DDP starts a bucket's all-reduce from an autograd hook the moment the bucket's last
// gradient is computed, so communication overlaps the rest of backward. Here backward is one
// lazy graph realized in one scheduling pass; realizing bucket by bucket would recompute the
// forward and backward intermediates the buckets share (a realization keeps only its targets).
// So the buckets' inputs are the targets of one pass, and realize_nodes reports each target as
// the kernel that makes it has run (runtime/realize.hpp); op k begins, between two kernels of
// the pass, once its inputs are all made and op k-1 has begun. Ops begin strictly in index
// order, not in the order their inputs happen to be made: every rank must start its collectives
// in the same order, and the kernel order may differ between ranks whose shards have different
// shapes (the scheduler fuses by shape), while the index order is the caller's and the same
// everywhere. An op whose inputs come late holds back the ops after it (they begin as soon as it
// has), which costs overlap, never correctness; DataParallel lists its buckets in reverse
// parameter order, the order backward makes gradients, so the first bucket is ready first.
// A begin copies its inputs (HostOp::begin), so the pass may free nothing it still needs; the
// targets are kept by the pass anyway. On a device that queues kernels, begin's read waits for
// the kernels queued so far, and the kernels after it are queued once it has read.
//
// Note [Progress between kernels]
// Open MPI advances a non-blocking collective only inside MPI calls (it has no progress thread by
// default): libnbc's MPI_Iallreduce, which carries buckets above the plugin's small-message path,
// does nothing between its start and the first test. So after every kernel of the pass the
// oldest begun operation not yet seen complete gets one non-blocking test (HostOp::progress:
// request_test; a failure is left for the wait). One test runs Open MPI's whole progress engine,
// so one per kernel advances every request; testing each operation after every kernel measured
// 4% slower on makemore's 2-rank step (0.2 ms, five buckets), stopping at the first call that
// reached MPI is what remains. replay_in_order does the same after every kernel step, so a Jit
// replay progresses them as the eager call did. Without it a bucket begun early would still move
// its bytes only in the waits after the last kernel.
//
// Each begin goes to the active recorder where it happens, so a Jit capture holds the begins
// between the kernels and replay_in_order runs them there (test_host_op.cpp checks the position
// with kernels_launched_on_this_thread, in the capture and in replays).
void begin_host_ops(const std::vector<std::shared_ptr<HostOp>>& ops, const std::vector<std::vector<Tensor>>& inputs) {
  RAVEL_CHECK(ops.size() == inputs.size(), InternalError, "begin_host_ops: ", ops.size(), " operations, ", inputs.size(),
              " input lists");
  std::vector<std::vector<Tensor>> flat(ops.size());
  std::vector<NodePtr> targets;
  std::vector<size_t> op_of;          // target -> its operation
  std::vector<size_t> missing(ops.size(), 0);  // inputs not yet made, per operation
  for (size_t k = 0; k < ops.size(); ++k) {
    flat[k] = flat_inputs(*ops[k], inputs[k]);
    for (const Tensor& t : flat[k]) targets.push_back(t.node()), op_of.push_back(k), ++missing[k];
  }
  size_t next = 0;  // the next operation to begin
  auto begin_ready = [&] {
    for (; next < ops.size() && missing[next] == 0; ++next) begin_realized(ops[next], flat[next]);
  };
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());  // Note [Threads] in graph/node.hpp
  // Note [Realized inputs skip the scheduler], as in begin_host_op: gradients realized already
  // (after Tensor::backward) need no pass; every operation begins at once.
  bool all_realized = true;
  for (const NodePtr& t : targets) {
    const NodePtr base = resolve(t).base;
    all_realized = all_realized && base->buffer && base->kind != NodeKind::Const;
  }
  if (all_realized) {
    for (size_t k = 0; k < ops.size(); ++k) begin_realized(ops[k], flat[k]);
    return;
  }
  begin_ready();  // operations without inputs
  realize_nodes(
      Runtime::get(), targets,
      [&](size_t i) {
        --missing[op_of[i]];
        begin_ready();
      },
      [&] {  // Note [Progress between kernels]: the oldest operation still in the library
        for (size_t k = 0; k < next; ++k)
          if (ops[k]->progress()) break;
      });
  RAVEL_CHECK(next == ops.size(), InternalError, "begin_host_ops: ", ops.size() - next,
              " operation(s) not begun after the realization of their inputs (please report it)");
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
