// Whether new nodes take part in differentiation on this thread (Note [No-grad nodes] in
// tensor/tensor.cpp). The state lives here, below the tensor layer that reads it when it builds
// nodes; the public switch (ravel::NoGradGuard, ravel::grad_enabled) is autodiff's.
#pragma once

namespace ravel::detail {

bool grad_mode_enabled();
// Nesting counter: every enter_no_grad is matched by one exit_no_grad on the same thread.
void enter_no_grad();
void exit_no_grad();

}  // namespace ravel::detail
