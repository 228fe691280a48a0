#include "plugin.hpp"

#include <dlfcn.h>

#include <cstring>
#include <vector>

namespace rvl::conformance {

Plugin::Plugin(const std::string& path) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) throw std::runtime_error("cannot load " + path + ": " + dlerror());
  void* sym = dlsym(handle_, RVL_BACKEND_ENTRY_SYMBOL);
  if (sym == nullptr) {
    dlclose(handle_);
    throw std::runtime_error(path + " does not export " RVL_BACKEND_ENTRY_SYMBOL);
  }
  auto entry = reinterpret_cast<rvl_backend_entry_fn>(sym);
  api_ = entry();
  if (api_ == nullptr) {
    dlclose(handle_);
    throw std::runtime_error(RVL_BACKEND_ENTRY_SYMBOL " returned NULL");
  }
}

Plugin::~Plugin() {
  if (handle_) dlclose(handle_);
}

Session& session() {
  static Session s;
  return s;
}

void Session::require_dtype(int32_t dt) const {
  if (!supports_dtype(dt))
    throw Skip(std::string("dtype ") + std::to_string(dt) + " not supported by the device");
}

std::vector<rvl_instruction> Session::lower(const std::vector<rvl_instruction>& code) const {
  uint64_t mask = ops & ~masked_ops;
  if (decompose_all)  // every instruction that has a decomposition for its dtype takes it
    for (size_t i = 0; i < code.size(); ++i) {
      const rvl_instruction& in = code[i];
      const int32_t src = in.op == RVL_OP_WHERE ? in.src[1] : in.src[0];
      const int32_t t = src >= 0 && size_t(src) < i ? code[size_t(src)].dtype : in.dtype;
      if (rvl::find_decomposition(in.op, t)) mask &= ~RVL_OP_BIT(in.op);
    }
  rvl::Rewriter r(mask);
  if (!r.rewrite(code.data(), int32_t(code.size())))
    throw Skip("the host cannot send this kernel to the device: " + r.error());
  return r.result();
}

const char* status_name(rvl_status s) {
  switch (s) {
    case RVL_STATUS_OK: return "OK";
    case RVL_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case RVL_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case RVL_STATUS_UNSUPPORTED: return "UNSUPPORTED";
    case RVL_STATUS_DEVICE_ERROR: return "DEVICE_ERROR";
    case RVL_STATUS_INTERNAL: return "INTERNAL";
    default: return "<unknown status>";
  }
}

ErrorInfo take_error(rvl_error* e) {
  ErrorInfo info;
  if (e == nullptr) return info;
  const rvl_backend_api& api = *session().api;
  info.failed = true;
  info.code = api.error_code(e);
  const char* msg = api.error_message(e);
  info.message = msg ? msg : "<NULL message>";
  api.error_destroy(e);
  if (msg == nullptr) throw Failure("error_message returned NULL");
  if (info.code == RVL_STATUS_OK) throw Failure("an error object reports RVL_STATUS_OK");
  return info;
}

void check_ok(rvl_error* e, const std::string& what) {
  const ErrorInfo info = take_error(e);
  if (info.failed) {
    if (info.code == RVL_STATUS_UNSUPPORTED)
      throw Skip(what + ": not supported (" + info.message + ")");
    throw Failure(what + " failed with " + status_name(info.code) + ": " + info.message);
  }
}

void check_error(rvl_error* e, rvl_status code, const std::string& what) {
  const ErrorInfo info = take_error(e);
  if (!info.failed) throw Failure(what + ": accepted, expected " + status_name(code));
  if (info.code != code)
    throw Failure(what + ": returned " + status_name(info.code) + " (" + info.message +
                  "), expected " + status_name(code));
}

GuardedBuffer::GuardedBuffer(const ref::HostBuffer& contents)
    : dtype_(contents.dtype), payload_bytes_(contents.bytes.size()) {
  const rvl_backend_api& api = *session().api;
  check_ok(api.buffer_allocate(session().device, payload_bytes_ + 2 * kGuardBytes, &buffer_),
           "buffer_allocate");
  std::vector<uint8_t> all(payload_bytes_ + 2 * kGuardBytes, kPattern);
  if (payload_bytes_) std::memcpy(all.data() + kGuardBytes, contents.bytes.data(), payload_bytes_);
  check_ok(api.buffer_write(nullptr, buffer_, 0, all.data(), all.size()), "buffer_write");
}

GuardedBuffer::~GuardedBuffer() {
  if (buffer_) {
    rvl_error* e = session().api->buffer_free(buffer_);
    if (e) session().api->error_destroy(e);
  }
}

int64_t GuardedBuffer::payload_offset() const {
  return static_cast<int64_t>(kGuardBytes / ref::element_size(dtype_));
}

ref::HostBuffer GuardedBuffer::read_checked(const std::string& what) const {
  const rvl_backend_api& api = *session().api;
  std::vector<uint8_t> all(payload_bytes_ + 2 * kGuardBytes);
  check_ok(api.buffer_read(nullptr, buffer_, 0, all.data(), all.size()), "buffer_read");
  for (uint64_t i = 0; i < all.size(); ++i) {
    const bool guard = i < kGuardBytes || i >= kGuardBytes + payload_bytes_;
    if (guard && all[i] != kPattern) {
      const int64_t rel = i < kGuardBytes ? int64_t(i) - int64_t(kGuardBytes)
                                          : int64_t(i - kGuardBytes - payload_bytes_);
      throw Failure(what + ": guard region overwritten at byte " + std::to_string(rel) +
                    (rel < 0 ? " before the start" : " past the end") + " of the data");
    }
  }
  ref::HostBuffer h;
  h.dtype = dtype_;
  h.bytes.assign(all.begin() + kGuardBytes, all.begin() + kGuardBytes + payload_bytes_);
  return h;
}

RawBuffer::RawBuffer(uint64_t bytes) {
  check_ok(session().api->buffer_allocate(session().device, bytes, &buffer_), "buffer_allocate");
}

RawBuffer::~RawBuffer() {
  if (buffer_) {
    rvl_error* e = session().api->buffer_free(buffer_);
    if (e) session().api->error_destroy(e);
  }
}

}  // namespace rvl::conformance
