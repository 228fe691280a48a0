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

#include "ravel/error.hpp"

namespace ravel::detail {

namespace {

template <class T>
void append_as(const Tensor& t, Bytes& out) {
  const std::vector<T> v = t.to_vector<T>();
  const size_t at = out.size();
  out.resize(at + v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data() + at, v.data(), v.size() * sizeof(T));
}

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
    return s + " of " + std::to_string(h.count) + " tensors, " + std::to_string(h.dims[0]) + " bytes";
  s += " of ";
  s += h.dtype >= 0 && h.dtype < kDTypeCount ? dtype_name(static_cast<DType>(h.dtype)) : "?";
  s += " " + shape_text(h);
  if (h.op >= 0 && h.op < 4) s += std::string(" (") + kOps[h.op] + ")";
  if (h.root >= 0) s += " from rank " + std::to_string(h.root);
  return s;
}

}  // namespace

void append_host(const Tensor& t, Bytes& out) {
  switch (t.dtype()) {
    case DType::Bool: return append_as<uint8_t>(t, out);  // bytes 0/1
    case DType::U8: return append_as<uint8_t>(t, out);
    case DType::I32: return append_as<int32_t>(t, out);
    case DType::I64: return append_as<int64_t>(t, out);
    case DType::F32: return append_as<float>(t, out);
    case DType::F64: return append_as<double>(t, out);
  }
  throw InternalError("distributed: unknown dtype");
}

void copy_to_host(const Tensor& t, Bytes& out) {
  out.clear();  // keeps the capacity: the same memory as last time
  append_host(t, out);
}

std::shared_ptr<Bytes> to_host(const Tensor& t) {
  auto b = std::make_shared<Bytes>();
  append_host(t, *b);
  return b;
}

Tensor from_host(const uint8_t* data, DType dtype, const Shape& shape, const Device& device) {
  static const uint8_t kNone = 0;
  return Tensor::from_data(data ? data : &kNone, dtype, shape, device);
}

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

ArgHeader header_of(Kind kind, const Tensor& t, int op, int root) {
  ArgHeader h;
  h.kind = kind;
  h.op = op;
  h.root = root;
  h.dtype = static_cast<int32_t>(t.dtype());
  h.ndim = static_cast<int32_t>(t.shape().size());
  RAVEL_CHECK(h.ndim <= 8, ShapeError, "distributed: tensors of rank ", h.ndim, " (at most 8)");
  for (int i = 0; i < h.ndim; ++i) h.dims[i] = t.shape()[i];
  return h;
}

void check_headers(Communicator& comm, const ArgHeader& mine, const std::string& what) {
  auto all = std::make_shared<std::vector<ArgHeader>>(static_cast<size_t>(comm.size()));
  auto self = std::make_shared<ArgHeader>(mine);
  const auto& api = comm.plugin().api();
  comm.run([&](rvl_coll_request** r) {
    return api.all_gather(comm.handle(), self.get(), all->data(), sizeof(ArgHeader), RVL_DTYPE_U8, r);
  }, what + " (argument check)", std::make_shared<std::pair<decltype(all), decltype(self)>>(all, self));
  const ArgHeader& first = (*all)[0];
  for (int r = 1; r < comm.size(); ++r) {
    const ArgHeader& h = (*all)[r];
    if (std::memcmp(&h, &first, sizeof h) == 0) continue;
    const std::string msg = what + ": the ranks' arguments differ: rank 0 called " + describe(first) + ", rank " +
                            std::to_string(r) + " called " + describe(h) + " (seen on rank " +
                            std::to_string(comm.rank()) + ")";
    if (h.kind != first.kind || h.op != first.op || h.root != first.root || h.count != first.count) throw ValueError(msg);
    if (h.dtype != first.dtype) throw DTypeError(msg);
    throw ShapeError(msg);
  }
}

}  // namespace ravel::detail
