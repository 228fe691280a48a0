// Running a schedule: binding a Recipe's local nodes to device buffers and launching its kernels
// on the plugins (the only place kernels run).
#pragma once

#include <vector>

#include "graph/node.hpp"
#include "ravel/runtime.hpp"
#include "ravel/schedule.hpp"
#include "schedule/recipe.hpp"

namespace ravel::detail {

// Gives a Const node a one-element buffer (a realization target, or read through a padded view).
void realize_const(const Runtime& runtime, Node& n);

// Runs `recipe` on the nodes `locals` (its local indices), allocating each kernel's output and
// freeing intermediates after their last reader; a kernel that fails leaves no node looking
// realized. Adds launches, bytes and plugin time to `stats`; `debug` >= 1 prints each kernel.
void run_recipe(const Runtime& runtime, const Recipe& recipe, const std::vector<NodePtr>& locals, KernelStats& stats,
                int debug);

}  // namespace ravel::detail
