// DLPack: tensors shared with PyTorch, JAX, CuPy, NumPy, TensorFlow... without copying
// (docs/interop.md has the conventions and the ownership rules).
//
// The structs below are declared here, in namespace ravel::dlpack, with the layout of the DLPack
// 1.x ABI (dlpack.h from github.com/dmlc/dlpack; Debian 12 ships only 0.6, which lacks the
// versioned struct). They are ABI-compatible with the upstream declarations: a program that
// includes dlpack.h converts pointers with reinterpret_cast. Living in our namespace, they never
// clash with it.
#pragma once

#include <cstdint>
#include <optional>

#include "ravel/tensor.hpp"

namespace ravel::dlpack {

inline constexpr uint32_t kMajorVersion = 1;  // what this header declares and export produces
inline constexpr uint32_t kMinorVersion = 1;

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

enum DLDeviceType : int32_t {  // a C enum: int-sized
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

struct DLDataType {
  uint8_t code;   // DLDataTypeCode
  uint8_t bits;
  uint16_t lanes;  // 1 for scalar types
};

struct DLTensor {
  void* data;  // with byte_offset, the first element, in `device`'s address space
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;    // ndim entries
  int64_t* strides;  // ndim entries, in elements; NULL means compact row-major
  uint64_t byte_offset;
};

// The unversioned ("legacy") managed tensor, PyCapsule name "dltensor".
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

inline constexpr uint64_t kFlagReadOnly = 1ull << 0;  // the consumer must not write
inline constexpr uint64_t kFlagIsCopied = 1ull << 1;  // the producer made a copy for this export
inline constexpr uint64_t kFlagIsSubbyteTypePadded = 1ull << 2;

// The versioned managed tensor (DLPack >= 1.0), PyCapsule name "dltensor_versioned".
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4);
static_assert(sizeof(DLTensor) == 48 && sizeof(DLManagedTensor) == 64 && sizeof(DLManagedTensorVersioned) == 80,
              "the DLPack ABI layout on LP64");

}  // namespace ravel::dlpack

namespace ravel {

// Export without copying: realizes `t` and describes its buffer (its view's shape, strides and
// offset) to the consumer, who must call `deleter` exactly once when done; until then the buffer
// stays alive even if every Ravel tensor on it is gone. Ravel never writes into a realized
// buffer, and the consumer must not either (the versioned form says so with kFlagReadOnly).
// A view with padding (pad, or a padded eye) has no strided form: its values are copied first
// (kFlagIsCopied). The device must let its buffers be addressed (ABI 1.2 buffer_address) and say
// what they are (ABI 1.3 dlpack_device_type): tbb_cpu exports kDLCPU, HIP kDLROCM (AMD) or
// kDLCUDA (NVIDIA), Level Zero kDLOneAPI; otherwise DeviceError naming the device; move the
// tensor with .to(...) first. The device is synchronised first: the consumer may read at once.
dlpack::DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t);
dlpack::DLManagedTensor* to_dlpack(const Tensor& t);

// Import. On success Ravel owns `managed` and calls its deleter exactly once, when the last
// tensor reading the memory is gone (possibly right away, if the data had to be copied); on
// error (a typed ravel::Error) ownership stays with the caller. Host memory (kDLCPU,
// kDLCUDAHost, kDLROCMHost) is shared, not copied, when `device` (default: the default device)
// is a host-memory device that can wrap it (ABI 1.2 buffer_wrap) and every element is aligned to
// its size; strides of any sign, including 0, are kept as a view. Otherwise the values are
// copied onto `device`. Device memory (kDLCUDA, kDLROCM, kDLOneAPI...) is shared only with the
// device that reports exactly that memory (ABI 1.3) and whose plugin accepts the pointer (with
// no `device`, that device is the target); on any other device it is a DeviceError naming the
// device that owns it (never copied: use .to()).
// Dtypes other than Ravel's are a DTypeError. A versioned tensor of a major version other than
// 1 is a ValueError after Ravel called its deleter, as the spec says.
Tensor from_dlpack(dlpack::DLManagedTensorVersioned* managed, std::optional<Device> device = {});
Tensor from_dlpack(dlpack::DLManagedTensor* managed, std::optional<Device> device = {});

}  // namespace ravel
