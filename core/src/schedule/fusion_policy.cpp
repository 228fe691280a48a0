// Fusion policy names (ravel/fusion.hpp): the spelling configs and RAVEL_FUSION use.
#include <ostream>

#include "ravel/error.hpp"
#include "ravel/fusion.hpp"

namespace ravel {

const char* fusion_policy_name(FusionPolicy p) {
  switch (p) {
    case FusionPolicy::None: return "none";
    case FusionPolicy::Elementwise: return "elementwise";
    case FusionPolicy::Reduce: return "reduce";
    case FusionPolicy::Full: return "full";
  }
  return "?";
}

FusionPolicy parse_fusion_policy(const std::string& name) {
  for (auto p : {FusionPolicy::None, FusionPolicy::Elementwise, FusionPolicy::Reduce, FusionPolicy::Full})
    if (name == fusion_policy_name(p)) return p;
  throw ConfigError("unknown fusion policy \"" + name + "\"; expected one of: none, elementwise, reduce, full");
}

std::ostream& operator<<(std::ostream& os, FusionPolicy p) { return os << fusion_policy_name(p); }

}  // namespace ravel
