// buffer_address and buffer_wrap (sharing.hpp). The device pointers are of the kind
// device_properties reports as dlpack_device_type (kDLROCM on AMD, kDLCUDA on NVIDIA).
#include "sharing.hpp"

#include "device.hpp"
#include "objects.hpp"

#include <cstdint>
#include <cstdio>
#include <string>

namespace rvl::hip {
namespace {

// Foreign memory must be device memory of `d` from its first to its last byte: kernels on `d`
// will read it, and a host or other-device pointer would fault there (or read garbage).
void check_owner(int32_t d, const char* p, const char* which, const std::string& what) {
  int owner = -1;
  const hipError_t e = rvl_hip_pointer_device(p, &owner);
  if (e != hipSuccess)
    invalid(what + ": its " + which + " byte is not device memory of the " + platform_label() +
            " runtime (" + rvl_hip_error(e) + "); hip:" + std::to_string(d) +
            " wraps only its own device pointers");
  if (owner != d)
    invalid(what + ": its " + which + " byte is memory of hip:" + std::to_string(owner) +
            ", not of hip:" + std::to_string(d));
}

}  // namespace

rvl_error* buffer_address(const rvl_buffer* buffer, void** out) {
  return guard([&] {
    if (!out) invalid("buffer_address: output pointer is NULL");
    *out = live_buffer(buffer, "buffer_address")->data;  // a buffer is its whole block: no offset
  });
}

rvl_error* buffer_wrap(int32_t d, void* address, uint64_t bytes, void (*release)(void*), void* context,
                       rvl_buffer** out) {
  return guard([&] {
    if (!out) invalid("buffer_wrap: output pointer is NULL");
    if (!release) invalid("buffer_wrap: release is NULL");
    if (!address) invalid("buffer_wrap: address is NULL");
    if (bytes == 0) invalid("buffer_wrap: 0 bytes (a wrapped buffer has at least one)");
    require_initialized();
    use_device(d);
    const auto at = reinterpret_cast<uintptr_t>(address);
    if (at > UINTPTR_MAX - bytes)
      invalid("buffer_wrap: " + std::to_string(bytes) + " bytes at " + address_str(address) +
              " pass the end of the address space");
    const std::string what = "buffer_wrap of " + std::to_string(bytes) + " bytes at " + address_str(address);
    const char* first = static_cast<const char*>(address);
    check_owner(d, first, "first", what);
    check_owner(d, first + (bytes - 1), "last", what);
    auto* b = new rvl_buffer{d, address, bytes, nullptr, release, context};
    try {
      registry().buffers.add(b);
    } catch (...) {
      delete b;  // release is not called for a call that failed
      throw;
    }
    *out = b;
  });
}

}  // namespace rvl::hip
