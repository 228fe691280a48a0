// Automatic differentiation on the lazy graph, in the style of JAX (functional transforms) and
// PyTorch (requires_grad / backward / grad).
//
// Gradients are built as ordinary graph nodes from one derivative rule per primitive
// (core/src/autodiff/rules.cpp), so a gradient can be differentiated again: grad of grad of grad,
// jvp (forward mode, by transposing a vjp: Note [JVP by double VJP]), jacfwd, jacrev, hessian.
// Only float tensors carry gradients; integer and bool values are constants to autodiff.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "ravel/tensor.hpp"

namespace ravel {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;
using UnaryFn = std::function<Tensor(const Tensor&)>;
using GradFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// d(output)/d(inputs) contracted with `cotangent` (default: 1 for a one-element output): the
// vector-Jacobian product, one tensor per input, shaped like the input. Inputs the output does
// not depend on get zeros. Like torch.autograd.grad.
std::vector<Tensor> gradients(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& cotangent = {});

// jax.grad: a function returning the gradient of f (which must return one element) with respect
// to every argument.
GradFn grad(TensorFn f);
UnaryFn grad(UnaryFn f);
// jax.value_and_grad.
std::pair<Tensor, std::vector<Tensor>> value_and_grad(const TensorFn& f, const std::vector<Tensor>& xs);

// jax.vjp: f's output and a pullback that maps a cotangent (shaped like the output) to one
// gradient per argument; the pullback may be called many times.
struct VjpResult {
  Tensor output;
  std::function<std::vector<Tensor>(const Tensor&)> pullback;
};
VjpResult vjp(const TensorFn& f, const std::vector<Tensor>& xs);

// jax.jvp: f's output and the Jacobian-vector product with `tangents` (one per argument).
std::pair<Tensor, Tensor> jvp(const TensorFn& f, const std::vector<Tensor>& xs, const std::vector<Tensor>& tangents);

// Jacobians of f: R^x.shape -> R^y.shape, shaped y.shape + x.shape, by forward mode (one jvp
// per input element) or reverse mode (one vjp per output element); hessian = jacfwd(jacrev(f)).
UnaryFn jacfwd(UnaryFn f);
UnaryFn jacrev(UnaryFn f);
UnaryFn hessian(UnaryFn f);

// The same values with no gradient flowing back through them (jax.lax.stop_gradient).
Tensor stop_gradient(const Tensor& t);

// While alive, results of new ops on this thread are detached (torch.no_grad): use it for
// inference and optimizer updates.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
};
bool grad_enabled();

}  // namespace ravel
