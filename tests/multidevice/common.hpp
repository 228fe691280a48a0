// Shared helpers of the multi-device tests: the tbb_cpu plugin loaded with dlopen and driven only
// through its C table, re-initialised with RAVEL_TBB_DEVICES=N for each case (Note [Devices] in
// plugins/tbb_cpu/devices.hpp), and small kernels whose results a naive host loop checks.
#pragma once

#include <ravel/backend.h>

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mdtest {

const rvl_backend_api& api();

// The device counts every test runs with.
inline const std::vector<int32_t> kCounts = {1, 2, 3, 4, 8};

// Sets (or, with "", unsets) an environment variable for the life of the object.
class EnvVar {
 public:
  EnvVar(const char* name, const std::string& value);
  ~EnvVar();
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

// The plugin initialised with `devices` devices (and RAVEL_TBB_ASYNC=`async` unless ""), shut
// down again at the end of the scope; it must report exactly that many devices.
class Session {
 public:
  explicit Session(int32_t devices, const std::string& async = "", const std::string& fault = "");
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  int32_t devices() const { return n_; }

 private:
  EnvVar devices_, async_, fault_;
  int32_t n_;
};

// Requires success; reports the plugin's message otherwise (and destroys the error).
void ok(rvl_error* e, const std::string& ctx);
// Requires an error with `code` whose message contains `keyword`; returns the message.
std::string expect_error(rvl_error* e, const std::string& keyword, rvl_status code = RVL_STATUS_INVALID_ARGUMENT);

// RAII buffer on one device.
class Buf {
 public:
  Buf(int32_t device, uint64_t bytes);
  ~Buf();
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  rvl_buffer* get() const { return b_; }
  uint64_t bytes() const { return bytes_; }
  void write(const void* src, uint64_t bytes, uint64_t offset = 0);
  std::vector<unsigned char> read(uint64_t bytes, uint64_t offset = 0) const;
  template <class T>
  std::vector<T> read_as(int64_t n) const {
    std::vector<T> out(static_cast<size_t>(n));
    const auto raw = read(static_cast<uint64_t>(n) * sizeof(T));
    if (n) std::memcpy(out.data(), raw.data(), raw.size());
    return out;
  }

 private:
  rvl_buffer* b_ = nullptr;
  uint64_t bytes_;
};

// One contiguous operand of `n` elements of `dtype` in a rank-1 iteration space.
rvl_operand vector_operand(rvl_buffer* b, int32_t dtype, int64_t n);
// out[i] = a[i] * b[i] + c, f32, over n elements (queued, not waited for).
void launch_fma(int32_t device, rvl_buffer* a, rvl_buffer* b, float c, rvl_buffer* out, int64_t n);
// out[i] = value (f32) for n elements, repeated `heavy` times as a chain of adds of 0 so that the
// kernel takes measurable time (the ordering tests want work still queued when they copy).
void launch_fill(int32_t device, rvl_buffer* out, int64_t n, float value, int heavy = 0);
// C = A (m x k) * B (k x n), f64 row-major contiguous.
void launch_matmul(int32_t device, rvl_buffer* a, rvl_buffer* b, rvl_buffer* c, int64_t m, int64_t n, int64_t k);
// The value a device's details report for `key` ("threads", "used_bytes"), or -1.
int64_t detail(int32_t device, const std::string& key);

}  // namespace mdtest
