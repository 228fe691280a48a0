// Note [Argument headers]
// MPI cannot tell that two ranks called a collective with different arguments: an all-reduce of
// 12 floats against one of 12 doubles completes with garbage, one of 12 against 16 elements may
// hang or overrun. So every tensor collective first all-gathers a fixed-size header per rank
// (which collective, op, root, dtype, shape; for DataParallel the number of tensors, their total
// bytes and a hash of their dtypes and shapes) and compares every rank's with rank 0's. All
// ranks see the same headers, so all throw the same typed error naming both ranks' arguments;
// the data operation never starts. The cost is one small all-gather per call (per
// reduce_gradients call, not per bucket); Options::check_arguments = false skips it.
#include "distributed/staging.hpp"

#include <cstring>
#include <utility>

#include "ravel/error.hpp"

namespace ravel::detail {

namespace {

std::string shape_text(const ArgHeader& h) {
  std::string s = "[";
  for (int i = 0; i < h.ndim && i < 8; ++i) s += (i ? ", " : "") + std::to_string(h.dims[i]);
  return s + "]";
}

std::string describe(const ArgHeader& h) {
  static const char* kKinds[] = {"?", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce_gradients"};
  static const char* kOps[] = {"sum", "prod", "max", "min"};
  std::string s = kKinds[h.kind >= 1 && h.kind <= 5 ? h.kind : 0];
  if (h.kind == kReduceGradients)
    return s + " of " + std::to_string(h.count) + " tensors, " + std::to_string(h.dims[0]) + " bytes in " +
           std::to_string(h.dims[1]) + " bucket(s)";
  s += " of ";
  s += h.dtype >= 0 && h.dtype < kDTypeCount ? dtype_name(static_cast<DType>(h.dtype)) : "?";
  s += " " + shape_text(h);
  if (h.op >= 0 && h.op < 4) s += std::string(" (") + kOps[h.op] + ")";
  if (h.root >= 0) s += " from rank " + std::to_string(h.root);
  return s;
}

}  // namespace

rvl_dtype abi_dtype(DType t) { return static_cast<rvl_dtype>(static_cast<int>(t)); }  // decision 12

rvl_coll_op abi_op(distributed::ReduceOp op) {
  switch (op) {
    case distributed::ReduceOp::Sum: return RVL_COLL_SUM;
    case distributed::ReduceOp::Prod: return RVL_COLL_PROD;
    case distributed::ReduceOp::Max: return RVL_COLL_MAX;
    case distributed::ReduceOp::Min: return RVL_COLL_MIN;
  }
  throw InternalError("distributed: unknown reduce op");
}

namespace {

// Note [Headers over point to point]
// Up to kPointToPointRanks ranks, the headers travel as point-to-point messages (every rank sends
// its header to every other and receives theirs) instead of an all-gather: Open MPI runs its
// non-blocking collectives through libnbc, whose schedule costs ~9 µs for 96 bytes on 2 ranks of
// one host, about as much as a 4 KiB all-reduce itself, where an MPI_Isend/MPI_Irecv pair costs
// ~1-2 µs (bench/distributed). The messages use a tag of the core's own: the C++ API offers no
// send/recv, so no user message can match it. Above that size the all-gather's n log n beats
// n^2 messages. Either way every rank ends with every header, so the verdict is the same on all.
constexpr int kPointToPointRanks = 8;
constexpr int32_t kHeaderTag = 32001;  // MPI guarantees tags up to 32767

// Every rank's header lands in `all` (this rank's own already at its index); `all` is the
// communicator's reused header buffer, parked with any request that times out.
void exchange_headers(Communicator& comm, const std::string& label, const std::shared_ptr<std::vector<uint8_t>>& keep,
                      ArgHeader* all) {
  const auto& api = comm.plugin().api();
  const int me = comm.rank();
  if (comm.size() > kPointToPointRanks) {
    comm.run([&](rvl_coll_request** r) {
      return api.all_gather(comm.handle(), &all[me], all, sizeof(ArgHeader), RVL_DTYPE_U8, r);
    }, label, keep);
    return;
  }
  // At most 2 * (kPointToPointRanks - 1) requests: on the stack, not in a vector.
  rvl_coll_request* pending[2 * kPointToPointRanks] = {};
  int n = 0;
  try {
    for (int r = 0; r < comm.size(); ++r) {
      if (r == me) continue;
      pending[n++] = comm.start([&](rvl_coll_request** q) {
        return api.recv(comm.handle(), &all[r], sizeof(ArgHeader), RVL_DTYPE_U8, r, kHeaderTag, q);
      }, label);
      pending[n++] = comm.start([&](rvl_coll_request** q) {
        return api.send(comm.handle(), &all[me], sizeof(ArgHeader), RVL_DTYPE_U8, r, kHeaderTag, q);
      }, label);
    }
    for (int i = 0; i < n; ++i) comm.wait(std::exchange(pending[i], nullptr), label, keep);
  } catch (...) {
    for (int i = 0; i < n; ++i)
      if (pending[i]) comm.abandon(pending[i], keep);
    throw;
  }
}

}  // namespace

void check_headers(Communicator& comm, const ArgHeader& mine, const std::string& what) {
  check_headers(comm, mine, what, what + " (argument check)");
}

// Note [Checked all-reduces in the core]
// A plugin of collectives.h 1.1 may offer all_reduce_checked: the header travels in the data's
// first message (Note [Checked all-reduces] in plugins/mpi/mpi_checked.cpp), saving the header's
// own round (~0.8-1 µs of a 4 KiB all-reduce on 2 ranks). Its first messages match only each
// other, so on such a communicator *every* argument check uses it, the other collectives' and
// DataParallel's as an all-reduce of 0 elements (the header exchange alone): a rank in all_gather
// and one in all_reduce still read each other's header and throw the same ValueError. Up to
// kPointToPointRanks ranks, like the point-to-point exchange above (the plugin's messages are point
// to point too); the decision depends only on the plugin and the world size, the same on every
// rank. The verdict is still the core's (compare_headers), on the headers the plugin delivers.
bool checks_in_plugin(const Communicator& comm) {
  const rvl_collectives_api* api = &comm.plugin().api();
  return comm.size() <= kPointToPointRanks && RAVEL_COLL_HAS(api, all_reduce_checked);
}

void check_headers(Communicator& comm, const ArgHeader& mine, const std::string& what, const std::string& label) {
  // Note [Fixed cost per call] (collective_op.cpp): the headers go to and come from one reused
  // buffer, no allocation per call.
  const auto keep = comm.header_staging(sizeof(ArgHeader) * static_cast<size_t>(comm.size()));
  ArgHeader* all = reinterpret_cast<ArgHeader*>(keep->data());  // operator new: aligned for any scalar
  all[comm.rank()] = mine;
  if (checks_in_plugin(comm)) {
    const auto& api = comm.plugin().api();
    comm.run([&](rvl_coll_request** r) {
      return api.all_reduce_checked(comm.handle(), &mine, sizeof mine, all, nullptr, nullptr, 0, RVL_DTYPE_U8,
                                    RVL_COLL_SUM, r);
    }, label, keep);
  } else {
    exchange_headers(comm, label, keep, all);
  }
  compare_headers(all, comm.size(), comm.rank(), what);
}

void compare_headers(const ArgHeader* all, int size, int rank, const std::string& what) {
  const ArgHeader& first = all[0];
  for (int r = 1; r < size; ++r) {
    const ArgHeader& h = all[r];
    if (std::memcmp(&h, &first, sizeof h) == 0) continue;
    const std::string msg = what + ": the ranks' arguments differ: rank 0 called " + describe(first) + ", rank " +
                            std::to_string(r) + " called " + describe(h) + " (seen on rank " +
                            std::to_string(rank) + ")";
    if (h.kind != first.kind || h.op != first.op || h.root != first.root || h.count != first.count) throw ValueError(msg);
    if (h.kind == kReduceGradients && h.dims[1] != first.dims[1]) throw ValueError(msg);  // bucket_bytes differ
    if (h.dtype != first.dtype) throw DTypeError(msg);
    throw ShapeError(msg);
  }
}

}  // namespace ravel::detail
