// What the tensor collectives and DataParallel share: ABI codes and the argument header every
// rank exchanges before a collective (Note [Argument headers]).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.hpp"
#include "ravel/distributed.hpp"

namespace ravel::detail {

using Bytes = std::vector<uint8_t>;

rvl_dtype abi_dtype(DType t);
rvl_coll_op abi_op(distributed::ReduceOp op);

// Note [Argument headers]: one rank's arguments to a collective, as every rank sees them.
struct ArgHeader {
  int32_t kind = 0;  // which collective (Kind)
  int32_t op = -1;   // the reduction, or -1
  int32_t root = -1; // broadcast's root, or -1
  int32_t dtype = -1;
  int32_t ndim = -1;
  int32_t count = 0;       // DataParallel: the number of tensors
  int64_t dims[8] = {};    // the shape (ndim <= 8); DataParallel: total bytes, bucket count
  uint64_t signature = 0;  // DataParallel: a hash of every tensor's dtype and shape
};
enum Kind : int32_t { kAllReduce = 1, kAllGather, kReduceScatter, kBroadcast, kReduceGradients };

// All-gathers every rank's header and throws the same error on every rank when they differ:
// DTypeError (dtypes), ShapeError (shapes), ValueError (kind, op, root, tensor count).
void check_headers(Communicator& comm, const ArgHeader& mine, const std::string& what);
// The same with the requests' label ("all_reduce (sum) (argument check)") made once by the caller.
void check_headers(Communicator& comm, const ArgHeader& mine, const std::string& what, const std::string& label);
// Throws that error if the ranks' headers (`all`, one per rank, the same on every rank) differ.
void compare_headers(const ArgHeader* all, int size, int rank, const std::string& what);
// Note [Checked all-reduces in the core] (staging.cpp): whether every argument check on `comm`
// travels through the plugin's all_reduce_checked (collectives.h 1.1), so that an all-reduce
// sends its header with its data.
bool checks_in_plugin(const Communicator& comm);

}  // namespace ravel::detail
