// The fusion options in force: the runtime's Settings (config + RAVEL_FUSION, read once at
// start-up, Note [Settings]) unless a program replaced them with ravel::set_fusion_options.
#pragma once

#include "ravel/runtime.hpp"
#include "ravel/schedule.hpp"

namespace ravel::detail {

FusionOptions fusion_in_force(const Runtime& runtime);

}  // namespace ravel::detail
