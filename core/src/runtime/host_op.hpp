// Host operations: work a realization cannot express as a kernel (a collective over other
// processes: core/src/distributed) that still belongs in a Jit capture.
//
// Note [Host operations]
// A collective reads realized tensors, talks to other ranks and produces new tensors. It is not
// a kernel (no plugin runs it), so before host operations a Jit captured the kernels on either
// side of one and saw its result as data uploaded inside the function: a constant of the
// capture, stale at every replay. A HostOp is the collective as an object the Jit can keep and
// run again: two phases, so that a non-blocking collective started by `begin` overlaps whatever
// runs before its `end` (later buckets, later kernels), in the eager call as in a replay.
//   begin(inputs)  reads the realized input buffers (it must copy what it needs: a replay frees
//                  an input after its last reader, and `begin` is that reader) and starts;
//   end(outputs)   finishes and writes every output buffer (fresh, of the recorded sizes);
//   cancel()       gives up on a begun operation after a failure elsewhere; never throws.
// The eager path (begin_host_op / end_host_op) reports both phases to the thread's active
// KernelRecorder (runtime/capture.hpp); the Jit records them as steps between the kernels,
// binds their buffers to slots like a kernel's operands and result, and replays them in the
// recorded order (runtime/jit.cpp). An operation is one object per call site of a capture, reused
// by every replay: it may keep state between calls (reused staging buffers), and begin/end of
// one object never nest (a Jit is not re-entrant).
// Not lazy graph nodes: the scheduler never sees a host operation, so its inputs are realized
// (in one pass) when it begins, and it is never fused or reordered. begin_host_ops begins
// several as their inputs are made within one realization (Note [Host operations begun as their
// inputs are made] in host_op.cpp). docs/distributed.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ravel/tensor.hpp"
#include "runtime/device_buffer.hpp"

namespace ravel::detail {

class HostOp {
 public:
  virtual ~HostOp() = default;
  virtual std::string label() const = 0;
  virtual void begin(const std::vector<const DeviceBuffer*>& inputs) = 0;
  // Called right before every `begin` with the same buffers, owned. An operation that reads an
  // input after `begin` returns (a collective sending straight from a host-memory buffer, Note
  // [Host memory without staging] in distributed/collective_op.cpp) keeps them until it ended or
  // gave up; the default keeps nothing (begin copies what it needs).
  virtual void hold_inputs(const std::vector<std::shared_ptr<DeviceBuffer>>&) {}
  virtual void end(const std::vector<DeviceBuffer*>& outputs) = 0;
  virtual void cancel() noexcept = 0;
  // Called between kernels while the operation is begun and not ended (Note [Progress between
  // kernels] in host_op.cpp): a chance to advance it without blocking (MPI moves a non-blocking
  // collective only inside its calls). Returns whether it called into its library (false: it
  // knows it has completed, or has nothing to poll); one such call advances every request of
  // the library, so callers poll one operation per kernel. Must not throw; a failure is for
  // `end` to report.
  virtual bool progress() noexcept { return false; }
  // Called when a pending output of this operation (end_host_op_at_first_read) is realized but
  // not read (Tensor::realize, ravel::realize): a chance to start, without waiting, what its end
  // would otherwise start at the first reader (Note [Realize starts, the reader waits] in
  // runtime/host_op_deferred.cpp). The default does nothing (an operation begun already).
  virtual void start() {}
  // An operation that wrote its outputs already in `begin` (a collective a plugin runs on its own
  // devices, Note [Plugin all-reduce] in runtime/plugin_collective.hpp: it must read its inputs
  // while they are alive, and writes fresh buffers of its own) hands them over here, once, in
  // output order; `end` then receives them. Empty (the default): the caller allocates fresh
  // outputs for `end` to write.
  virtual std::vector<std::shared_ptr<DeviceBuffer>> take_outputs() { return {}; }
  // Whether a Jit replay with a host thread per device may run it in its first lane (Note [Host
  // steps in lanes] in runtime/jit_replay.cpp): true only for work ordered by the devices'
  // own streams (a plugin's collective); false (the default) keeps a replay with it in order.
  virtual bool runs_in_a_lane() const { return false; }
};

// What an output of a host operation is: its dtype, shape and device.
struct HostOutput {
  DType dtype;
  Shape shape;
  Device device;
};

// Realizes `inputs` (one scheduling pass, contiguous), runs op->begin on their buffers and
// reports it to the active recorder. Every input must be on a single device (not sharded).
void begin_host_op(const std::shared_ptr<HostOp>& op, const std::vector<Tensor>& inputs);
// Begins ops[0], ops[1], ... in that order, each with its `inputs[k]`, all inputs realized in one
// scheduling pass: op k begins right after the kernel that made the last of its inputs (and after
// op k-1 began), between the kernels of that pass, as a DDP bucket's all-reduce starts while the
// rest of backward runs. Each begin is reported to the active recorder where it happens, so a
// Jit replays the same interleaving. On an error, some of the ops may have begun: the caller
// cancels them all (cancel of one never begun does nothing).
void begin_host_ops(const std::vector<std::shared_ptr<HostOp>>& ops, const std::vector<std::vector<Tensor>>& inputs);
// Allocates the outputs, runs op->end on them and reports it; returns them as realized leaves.
// If end throws, the operation is over (the op has given up itself) and nothing is reported.
std::vector<Tensor> end_host_op(const std::shared_ptr<HostOp>& op, const std::vector<HostOutput>& outputs);

// Note [Results ended at their first reader] (runtime/host_op_deferred.cpp): allocates the
// outputs now and returns them as realized leaves, but runs op->end (the wait) only when
// something first touches one of their buffers: the first kernel that reads one, a read-back, a
// host operation's begin, a Jit call or capture's end, or end_deferred_host_ops. The end is
// reported to the recorder active where it happens. An error of the end is thrown there (and
// again on every later access to those outputs, never their unwritten bytes).
std::vector<Tensor> end_host_op_at_first_read(const std::shared_ptr<HostOp>& op, const std::vector<HostOutput>& outputs);
// Ends every deferred operation still pending, in the order they were deferred (the first error
// is thrown after all were tried).
void end_deferred_host_ops();
// Gives one deferred, still pending operation a non-blocking progress call (Note [Progress
// between kernels] in host_op.cpp); does nothing, cheaply, when none is pending.
void progress_deferred_host_ops() noexcept;
bool deferred_host_ops_pending() noexcept;

}  // namespace ravel::detail
