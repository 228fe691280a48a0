// Helpers of the partial-results tests (test_partial.cpp, test_partial_gradients.cpp; Note
// [Partial results] in core/src/tensor/sharded.hpp).
#pragma once

#include <functional>
#include <string>

#include "sharding_common.hpp"

namespace partial_t {

using namespace stest;
using ravel::CollectiveOp;

inline bool partial_is(const Tensor& t, CollectiveOp op) {
  const auto s = t.sharding();
  return s.has_value() && s->partial == op && !s->axis.has_value();
}
inline bool replicas(const Tensor& t) { return t.sharding().has_value() && t.sharding()->replicated(); }
inline bool split_on(const Tensor& t, int64_t axis) {
  return t.sharding().has_value() && t.sharding()->axis == axis;
}

// Megatron's row-parallel layer: x [m, k] split along k, w [k, n] split along k: partial sums.
inline Tensor row_parallel(const Tensor& x, const Tensor& w, size_t n) {
  return x.shard(mesh(n), 1).matmul(w.shard(mesh(n), 0));
}

}  // namespace partial_t
