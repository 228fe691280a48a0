// Derivatives of the collectives across ranks (Note [Derivatives across ranks]).
#pragma once

#include "ravel/distributed.hpp"

namespace ravel::distributed::detail {

// y, the result of the named collective of `x` on this rank, with that collective's derivative
// attached: gradients reaching y flow back to x through the adjoint collective. y itself when x
// is not a float tensor (only floats carry gradients) or nothing is being differentiated.
Tensor with_all_reduce_vjp(const Tensor& y, const Tensor& x, ReduceOp op);
Tensor with_all_gather_vjp(const Tensor& y, const Tensor& x);
Tensor with_reduce_scatter_vjp(const Tensor& y, const Tensor& x, ReduceOp op);
Tensor with_broadcast_vjp(const Tensor& y, const Tensor& x, int root);

}  // namespace ravel::distributed::detail
