// The three steps where a global-view MeshTensor op crosses ranks, each a rank collective (a
// host operation a Jit captures; its input is realized when it is called) carrying the
// derivative of the one global loss (Note
// [Global-view derivatives] in mesh_rank_steps.cpp). Each takes and gives a tensor on one device.
#pragma once

#include "ravel/distributed.hpp"

namespace ravel::distributed::detail {

// Partial -> replicated: every rank's x combined by `op` (Sum, Max or Min), on every rank. For
// Max and Min, `ties` (shaped like x) counts the elements of this rank's block equal to x, so
// that the derivative shares the cotangent among all the elements holding the result, whichever
// rank holds them, as one device's max does.
Tensor rank_combine(const Tensor& x, ReduceOp op, const Tensor& ties = {});
// Replicated -> used by this rank's part: x itself; its cotangent is summed over the ranks.
Tensor rank_enter(const Tensor& x);
// Split -> replicated: every rank's block concatenated along axis 0 in rank order.
Tensor rank_gather(const Tensor& x);

}  // namespace ravel::distributed::detail
