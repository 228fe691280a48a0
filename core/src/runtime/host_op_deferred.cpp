// Host operations whose end waits for the first reader of their results.
//
// Note [Results ended at their first reader]
// DDP's buckets begin while backward runs (Note [Host operations begun as their inputs are made]
// in host_op.cpp), but if every bucket's wait came right after the last backward kernel, the
// optimizer's update of the last layer (the first bucket, sent first and so done first) could not
// start while the first layer's bucket is still in flight. end_host_op_at_first_read allocates a
// bucket's result buffers at once and hands them out as realized leaves, and marks each buffer
// *pending*: the end (the wait, the copy into the buffers) runs when something first reaches the
// buffer's contents. Every such way goes through DeviceBuffer::handle, read or write (a kernel
// binding its operands in launch_kernel, a read-back, a host operation's begin, a DLPack export),
// so the wait lands right before the first kernel that reads the result, between the update
// kernels of buckets that are done, and no path can see the bytes before they are written.
// Why buffers and not lazy graph nodes: the scheduler and the kernel cache never see a pending
// result (it is an ordinary realized leaf), so nothing of scheduling, fusion or the Jit's slots
// changes; the end is one more host step, reported to the recorder active where it happens, so
// a Jit capture records it before the kernel that reads the result and every replay waits there.
//   - A failed end (a timeout, a lost peer) is thrown where the access happened (inside a later
//     realization, from the kernel launch that needed it); the buffers stay marked, so every
//     later access rethrows that error instead of reading bytes that were never written.
//   - Ends run in whatever order the readers come; on MPI that is safe (every rank began the same
//     operations in the same order, and a non-blocking request may be completed in any order).
//   - Nothing may stay pending across a Jit boundary: a capture would record an end whose begin
//     it never saw (or miss one), so Jit::operator() ends every pending operation first, and a
//     capture ends the ones its function left pending (returned unread) before it closes.
//     distributed::finalize ends them too, so no request is left in the library at exit.
//   - Note [Realize starts, the reader waits]: Tensor::realize of a pending result is not a read
//     (nothing reaches the bytes), so it does not end the operation: the wait stays at the first
//     reader, where the overlap wants it. It *starts* it (HostOp::start): an operation whose
//     begin was itself deferred (a global view's buckets, Note [Entered gradient buckets]) begins
//     there, so a program that realizes its gradients and then does other work (or waits for
//     other ranks outside Ravel) has its all-reduces in flight meanwhile, instead of begun only
//     at the first read or the next collective. Realizing is then one more point where the
//     program begins collectives, as reads are: every rank must reach it in the same order.
//   - While operations are pending, every kernel of a realization gives the oldest one a
//     progress call (Note [Progress between kernels] in host_op.cpp): libnbc moves a large
//     bucket's all-reduce only inside MPI calls.
// The registry holds every pending end (and each end its buffers, a cycle the end breaks), so
// results dropped unread are still waited for, by the next Jit call or at finalize.
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

#include "ravel/error.hpp"
#include "ravel/runtime.hpp"
#include "runtime/capture.hpp"
#include "runtime/host_op.hpp"
#include "tensor/internal.hpp"

