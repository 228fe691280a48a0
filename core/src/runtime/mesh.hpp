// The config's mesh, as the runtime prepares for it (Note [Mesh devices] in mesh.cpp).
#pragma once

#include "config/settings.hpp"

namespace ravel::detail {

// Asks the oneTBB plugin for the devices the config's mesh names, unless RAVEL_TBB_DEVICES is set.
void request_mesh_devices(const Settings& settings);

}  // namespace ravel::detail
