// Running a schedule: binding a Recipe's local nodes to device buffers and launching its kernels
// on the plugins (the only place kernels run).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "graph/node.hpp"
#include "ravel/runtime.hpp"
#include "ravel/schedule.hpp"
#include "schedule/recipe.hpp"

namespace ravel::detail {

// Gives a Const node a one-element buffer (a realization target, or read through a padded view).
void realize_const(const Runtime& runtime, Node& n);

// The buffer bound to a recipe's local index: a kernel input, a contraction's A or B, or a
// transfer's source. Realizations read it from the graph's nodes, replays (runtime/jit.cpp) from
// their captured slots.
using BufferOf = std::function<const std::shared_ptr<DeviceBuffer>&(int32_t local)>;

// Launches one lowered kernel, its operands bound through `buffer_of` and its result written to
// `out`; returns the seconds spent in the plugin.
double launch_kernel(const CachedKernel& kernel, const BufferOf& buffer_of, DeviceBuffer& out);

// Runs `recipe` on the nodes `locals` (its local indices), allocating each kernel's output and
// freeing intermediates after their last reader; a kernel that fails leaves no node looking
// realized. Adds launches, bytes and plugin time to `stats`; `debug` >= 1 prints each kernel.
// Every kernel that runs is reported to the thread's active KernelRecorder (runtime/capture.hpp).
void run_recipe(const Runtime& runtime, const std::shared_ptr<const Recipe>& recipe, const std::vector<NodePtr>& locals,
                KernelStats& stats, int debug);

}  // namespace ravel::detail
