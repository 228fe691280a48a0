// Collectives on tensors: realize, check the ranks' arguments (Note [Argument headers]), stage
// through host memory (the MPI plugin reads host memory only; collectives.h's device_kinds lets a
// device-aware plugin skip this later), communicate with the deadline, write the result to the
// tensor's device; as host operations a Jit captures (collective_op.hpp), each result carrying
// its adjoint collective as its derivative (collective_vjp.cpp). A world of one returns its input
// (Note [World of one]).
#include "distributed/collective_op.hpp"
#include "distributed/collective_vjp.hpp"
#include "distributed/entered_buckets.hpp"
#include "distributed/world.hpp"
#include "ravel/error.hpp"

namespace ravel::distributed {

using namespace ravel::detail;

namespace {

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

void check_defined(const Tensor& t, const char* what) {
  RAVEL_CHECK(t.defined(), ValueError, "distributed::", what, ": the tensor is undefined");
}


// Note [Collectives are host operations]: each call is one CollectiveOp begun and ended at once,
// through the eager path that reports both phases to an active Jit recorder, so a Jit that
// captures a function calling all_reduce replays the all-reduce with each call's new values.
// The operation is an idle one of the same collective and arguments where one exists (Note
// [Cached collective operations] in collective_op.cpp); `make` describes a new one.
// The argument lists of begin_host_op and end_host_op, kept from call to call on this thread (two
// vectors and a shape fewer to allocate per call; Note [Cached collective operations]). Taken out
// while in use, so a nested call (none is expected) would make its own.
struct HostOpLists {
  std::vector<Tensor> inputs;
  std::vector<HostOutput> outputs;
};
thread_local HostOpLists t_lists;

// The result, and whether it is a fresh node only this call holds (the in-place path's), which
// then carries its derivative itself (Note [A derivative on the result's own node]).
struct Ran {
  Tensor y;
  bool fresh = false;
};

template <class Make>
Ran run_collective(const Tensor& t, const CollectiveKey& key, Make&& make) {
  distributed::detail::begin_entered_buckets();  // Note [Entered gradient buckets]: the same order on every rank
  auto op = cached_collective_op(key, std::forward<Make>(make));
  if (Tensor y = run_collective_now(op, t); y.defined()) return {std::move(y), true};  // the common case, in place
  HostOpLists lists = std::move(t_lists);
  lists.inputs.assign(1, t);
  if (lists.outputs.size() != 1) lists.outputs.assign(1, HostOutput{key.dtype, key.out_shape, key.device});
  HostOutput& o = lists.outputs[0];
  o.dtype = key.dtype, o.shape = key.out_shape, o.device = key.device;  // the shape's capacity is kept
  auto put_back = [&] {
    lists.inputs.clear();  // no reference to the input kept
    t_lists = std::move(lists);
  };
  try {
    begin_host_op(op, lists.inputs);
    Tensor y = std::move(end_host_op(op, lists.outputs)[0]);
    put_back();
    return {std::move(y), false};
  } catch (...) {
    put_back();
    throw;
  }
}

CollectiveCall call_of(Kind kind, const Tensor& t, std::string what) {
  CollectiveCall c;
  c.kind = kind;
  c.dtype = t.dtype();
  c.in_shape = c.out_shape = t.shape();
  c.device = t.device();
  RAVEL_CHECK(c.in_shape.size() <= 8, ShapeError, "distributed::", what, ": tensors of rank ", c.in_shape.size(),
              " (at most 8)");
  c.what = std::move(what);
  return c;
}

}  // namespace

Tensor all_reduce(const Tensor& t, ReduceOp op) {
  check_defined(t, "all_reduce");
  Communicator* comm = world_communicator();
  if (!comm) return t;
  const Device device = t.device();
  const CollectiveKey key{kAllReduce, abi_op(op), -1, t.dtype(), t.shape(), t.shape(), device};
  Ran r = run_collective(t, key, [&] {
    CollectiveCall c = call_of(kAllReduce, t, std::string("all_reduce (") + op_name(op) + ")");
    c.op = abi_op(op);
    return c;
  });
  return distributed::detail::with_all_reduce_vjp(std::move(r.y), t, op, r.fresh);
}

Tensor all_gather(const Tensor& t) {
  check_defined(t, "all_gather");
  Communicator* comm = world_communicator();
  Shape out_shape = t.shape();
  if (out_shape.empty()) out_shape = {1};
  if (!comm) return t.reshape(out_shape);
  out_shape[0] *= comm->size();
  const Device device = t.device();
  const CollectiveKey key{kAllGather, RVL_COLL_SUM, -1, t.dtype(), t.shape(), out_shape, device};
  Ran r = run_collective(t, key, [&] {
    CollectiveCall c = call_of(kAllGather, t, "all_gather");
    c.out_shape = out_shape;
    return c;
  });
  return distributed::detail::with_all_gather_vjp(std::move(r.y), t, r.fresh);
}

Tensor reduce_scatter(const Tensor& t, ReduceOp op) {
  check_defined(t, "reduce_scatter");
  Communicator* comm = world_communicator();
  const int size = comm ? comm->size() : 1;
  RAVEL_CHECK(!t.shape().empty() && t.shape()[0] % size == 0, ShapeError, "distributed::reduce_scatter: axis 0 of ",
              "a tensor of shape ", t.shape().empty() ? std::string("[]") : std::to_string(t.shape()[0]) + " x ...",
              " is not divisible by the world size ", size);
  if (!comm) return t;
  Shape out_shape = t.shape();
  out_shape[0] /= size;
  const Device device = t.device();
  const CollectiveKey key{kReduceScatter, abi_op(op), -1, t.dtype(), t.shape(), out_shape, device};
  Ran r = run_collective(t, key, [&] {
    CollectiveCall c = call_of(kReduceScatter, t, std::string("reduce_scatter (") + op_name(op) + ")");
    c.op = abi_op(op);
    c.out_shape = out_shape;
    return c;
  });
  return distributed::detail::with_reduce_scatter_vjp(std::move(r.y), t, op, r.fresh);
}

Tensor broadcast(const Tensor& t, int root) {
  check_defined(t, "broadcast");
  Communicator* comm = world_communicator();
  const int size = comm ? comm->size() : 1;
  RAVEL_CHECK(root >= 0 && root < size, ValueError, "distributed::broadcast: root ", root, " is not a rank of [0, ",
              size, ")");
  if (!comm) return t;
  const Device device = t.device();
  const CollectiveKey key{kBroadcast, RVL_COLL_SUM, root, t.dtype(), t.shape(), t.shape(), device};
  Ran r = run_collective(t, key, [&] {
    CollectiveCall c = call_of(kBroadcast, t, "broadcast from rank " + std::to_string(root));
    c.root = root;
    return c;
  });
  return distributed::detail::with_broadcast_vjp(std::move(r.y), t, root, r.fresh);
}

void barrier() {
  Communicator* comm = world_communicator();
  if (!comm) return;
  distributed::detail::begin_entered_buckets();
  comm->run([&](rvl_coll_request** r) { return comm->plugin().api().barrier(comm->handle(), r); }, "barrier", nullptr);
}

}  // namespace ravel::distributed
