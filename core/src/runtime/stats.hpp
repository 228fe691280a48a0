// Kernel statistics (ravel::last_realization_stats, ravel::cumulative_stats): the executor fills a
// KernelStats per realization and records it here.
#pragma once

#include "ravel/schedule.hpp"

namespace ravel::detail {

// Makes `stats` the last realization's and adds it to the running totals.
void record_realization(const KernelStats& stats);

}  // namespace ravel::detail
