// Helpers the tensor layer shares: building nodes from tensors and checking arguments.
#pragma once

#include <vector>

#include "graph/node.hpp"
#include "ravel/tensor.hpp"

namespace ravel::detail {

// The view of `t` onto the buffer of base(t) (contiguous unless t is a View node).
StridedView view_of(const Tensor& t);
// The node whose buffer a View reads (t's node itself unless it is a View).
const NodePtr& base_of(const Tensor& t);

Tensor make_const(Scalar value, DType dtype, const Device& device);
Tensor make_scalar(double value, DType dtype, const Device& device);
// A movement op's result: `view` (t's view composed with the op) on t's base, remembering the
// op and its arguments for autodiff.
Tensor make_view(const Tensor& t, MoveOp op, std::vector<int64_t> args, StridedView view);
// A unique alias of t (same data): an autodiff argument marker or a gradient barrier.
Tensor make_alias(const Tensor& t, MoveOp op);
// The node make_alias registers, for aliases that carry more (tensor/custom_vjp.cpp).
Node alias_proto(const Tensor& t, MoveOp op);
// An elementwise primitive; srcs must already share shape, dtype rules and device.
Tensor make_alu(AluOp op, std::vector<Tensor> srcs, DType out);
// A reduction keeping reduced axes as size 1.
Tensor make_reduce(ReduceOp op, const Tensor& t, uint32_t axes);
// The same, with a result dtype other than t's: only LogSumExp from f32 to f64 (ABI 1.4's one
// widening reduction; Note [Online logsumexp] in reduce.cpp).
Tensor make_reduce_widening(ReduceOp op, const Tensor& t, uint32_t axes, DType out);
// A fresh Buffer leaf holding t's values, realized now; shares the realized buffer, copies
// nothing more (Tensor::assign, requires_grad_, stored gradients).
NodePtr realized_leaf(const Tensor& t);
// Adds `g` to the gradient of `leaf` (a Buffer node that requires grad) without realizing the
// sum, under the lock Tensor::backward accumulates with (autodiff/tape.cpp). For a gradient
// whose value is already a few realized buffers (DataParallel::backward's averaged buckets,
// Note [Results ended at their first reader] in runtime/host_op_deferred.cpp): the optimizer's
// kernels then read it, so a bucket's wait comes at its update.
void add_to_grad_lazily(Node& leaf, const Tensor& g);

// Elementwise binary primitive with broadcasting and promotion (the inputs are cast).
Tensor binary(AluOp op, const Tensor& a, const Tensor& b);
// `value` as a tensor that combines with `t` without surprising promotion (docs/dtypes.md).
Tensor scalar_like(const Tensor& t, double value);

// Axis in [-ndim, ndim) -> [0, ndim); AxisError otherwise.
int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op);
// Axes -> bit mask over ndim axes (all axes if axes.all()); AxisError on a bad or repeated axis.
uint32_t axes_mask(const Axes& axes, int64_t ndim, const char* op);
// Throws ShapeError if the rank exceeds what kernels support.
void check_rank(size_t rank, const char* op);
void check_defined(const Tensor& t, const char* op);

}  // namespace ravel::detail
