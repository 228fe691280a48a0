// Every environment variable the core reads, read in one place (docs/config.md, "Environment
// variables"). The runtime calls read_environment() once when it starts (Runtime's constructor)
// and keeps the result in its Settings; nothing else in core/ calls getenv.
#pragma once

#include <string>

namespace ravel::detail {

struct Environment {
  std::string config;        // RAVEL_CONFIG: the config file (when RuntimeOptions names none)
  std::string plugin_path;   // RAVEL_PLUGIN_PATH: ':'-separated plugin folders, searched first
  std::string fusion;        // RAVEL_FUSION: a fusion policy name overriding fusion.policy
  std::string debug;         // RAVEL_DEBUG: 1 prints every kernel, 2 also the graph cut
  std::string kernel_cache;  // RAVEL_KERNEL_CACHE: 0 disables the kernel cache
  std::string log_plugins;   // RAVEL_LOG_PLUGINS: non-empty prints every skipped plugin
  std::string mask_ops;      // RAVEL_MASK_OPS: ops every device is treated as lacking ("SQRT,MAX")
  std::string tbb_devices;   // RAVEL_TBB_DEVICES: read by the oneTBB plugin; the core only asks
                             // whether it is set (a config mesh sets it when not: runtime/mesh.cpp)
  // Distributed runs (core/src/distributed, docs/distributed.md): read by distributed::init.
  std::string dist_timeout;  // RAVEL_DIST_TIMEOUT_S: seconds any wait on another rank may take
  std::string communicator;  // RAVEL_COMMUNICATOR: the communicator plugin to use, by name
  // What a launcher sets: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE/RANK), PMI (PMI_SIZE/RANK:
  // Slurm's srun, MPICH's hydra).
  std::string ompi_size, ompi_rank, pmi_size, pmi_rank;
};

// Unset and empty variables both read as "".
Environment read_environment();

}  // namespace ravel::detail
