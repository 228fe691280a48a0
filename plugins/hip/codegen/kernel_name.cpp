// Kernel names and cache keys hash with the shared lowering's FNV-1a (lower::hash_name names
// kernels); the runtime's caches (runtime/kernels.cpp, disk_cache.cpp) call this spelling.
#include <ravel/lowering/plan.hpp>

namespace rvl::hip {

uint64_t fnv1a(const std::string& s) { return lower::fnv1a(s.data(), s.size()); }

}  // namespace rvl::hip
