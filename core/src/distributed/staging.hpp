// What the tensor collectives and DataParallel share: host staging of tensors and the argument
// header every rank exchanges before a collective (Note [Argument headers]).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.hpp"
#include "ravel/distributed.hpp"

namespace ravel::detail {

using Bytes = std::vector<uint8_t>;

// The tensor's elements, row-major, in host memory (bool as bytes 0/1). Realizes it.
std::shared_ptr<Bytes> to_host(const Tensor& t);
// The same into `out` (resized), e.g. a reused staging buffer (Note [Reused staging buffers]).
void copy_to_host(const Tensor& t, Bytes& out);
// Appends them to `out` instead.
void append_host(const Tensor& t, Bytes& out);
// A tensor of `dtype` and `shape` on `device` from `count` elements at `data`.
Tensor from_host(const uint8_t* data, DType dtype, const Shape& shape, const Device& device);

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
  int64_t dims[8] = {};    // the shape (ndim <= 8), or DataParallel's total bytes in dims[0]
  uint64_t signature = 0;  // DataParallel: a hash of every tensor's dtype and shape
};
enum Kind : int32_t { kAllReduce = 1, kAllGather, kReduceScatter, kBroadcast, kReduceGradients };
ArgHeader header_of(Kind kind, const Tensor& t, int op = -1, int root = -1);

// All-gathers every rank's header and throws the same error on every rank when they differ:
// DTypeError (dtypes), ShapeError (shapes), ValueError (kind, op, root, tensor count).
void check_headers(Communicator& comm, const ArgHeader& mine, const std::string& what);

}  // namespace ravel::detail
