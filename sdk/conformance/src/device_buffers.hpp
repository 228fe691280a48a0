// What the cases over several devices of one plugin share (peer copies, all-reduce): a scoped
// buffer on any device, the other devices to pair with the device under test, and a kernel that
// fills a buffer as queued work (to check ordering without host synchronisation).
#pragma once

#include "kernel_case.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace rvl::conformance {

// Throws Failure(what) unless `cond`.
void expect(bool cond, const std::string& what);

// A buffer of `bytes` (0 allowed) on `device`, freed at the end of the scope.
class DeviceBuffer {
 public:
  DeviceBuffer(int32_t device, uint64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  rvl_buffer* get() const { return b_; }
  void write(const std::vector<uint8_t>& bytes);
  std::vector<uint8_t> read() const;

 private:
  rvl_buffer* b_ = nullptr;
  uint64_t bytes_;
};

// Up to `max` devices other than the device under test, in index order. Throws Skip when there
// is none: `needs` says what the cases need two devices for.
std::vector<int32_t> other_devices(size_t max, const std::string& needs);

// Queues a kernel on `device` that writes `value` to the first `n` f32 elements of `b`.
void fill_f32(int32_t device, rvl_buffer* b, int64_t n, float value);
// The f32 element `at` of raw bytes.
float f32_at(const std::vector<uint8_t>& bytes, size_t at);

}  // namespace rvl::conformance
