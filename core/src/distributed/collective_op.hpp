// Collectives over ranks as host operations (Note [Host operations] in runtime/host_op.hpp), so
// that a Jit captures and replays them: one object per call, reused by every replay of a capture.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/staging.hpp"
#include "runtime/host_op.hpp"

namespace ravel::detail {

// One tensor collective (all-reduce, all-gather, reduce-scatter, broadcast) of one input.
// begin: the argument check (Note [Argument headers]; every call, replays included), the input
// read straight into a reused staging buffer, the non-blocking operation started; end: the wait
// under the deadline and the result written to the output buffer. On a device whose buffers are
// host memory the plugin reads the input's buffer and writes the output's itself (Note [Host
// memory without staging] in collective_op.cpp).
struct CollectiveCall {
  Kind kind = kAllReduce;
  rvl_coll_op op = RVL_COLL_SUM;
  int root = -1;
  DType dtype = DType::F32;
  Shape in_shape, out_shape;
  Device device;     // of the input and the output
  std::string what;  // for messages: "all_reduce (sum)"
};
std::shared_ptr<HostOp> make_collective_op(CollectiveCall call);
// Note [One eager collective, begun and ended in place] (collective_op.cpp): `op` (from
// make_collective_op) begun and ended on t's own buffer, the result a realized leaf; undefined,
// with nothing done, where t is not a realized tensor with its own buffer or a Jit records.
Tensor run_collective_now(const std::shared_ptr<HostOp>& op, const Tensor& t);

// Note [Cached collective operations] (collective_op.cpp): an eager call's operation, made by
// `make` only when no idle one of the same collective, shape, dtype and device exists.
struct CollectiveKey {
  Kind kind;
  rvl_coll_op op;
  int root;
  DType dtype;
  const Shape& in_shape;
  const Shape& out_shape;
  const Device& device;
};
template <class Make>
std::shared_ptr<HostOp> cached_collective_op(const CollectiveKey& key, Make&& make);
std::shared_ptr<HostOp> find_collective_op(const CollectiveKey& key);
void keep_collective_op(const std::shared_ptr<HostOp>& op);
template <class Make>
std::shared_ptr<HostOp> cached_collective_op(const CollectiveKey& key, Make&& make) {
  if (std::shared_ptr<HostOp> op = find_collective_op(key)) return op;
  std::shared_ptr<HostOp> op = make_collective_op(make());
  keep_collective_op(op);
  return op;
}

// One DataParallel bucket: the sum over ranks of its gradients (one dtype), packed into one
// staging buffer (slot `slot`, its result in slot + 1, or in one packed output if direct). `header`, when set, is checked first
// (the first bucket of a reduce_gradients call carries the call's header).
struct BucketCall {
  DType dtype = DType::F32;
  std::vector<Shape> shapes;
  size_t slot = 2;
  bool check = false;
  ArgHeader header;
  // Note [Host memory without staging] (collective_op.cpp): every gradient on this host-memory
  // device. The result is then one packed output (all the gradients' elements, in order) that
  // the plugin writes itself, and a bucket of one gradient is sent from its buffer.
  bool direct = false;
  Device device;
};
// Whether a bucket of tensors on `device` takes the direct path (BucketCall::direct).
bool host_addressable(const Device& device);
std::shared_ptr<HostOp> make_bucket_op(BucketCall call);

}  // namespace ravel::detail
