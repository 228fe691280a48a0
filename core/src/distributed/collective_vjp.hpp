// Derivatives of the collectives across ranks (Note [Derivatives across ranks]).
#pragma once

#include "ravel/distributed.hpp"

namespace ravel::distributed::detail {

// y, the result of the named collective of `x` on this rank, with that collective's derivative
// attached: gradients reaching y flow back to x through the adjoint collective. y itself when x
// is not a float tensor (only floats carry gradients) or nothing is being differentiated.
// `fresh`: y is a new result only this call holds (run_collective_now's), so the rule goes on its
// own node rather than on an alias (Note [A derivative on the result's own node]).
Tensor with_all_reduce_vjp(Tensor y, const Tensor& x, ReduceOp op, bool fresh = false);
Tensor with_all_gather_vjp(Tensor y, const Tensor& x, bool fresh = false);
Tensor with_reduce_scatter_vjp(Tensor y, const Tensor& x, ReduceOp op, bool fresh = false);
Tensor with_broadcast_vjp(Tensor y, const Tensor& x, int root, bool fresh = false);

}  // namespace ravel::distributed::detail
