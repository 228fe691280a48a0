// buffer_address and buffer_wrap (sharing.hpp).
//
// Why wrapping asks the driver first: a USM pointer is usable only in the context that allocated
// it, and this plugin has its own context per driver (device.hpp). A pointer from another
// library's context (a SYCL queue's, say) or plain host memory would make kernels fault, so
// zeMemGetAllocProperties on our context must know the allocation (type not UNKNOWN), it must be
// device or shared memory of this very device, and zeMemGetAddressRange must show every wrapped
// byte inside it. Anything else is refused with the reason.
#include "sharing.hpp"

#include <ravel/backend.hpp>

#include <cstdio>
#include <string>

#include "registry.hpp"

namespace rvl::l0 {
namespace {

const char* type_name(ze_memory_type_t t) {
  switch (t) {
    case ZE_MEMORY_TYPE_HOST: return "host USM";
    case ZE_MEMORY_TYPE_DEVICE: return "device USM";
    case ZE_MEMORY_TYPE_SHARED: return "shared USM";
    default: return "unknown";
  }
}

}  // namespace

rvl_error* buffer_address(const rvl_buffer* buffer, void** out) {
  return guard([&] {
    if (out == nullptr) invalid("buffer_address: output pointer is NULL");
    *out = lookup_buffer(buffer, "buffer_address")->ptr;  // a buffer is its whole block
  });
}

rvl_error* buffer_wrap(int32_t device, void* address, uint64_t bytes, void (*release)(void*),
                       void* context, rvl_buffer** out) {
  return guard([&] {
    if (out == nullptr) invalid("buffer_wrap: output pointer is NULL");
    if (release == nullptr) invalid("buffer_wrap: release is NULL");
    if (address == nullptr) invalid("buffer_wrap: address is NULL");
    if (bytes == 0) invalid("buffer_wrap: 0 bytes (a wrapped buffer has at least one)");
    DeviceState& dev = device_state(device);
    const std::string what = "buffer_wrap of " + std::to_string(bytes) + " bytes at " + address_str(address) +
                             " on level_zero:" + std::to_string(device);
    ze_memory_allocation_properties_t props{};
    props.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES;
    ze_device_handle_t owner = nullptr;
    ze_check(dev.ze.zeMemGetAllocProperties(dev.dev.context, address, &props, &owner),
             "zeMemGetAllocProperties");
    if (props.type == ZE_MEMORY_TYPE_UNKNOWN)
      invalid(what + ": the address is not a USM allocation of this plugin's Level Zero context "
              "(zeMemGetAllocProperties: ZE_MEMORY_TYPE_UNKNOWN); memory of another context or "
              "library cannot be shared, only copied");
    if (props.type != ZE_MEMORY_TYPE_DEVICE && props.type != ZE_MEMORY_TYPE_SHARED)
      invalid(what + ": the address is " + type_name(props.type) + " memory, not device memory");
    if (owner != dev.dev.handle)
      invalid(what + ": the allocation belongs to another device of the context");
    void* base = nullptr;
    size_t size = 0;
    ze_check(dev.ze.zeMemGetAddressRange(dev.dev.context, address, &base, &size), "zeMemGetAddressRange");
    const uint64_t start = uint64_t(static_cast<char*>(address) - static_cast<char*>(base));
    if (start > size || bytes > size - start)
      invalid(what + ": the bytes run past the end of their allocation (" + std::to_string(size) +
              " bytes at " + address_str(base) + ")");
    auto* b = new rvl_buffer{&dev, address, bytes, 0, release, context};
    try {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      r.buffers.insert(b);
    } catch (...) {
      delete b;  // release is not called for a call that failed
      throw;
    }
    *out = b;
  });
}

}  // namespace rvl::l0
