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

// Called after a kernel of run_recipe has run (and been reported to the recorder) with the node
// it gave a buffer to (Note [Host operations begun as their inputs are made] in host_op.cpp).
using KernelMade = std::function<void(const Node& made)>;

// Runs `recipe` on the nodes `locals` (its local indices), allocating each kernel's output and
// freeing intermediates after their last reader; a kernel that fails leaves no node looking
// realized. Adds launches, bytes and plugin time to `stats`; `debug` >= 1 prints each kernel.
// Every kernel that runs is reported to the thread's active KernelRecorder (runtime/capture.hpp),
// then to `made` if set; if `made` throws, the temporaries are released and the error passes on.
void run_recipe(const Runtime& runtime, const std::shared_ptr<const Recipe>& recipe, const std::vector<NodePtr>& locals,
                KernelStats& stats, int debug, const KernelMade& made = {});

// How many kernels this thread has launched (realizations and Jit replays), for tests that check
// where host operations fall between kernels (a debug counter; never reset).
int64_t kernels_launched_on_this_thread();

}  // namespace ravel::detail