namespace ravel::detail {

struct DeferredEnd {
  std::shared_ptr<HostOp> op;
  std::vector<std::shared_ptr<DeviceBuffer>> outputs;  // until the end ran
  std::vector<Device> devices;
  std::exception_ptr error;  // the end failed: every later access rethrows it
  bool ended = false;
};

namespace {

// Pending ends in the order they were deferred; guarded by buffer_mutex. The count is read
// without the lock by the per-kernel progress check.
std::vector<std::shared_ptr<DeferredEnd>>& pending() {
  static auto* list = new std::vector<std::shared_ptr<DeferredEnd>>();  // never freed: used at exit
  return *list;
}
std::atomic<size_t> g_pending{0};

void unlist(const DeferredEnd* d) {
  auto& list = pending();
  auto it = std::find_if(list.begin(), list.end(), [&](const auto& p) { return p.get() == d; });
  if (it != list.end()) list.erase(it), g_pending.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace

void end_deferred(std::shared_ptr<DeferredEnd> d) {
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
  if (d->error) std::rethrow_exception(d->error);
  if (d->ended) return;
  d->ended = true;
  unlist(d.get());
  std::vector<std::shared_ptr<DeviceBuffer>> held = std::move(d->outputs);
  std::vector<DeviceBuffer*> bufs;
  for (const auto& b : held) b->set_pending(nullptr), bufs.push_back(b.get());  // the end writes them
  try {
    d->op->end(bufs);
  } catch (...) {
    d->error = std::current_exception();  // the op has given up itself (HostOp::end)
    for (const auto& b : held) b->set_pending(d);
    throw;
  }
  if (KernelRecorder* rec = active_recorder()) rec->host_op_ended(d->op, held, d->devices);
}

void start_deferred(const std::shared_ptr<DeferredEnd>& d) {
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
  if (d->error) std::rethrow_exception(d->error);
  if (d->ended) return;
  try {
    d->op->start();
  } catch (...) {
    // Could not start (the argument check failed, a peer is lost): the operation has given up, as
    // after a failed end. Listed no more (a later Jit call or finalize must not end it again and
    // throw this error there), and every later access rethrows it.
    d->error = std::current_exception();
    d->ended = true;
    unlist(d.get());
    const std::vector<std::shared_ptr<DeviceBuffer>> held = std::move(d->outputs);  // the buffers keep d
    throw;
  }
}

std::vector<Tensor> end_host_op_at_first_read(const std::shared_ptr<HostOp>& op, const std::vector<HostOutput>& outputs) {
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
  std::vector<std::shared_ptr<DeviceBuffer>> held;
  try {
    held = op->take_outputs();
  } catch (...) {
    op->cancel();
    throw;
  }
  if (outputs.empty()) return end_host_op(op, outputs);  // nothing to defer
  auto d = std::make_shared<DeferredEnd>();
  try {
    // Buffers the operation made in begin (HostOp::take_outputs) are pending the same way.
    RAVEL_CHECK(held.empty() || held.size() == outputs.size(), InternalError, op->label(), ": made ", held.size(),
                " outputs, expected ", outputs.size());
    const bool made = !held.empty();
    for (const HostOutput& o : outputs) {
      d->devices.push_back(o.device);
      if (made) continue;
      int64_t n = 1;
      for (int64_t s : o.shape) n *= s;
      held.push_back(std::make_shared<DeviceBuffer>(Runtime::get().plugin_for(o.device), o.device.index(),
                                                    static_cast<uint64_t>(n) * dtype_size(o.dtype)));
    }
    pending().push_back(d);
  } catch (...) {
    op->cancel();  // could not even allocate: the operation must not stay in flight
    throw;
  }
  g_pending.fetch_add(1, std::memory_order_relaxed);
  d->op = op;
  d->outputs = held;
  for (const auto& b : held) b->set_pending(d);
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    out.emplace_back(make_buffer_node(outputs[i].dtype, outputs[i].shape, outputs[i].device, held[i]));
  return out;
}

void end_deferred_host_ops() {
  if (g_pending.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
  std::exception_ptr first;
  while (!pending().empty()) {
    std::shared_ptr<DeferredEnd> d = pending().front();
    try {
      end_deferred(d);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
    unlist(d.get());  // listed no more, ended or failed
  }
  if (first) std::rethrow_exception(first);
}

bool deferred_host_ops_pending() noexcept { return g_pending.load(std::memory_order_relaxed) != 0; }

void progress_deferred_host_ops() noexcept {
  if (g_pending.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
  for (const auto& d : pending())
    if (d->op->progress()) break;  // one call into the library advances all its requests
}

}  // namespace ravel::detail
