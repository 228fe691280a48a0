#include "graph/grad_mode.hpp"

namespace ravel::detail {

namespace {
thread_local int t_no_grad_depth = 0;  // per thread, like torch.no_grad
}  // namespace

bool grad_mode_enabled() { return t_no_grad_depth == 0; }
void enter_no_grad() { ++t_no_grad_depth; }
void exit_no_grad() { --t_no_grad_depth; }

}  // namespace ravel::detail
