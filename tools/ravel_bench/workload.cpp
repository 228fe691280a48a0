#include "workload.hpp"

namespace ravel::bench {

std::string size_str(const Size& s) {
  std::string out;
  for (auto v : s) out += (out.empty() ? "" : "x") + std::to_string(v);
  return out;
}

}  // namespace ravel::bench
