// ravel::Device — names one device of one loaded backend plugin ("tbb_cpu:0").
#pragma once

#include <cstdint>
#include <string>

namespace ravel {

class Device {
 public:
  Device() = default;
  Device(std::string backend, int32_t index) : backend_(std::move(backend)), index_(index) {}
  // Parses "name" (index 0) or "name:N"; throws DeviceError on a malformed name. Whether the
  // device exists is checked when it is first used.
  static Device parse(const std::string& text);
  const std::string& backend() const { return backend_; }
  int32_t index() const { return index_; }
  std::string str() const { return backend_ + ":" + std::to_string(index_); }
  bool operator==(const Device&) const = default;

 private:
  std::string backend_ = "tbb_cpu";
  int32_t index_ = 0;
};

}  // namespace ravel
