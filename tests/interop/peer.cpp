// A small C interface over Ravel's DLPack functions, loaded by torch_peer.py with ctypes: the
// Python side wraps what it returns in PyCapsules and hands them to PyTorch and NumPy, and gives
// it PyTorch's capsules to import. Plain C types only, so ctypes needs no headers.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <vector>
#include <exception>
#include <cstdio>

#include "ravel/dlpack.hpp"
#include "ravel/io.hpp"
#include "ravel/ravel.hpp"

namespace dl = ravel::dlpack;
using ravel::Tensor;

namespace {
int g_deleted = 0;                       // deleters of our exports that consumers called
Tensor g_imported;                       // what peer_import made, kept for peer_read

void (*g_ravel_deleter)(dl::DLManagedTensor*) = nullptr;
void counting_deleter(dl::DLManagedTensor* m) {
  ++g_deleted;
  g_ravel_deleter(m);
}

// The tensors the Python side checks against what it computes itself with torch.
Tensor make(int which) {
  Tensor x = Tensor::arange(0, 12, 1, ravel::DType::F32).reshape({3, 4});  // 0..11
  switch (which) {
    case 0: return x;                                                  // contiguous
    case 1: return x.transpose();                                      // strides (1, 4)
    case 2: return x.slice(1, 1, 4, 2);                                // strides (4, 2), offset 1
    case 3: return x.cast(ravel::DType::I64) * 3;                      // computed, int64
    case 4: return x.gt(Tensor::scalar(4.5));                          // bool
    case 5: return x.flip(1);                                          // a negative stride
    // The ABI 1.7 dtypes (kDLFloat 16, kDLBfloat 16, kDLInt 8/16, kDLUInt 16/32/64).
    case 6: return (x * 0.25 - 1.5).cast(ravel::DType::F16);           // exact in f16
    case 7: return (x * 0.25 - 1.5).cast(ravel::DType::BF16);          // exact in bf16
    case 8: return (x - 6.0).cast(ravel::DType::I8);
    case 9: return (x * 1000.0 - 6000.0).cast(ravel::DType::I16);
    case 10: return (x * 5000.0).cast(ravel::DType::U16);              // up to 55000: beyond i16
    case 11: return (x * 3.0e8).cast(ravel::DType::U32);               // up to 3.3e9: beyond i32
    case 12: {                                                         // beyond i64
      std::vector<uint64_t> v = {18446744073709551615ull, 0, 9223372036854775813ull, 7};
      return Tensor::from_data(v.data(), ravel::DType::U64, {2, 2});
    }
    default: return Tensor();
  }
}
}  // namespace

extern "C" {

// An unversioned DLManagedTensor* (PyTorch 1.13 reads "dltensor" capsules), or NULL after
// printing the error.
void* peer_export(int which) {
  try {
    dl::DLManagedTensor* m = ravel::to_dlpack(make(which));
    g_ravel_deleter = m->deleter;
    m->deleter = counting_deleter;
    return m;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peer_export(%d): %s\n", which, e.what());
    return nullptr;
  }
}

int peer_deleted() { return g_deleted; }

// What a capsule's destructor does with a DLManagedTensor no consumer took (the protocol).
void peer_delete(void* managed) {
  auto* m = static_cast<dl::DLManagedTensor*>(managed);
  m->deleter(m);
}

// Imports a DLManagedTensor* (from a "dltensor" capsule, which the caller then marks used).
// Returns 0, or -1 after printing the error (ownership then stays with the caller).
int peer_import(void* managed) {
  try {
    g_imported = ravel::from_dlpack(static_cast<dl::DLManagedTensor*>(managed));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peer_import: %s\n", e.what());
    return -1;
  }
}

// The imported tensor's values as float64, row-major, into out[0..n); returns its numel.
int64_t peer_read(double* out, int64_t n) {
  auto v = g_imported.to_vector<double>();
  for (int64_t i = 0; i < n && i < static_cast<int64_t>(v.size()); ++i) out[i] = v[static_cast<size_t>(i)];
  return static_cast<int64_t>(v.size());
}

// The imported tensor's dtype name ("f16", "bf16", ...).
const char* peer_dtype() { return ravel::dtype_name(g_imported.dtype()); }

void peer_drop() { g_imported = Tensor(); }

// Writes what np.load must read: an archive of make(0), make(3), make(4) as "x", "i", "b", and
// the parameters of a small MLP as `params_path` (an .npz). Returns 0, or -1 after printing.
int peer_save_npz(const char* path, const char* params_path) {
  try {
    ravel::save_npz(path, {{"x", make(0)}, {"i", make(3)}, {"b", make(4)}});
    ravel::nn::MLP mlp({4, 8, 3}, ravel::nn::Activation::Tanh, 1);
    ravel::nn::save_parameters(mlp, params_path);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peer_save_npz: %s\n", e.what());
    return -1;
  }
}

// A PyCapsule destructor, as DLPack's Python protocol wants: a capsule still named "dltensor"
// was never consumed, so it still owns the tensor and gives it back. Written in C, not as a ctypes
// callback, because it runs during deallocation, possibly with an exception pending. The Python
// C API is found in the running interpreter with dlsym (no link-time dependency on libpython).
void peer_capsule_destructor(void* capsule) {
  using IsValid = int (*)(void*, const char*);
  using GetPointer = void* (*)(void*, const char*);
  static auto is_valid = reinterpret_cast<IsValid>(dlsym(RTLD_DEFAULT, "PyCapsule_IsValid"));
  static auto get_pointer = reinterpret_cast<GetPointer>(dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer"));
  if (is_valid && get_pointer && is_valid(capsule, "dltensor")) peer_delete(get_pointer(capsule, "dltensor"));
}

}  // extern "C"
