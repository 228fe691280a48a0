#include "ravel/device.hpp"

#include <cctype>

#include "ravel/error.hpp"

namespace ravel {

Device Device::parse(const std::string& text) {
  auto colon = text.find(':');
  std::string name = text.substr(0, colon);
  bool ok = !name.empty();
  for (char ch : name) ok = ok && (std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '_');
  int32_t index = 0;
  if (ok && colon != std::string::npos) {
    std::string num = text.substr(colon + 1);
    ok = !num.empty() && num.size() < 9;
    for (char ch : num) ok = ok && std::isdigit(static_cast<unsigned char>(ch));
    if (ok) index = std::stoi(num);
  }
  RAVEL_CHECK(ok, DeviceError, "malformed device name \"", text,
              "\": expected \"backend\" or \"backend:N\" (lower-case backend name, N >= 0), e.g. \"tbb_cpu\" or \"hip:1\"");
  return Device(name, index);
}

}  // namespace ravel
