// ABI 1.2's optional members for memory shared with other libraries (DLPack in the core,
// docs/interop.md): a buffer's USM device pointer, and buffers over USM memory the plugin did not
// allocate. Freeing such a buffer (buffer_free, shutdown; plugin.cpp) calls its release callback.
#pragma once

#include <ravel/backend.h>

namespace rvl::l0 {

constexpr int32_t kDLOneAPI = 14;  // DLPack's DLDeviceType for oneAPI USM memory (ABI 1.3)

rvl_error* buffer_address(const rvl_buffer* buffer, void** out);
rvl_error* buffer_wrap(int32_t device, void* address, uint64_t bytes, void (*release)(void*),
                       void* context, rvl_buffer** out);

}  // namespace rvl::l0
