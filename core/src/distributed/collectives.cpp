// Collectives on tensors: realize, stage through host memory (the MPI plugin reads host memory
// only; collectives.h's device_kinds lets a device-aware plugin skip this later), check the
// ranks' arguments (Note [Argument headers]), communicate with the deadline, upload the result
// to the tensor's device. A world of one returns its input (Note [World of one]).
#include "distributed/staging.hpp"
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

}  // namespace

Tensor all_reduce(const Tensor& t, ReduceOp op) {
  check_defined(t, "all_reduce");
  Communicator* comm = world_communicator();
  if (!comm) return t;
  const std::string what = std::string("all_reduce (") + op_name(op) + ")";
  if (world_options().check_arguments) check_headers(*comm, header_of(kAllReduce, t, static_cast<int>(abi_op(op))), what);
  // Out of place: Open MPI 4.1's MPI_IN_PLACE all-reduce of 64 MiB took 1.7 s where the same
  // bytes out of place took 0.16 s (2 ranks, bench/distributed).
  auto send = comm->staging(0, 0);  // Note [Reused staging buffers]
  copy_to_host(t, *send);
  auto recv = comm->staging(1, send->size());
  const uint64_t n = static_cast<uint64_t>(t.numel());
  comm->run([&](rvl_coll_request** r) {
    return comm->plugin().api().all_reduce(comm->handle(), send->data(), recv->data(), n, abi_dtype(t.dtype()), abi_op(op), r);
  }, what, std::make_shared<std::pair<decltype(send), decltype(recv)>>(send, recv));
  return from_host(recv->data(), t.dtype(), t.shape(), t.device());
}

Tensor all_gather(const Tensor& t) {
  check_defined(t, "all_gather");
  Communicator* comm = world_communicator();
  Shape out_shape = t.shape();
  if (out_shape.empty()) out_shape = {1};
  if (!comm) return t.reshape(out_shape);
  if (world_options().check_arguments) check_headers(*comm, header_of(kAllGather, t), "all_gather");
  auto send = comm->staging(0, 0);
  copy_to_host(t, *send);
  auto recv = comm->staging(1, send->size() * static_cast<size_t>(comm->size()));
  const uint64_t n = static_cast<uint64_t>(t.numel());
  comm->run([&](rvl_coll_request** r) {
    return comm->plugin().api().all_gather(comm->handle(), send->data(), recv->data(), n, abi_dtype(t.dtype()), r);
  }, "all_gather", std::make_shared<std::pair<decltype(send), decltype(recv)>>(send, recv));
  out_shape[0] *= comm->size();
  return from_host(recv->data(), t.dtype(), out_shape, t.device());
}

Tensor reduce_scatter(const Tensor& t, ReduceOp op) {
  check_defined(t, "reduce_scatter");
  Communicator* comm = world_communicator();
  const int size = comm ? comm->size() : 1;
  RAVEL_CHECK(!t.shape().empty() && t.shape()[0] % size == 0, ShapeError, "distributed::reduce_scatter: axis 0 of ",
              "a tensor of shape ", t.shape().empty() ? std::string("[]") : std::to_string(t.shape()[0]) + " x ...",
              " is not divisible by the world size ", size);
  if (!comm) return t;
  const std::string what = std::string("reduce_scatter (") + op_name(op) + ")";
  if (world_options().check_arguments) check_headers(*comm, header_of(kReduceScatter, t, static_cast<int>(abi_op(op))), what);
  auto send = comm->staging(0, 0);
  copy_to_host(t, *send);
  Shape out_shape = t.shape();
  out_shape[0] /= size;
  const uint64_t n = static_cast<uint64_t>(t.numel() / size);
  auto recv = comm->staging(1, send->size() / static_cast<size_t>(size));
  comm->run([&](rvl_coll_request** r) {
    return comm->plugin().api().reduce_scatter(comm->handle(), send->data(), recv->data(), n, abi_dtype(t.dtype()),
                                               abi_op(op), r);
  }, what, std::make_shared<std::pair<decltype(send), decltype(recv)>>(send, recv));
  return from_host(recv->data(), t.dtype(), out_shape, t.device());
}

Tensor broadcast(const Tensor& t, int root) {
  check_defined(t, "broadcast");
  Communicator* comm = world_communicator();
  const int size = comm ? comm->size() : 1;
  RAVEL_CHECK(root >= 0 && root < size, ValueError, "distributed::broadcast: root ", root, " is not a rank of [0, ",
              size, ")");
  if (!comm) return t;
  const std::string what = "broadcast from rank " + std::to_string(root);
  if (world_options().check_arguments) check_headers(*comm, header_of(kBroadcast, t, -1, root), what);
  // Only the root's values are read: the other ranks receive into an unwritten buffer.
  auto buf = comm->staging(0, static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  if (comm->rank() == root) copy_to_host(t, *buf);
  const uint64_t n = static_cast<uint64_t>(t.numel());
  comm->run([&](rvl_coll_request** r) {
    return comm->plugin().api().broadcast(comm->handle(), buf->data(), n, abi_dtype(t.dtype()), root, r);
  }, what, buf);
  return from_host(buf->data(), t.dtype(), t.shape(), t.device());
}

void barrier() {
  Communicator* comm = world_communicator();
  if (!comm) return;
  comm->run([&](rvl_coll_request** r) { return comm->plugin().api().barrier(comm->handle(), r); }, "barrier", nullptr);
}

}  // namespace ravel::distributed
