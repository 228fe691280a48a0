// Kernel names: a kind and a 64-bit FNV-1a hash of the kernel body. Each kernel is compiled in
// its own translation unit, so the name only has to be a valid, readable symbol; caches compare
// full keys and sources, never names.
#include <cstdint>
#include <cstdio>
#include <string>

namespace rvl::hip {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hash_name(const std::string& kind, const std::string& body) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a(body)));
  return "rvl_" + kind + "_" + buf;
}

}  // namespace rvl::hip
