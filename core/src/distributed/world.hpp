// The process's world: which launcher started it, which communicator joined it, and the
// deadline of every wait. Internal to core/src/distributed.
#pragma once

#include <memory>
#include <string>

#include "distributed/communicator.hpp"
#include "ravel/distributed.hpp"

namespace ravel::detail {

// The launcher environment, if any (config/environment.cpp reads the variables).
struct Launcher {
  bool found = false;
  std::string description;  // "mpirun (OMPI_COMM_WORLD_SIZE=2)"
  int size = 1, rank = 0;
};
Launcher detect_launcher();

// The started world's communicator, or NULL for a world of one. Calls init() if needed.
Communicator* world_communicator();
const distributed::Options& world_options();

}  // namespace ravel::detail
