// Automatic differentiation on the lazy graph, in the style of JAX (functional transforms) and
// PyTorch (requires_grad / backward / grad).
//
// Gradients are built as ordinary graph nodes from one derivative rule per primitive
// (core/src/autodiff/rules.cpp), so a gradient can be differentiated again: grad of grad of grad,
// jvp (forward mode, by transposing a vjp: Note [JVP by double VJP]), jacfwd, jacrev, hessian.
// Only float tensors carry gradients; integer and bool values are constants to autodiff.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "ravel/tensor.hpp"

namespace ravel {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;
using UnaryFn = std::function<Tensor(const Tensor&)>;
using GradFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// hessian(f, {i, j, ...}): block [a][b] is d2f / dx_argnums[a] dx_argnums[b].
using HessianFn = std::function<std::vector<std::vector<Tensor>>(const std::vector<Tensor>&)>;

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

// ---- argnums: differentiating a function of several tensors with respect to chosen ones ----
// As JAX's `argnums` (docs/autodiff.md, "Choosing the arguments"):
//  * one index (an integer) gives one result: grad(f, 1)(xs) is df/dxs[1], a TensorFn, so the
//    transforms compose (jacfwd(grad(f, 0), 1) is the mixed block d2f/dx1 dx0);
//  * a list ({0, 2}, or a std::vector) gives one result per listed argument, in the list's order
//    (a one-element list {1} still gives a list of one: that is why each list form also takes a
//    std::initializer_list, which C++ prefers to the integer for a braced {1});
//  * negative indices count from the end as in Python (-1 is the last argument);
//  * the indices are checked when the function is called, against the number of arguments it is
//    called with: out of range, listed twice (1 and -1 of two arguments are the same), or an
//    empty list throw ravel::ValueError naming the index and the number of arguments.
// The other arguments are held fixed (constants to this transform; an outer transform still
// differentiates through them). Blocks are shaped output.shape + argument.shape, as in JAX.
TensorFn grad(TensorFn f, int64_t argnum);
GradFn grad(TensorFn f, std::vector<int64_t> argnums);
inline GradFn grad(TensorFn f, std::initializer_list<int64_t> argnums) {
  return grad(std::move(f), std::vector<int64_t>(argnums));
}
std::pair<Tensor, Tensor> value_and_grad(const TensorFn& f, const std::vector<Tensor>& xs, int64_t argnum);
std::pair<Tensor, std::vector<Tensor>> value_and_grad(const TensorFn& f, const std::vector<Tensor>& xs,
                                                      std::vector<int64_t> argnums);
inline std::pair<Tensor, std::vector<Tensor>> value_and_grad(const TensorFn& f, const std::vector<Tensor>& xs,
                                                             std::initializer_list<int64_t> argnums) {
  return value_and_grad(f, xs, std::vector<int64_t>(argnums));
}
TensorFn jacfwd(TensorFn f, int64_t argnum);
GradFn jacfwd(TensorFn f, std::vector<int64_t> argnums);
inline GradFn jacfwd(TensorFn f, std::initializer_list<int64_t> argnums) {
  return jacfwd(std::move(f), std::vector<int64_t>(argnums));
}
TensorFn jacrev(TensorFn f, int64_t argnum);
GradFn jacrev(TensorFn f, std::vector<int64_t> argnums);
inline GradFn jacrev(TensorFn f, std::initializer_list<int64_t> argnums) {
  return jacrev(std::move(f), std::vector<int64_t>(argnums));
}
// hessian(f, i) is shaped output + x_i + x_i; hessian(f, list)[a][b] is output + x_a + x_b
// (JAX's nested tuple), computed as jacfwd(jacrev(f, list), list).
TensorFn hessian(TensorFn f, int64_t argnum);
HessianFn hessian(TensorFn f, std::vector<int64_t> argnums);
inline HessianFn hessian(TensorFn f, std::initializer_list<int64_t> argnums) {
  return hessian(std::move(f), std::vector<int64_t>(argnums));
}

// jax.custom_vjp, on a value: `output` (computed from `inputs`) with `rule` as its derivative.
// Gradients reaching the result flow to `inputs` only, as rule(inputs, output, cotangent): one
// tensor per input, shaped like it, or an undefined Tensor for no gradient. The ops that computed
// `output` are not differentiated (tensors they used besides `inputs` get no gradient from it).
// The rule is built from tensor ops, so its result is differentiated again for higher orders and
// for jvp. Take tensors as the rule's arguments rather than capturing them: a rule holding
// `output` would keep it alive. Ravel's tanh and sigmoid are made this way (docs/autodiff.md).
// Under a NoGradGuard `output` is returned as it is. `name` labels the rule's errors.
using VjpRule = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const Tensor& output,
                                                  const Tensor& cotangent)>;
Tensor custom_vjp(const Tensor& output, const std::vector<Tensor>& inputs, VjpRule rule,
                  std::string name = "custom_vjp");

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
