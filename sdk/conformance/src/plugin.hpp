// Loading a plugin and talking to it through the C table only: checked calls, guarded buffers.
#pragma once

#include <ravel/backend.h>
#include <ravel/backend.hpp>
#include <ravel/decompose.hpp>
#include <ravel/op_table.hpp>
#include <ravel/conformance/reference.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace rvl::conformance {

// Thrown by checks inside a case: the case fails with this message.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Thrown when the plugin does not support what a case needs (optional member, dtype, rank).
struct Skip : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// True if the table has `member` inside its struct_size and it is non-NULL.
#define RVL_CONF_HAS(api, member)                                                      \
  (offsetof(rvl_backend_api, member) + sizeof(((rvl_backend_api*)nullptr)->member) <= \
       (api).struct_size &&                                                            \
   (api).member != nullptr)

class Plugin {
 public:
  explicit Plugin(const std::string& path);  // dlopen + rvl_backend_entry; throws std::runtime_error
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;
  const rvl_backend_api& api() const { return *api_; }

 private:
  void* handle_ = nullptr;
  const rvl_backend_api* api_ = nullptr;
};

// What every case gets: the table, the device under test and its properties.
struct Session {
  const rvl_backend_api* api = nullptr;
  int32_t device = 0;
  rvl_device_properties props{};
  bool supports_dtype(int32_t dt) const { return (props.dtypes >> dt) & 1u; }
  void require_dtype(int32_t dt) const;  // throws Skip
  bool has_contraction() const { return RVL_CONF_HAS(*api, execute_contraction); }
  // What the device runs (rvl_device_properties.ops as a host reads it, ABI 1.6) minus what
  // --decompose masks off (`decompose_all`: every op with a decomposition for its dtype).
  uint64_t ops = RVL_OPS_ALL;
  uint64_t masked_ops = 0;
  bool decompose_all = false;
  // `code` as a host sends it to this device: ops it lacks (or that are masked) rewritten by
  // the decomposition table. Throws Skip when one has no decomposition.
  std::vector<rvl_instruction> lower(const std::vector<rvl_instruction>& code) const;
};
Session& session();  // the process-wide session, set up by main()

// Reads an error's status and message and hands it back to its creator (error_destroy).
struct ErrorInfo {
  bool failed = false;
  rvl_status code = RVL_STATUS_OK;
  std::string message;
};
ErrorInfo take_error(rvl_error* e);
// Requires success; otherwise throws Failure naming `what` and the plugin's message.
void check_ok(rvl_error* e, const std::string& what);
// Requires an error with `code`; throws Failure otherwise.
void check_error(rvl_error* e, rvl_status code, const std::string& what);
const char* status_name(rvl_status s);

// A device buffer with guard regions of kGuardBytes on both sides of its payload, filled with a
// known pattern. Views address the payload through payload_offset() (in elements).
class GuardedBuffer {
 public:
  static constexpr uint64_t kGuardBytes = 64;
  static constexpr uint8_t kPattern = 0xA5;
  explicit GuardedBuffer(const ref::HostBuffer& contents);  // allocate + upload
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  rvl_buffer* get() const { return buffer_; }
  int64_t payload_offset() const;  // guard size in elements of the dtype
  // Reads everything back; throws Failure if a guard byte changed. Returns the payload.
  ref::HostBuffer read_checked(const std::string& what) const;

 private:
  rvl_buffer* buffer_ = nullptr;
  int32_t dtype_;
  uint64_t payload_bytes_;
};

// A plain device buffer (no guards), freed on destruction unless released.
class RawBuffer {
 public:
  explicit RawBuffer(uint64_t bytes);
  ~RawBuffer();
  RawBuffer(const RawBuffer&) = delete;
  RawBuffer& operator=(const RawBuffer&) = delete;
  rvl_buffer* get() const { return buffer_; }
  void release() { buffer_ = nullptr; }

 private:
  rvl_buffer* buffer_ = nullptr;
};

}  // namespace rvl::conformance
