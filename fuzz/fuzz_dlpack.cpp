// Fuzzes DLPack import (ravel::from_dlpack, core/src/runtime/dlpack.cpp): a DLManagedTensor(Versioned)
// whose rank, shape, strides, byte_offset, dtype, device and version come from the input. The
// producer's buffer has no size in DLPack, so the harness computes, in 128-bit arithmetic of its
// own, what the struct describes, and then:
//  - sizes, strides or offsets beyond Ravel's documented bounds (docs/interop.md): the import
//    must throw a ravel::Error and leave the deleter uncalled;
//  - a plausible tensor inside the harness's buffer: the import may succeed, and then every value
//    must be the one the harness reads through the same strides, and the deleter must run exactly
//    once, after the last tensor is gone; or throw, deleter uncalled;
//  - plausible but reaching outside the buffer (the producer would be lying): not imported.
// Any other outcome, another exception type, or a crash is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ravel/backend.h"
#include "ravel/dlpack.hpp"
#include "ravel/half.hpp"
#include "ravel/ravel.hpp"

namespace dl = ravel::dlpack;

namespace {

struct Bytes {  // the input, consumed front to back; zeros once it runs out
  const uint8_t* p;
  size_t n;
  uint64_t take(int width) {
    uint64_t v = 0;
    for (int i = 0; i < width; ++i) v = (v << 8) | (n ? (--n, *p++) : 0);
    return v;
  }
  // Mostly small values, sometimes an edge (0, -1, 2^31, 2^32, 2^39, 2^40, 2^62, 2^63 - 1, ...).
  int64_t extent() {
    const uint64_t sel = take(1);
    static const int64_t edges[] = {0, 1, -1, 2, int64_t{1} << 31, int64_t{1} << 32, (int64_t{1} << 39) - 1,
                                    int64_t{1} << 39, int64_t{1} << 40, int64_t{1} << 62, INT64_MAX, INT64_MIN};
    if (sel < 192) return static_cast<int64_t>(sel % 7) - (sel >= 176 ? 3 : 0);
    if (sel < 240) return edges[sel % (sizeof edges / sizeof edges[0])];
    return static_cast<int64_t>(take(8));
  }
};

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "dlpack fuzzer: %s\n", what);
  std::abort();
}

int deleted = 0;
alignas(64) double buffer[512];  // 4 KiB the producer owns

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  const uint64_t flags = in.take(1);
  const auto ndim = static_cast<int32_t>(static_cast<int8_t>(in.take(1)) % 12);  // -11..11
  const int32_t rank = ndim < 0 ? 0 : ndim;
  std::vector<int64_t> shape(static_cast<size_t>(rank) + 1), strides(static_cast<size_t>(rank) + 1);
  for (int32_t d = 0; d < rank; ++d) shape[d] = in.extent();
  for (int32_t d = 0; d < rank; ++d) strides[d] = in.extent();
  const bool null_strides = flags & 1, legacy = flags & 2, bad_dtype = (flags & 0x0C) == 0x0C;
  const bool other_device = (flags & 0x30) == 0x30, bad_version = (flags & 0xC0) == 0xC0;
  // Every dtype Ravel imports (ABI 1.7 added the 16-bit floats and the narrow and unsigned
  // integers); a bad one has 24 bits, which no DLPack code Ravel reads has.
  static const dl::DLDataType dtypes[] = {{dl::kDLFloat, 64, 1}, {dl::kDLFloat, 32, 1}, {dl::kDLInt, 32, 1},
                                          {dl::kDLInt, 64, 1},   {dl::kDLUInt, 8, 1},   {dl::kDLBool, 8, 1},
                                          {dl::kDLFloat, 16, 1}, {dl::kDLBfloat, 16, 1}, {dl::kDLInt, 8, 1},
                                          {dl::kDLInt, 16, 1},   {dl::kDLUInt, 16, 1},  {dl::kDLUInt, 32, 1},
                                          {dl::kDLUInt, 64, 1}};
  constexpr uint64_t kDTypes = sizeof dtypes / sizeof dtypes[0];
  const uint64_t dt = in.take(1);
  const dl::DLDataType dtype = bad_dtype ? dl::DLDataType{static_cast<uint8_t>(in.take(1)), 24, 1} : dtypes[dt % kDTypes];
  const int64_t es = dtype.bits / 8;
  const uint64_t off_sel = in.take(1);
  const uint64_t byte_offset = off_sel < 200 ? (off_sel % 64) * static_cast<uint64_t>(es)
                               : off_sel < 230 ? ~uint64_t{0} - (off_sel % 16) : in.take(8);
  const uint64_t start = in.take(2) % 4096;  // data's offset into the buffer, in bytes

  // The harness's own reading of the struct, in 128-bit arithmetic.
  const __int128 limit = __int128{1} << 40;
  bool beyond = rank != ndim;  // a negative rank is refused
  __int128 nonzero = 1, lo = 0, hi = 0;
  bool empty = false;
  std::vector<int64_t> eff = null_strides ? std::vector<int64_t>(shape.size(), 0) : strides;
  if (null_strides) {
    __int128 s = 1;
    for (int32_t d = rank; d-- > 0;) {
      eff[d] = s < limit ? static_cast<int64_t>(s) : 0;
      s *= shape[d] > 1 ? shape[d] : 1;
      if (s >= limit) s = limit;
    }
  }
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] < 0 || shape[d] >= limit) {
      beyond = true;
      continue;
    }
    if (shape[d] == 0) empty = true;
    else if ((nonzero *= shape[d]) >= limit) beyond = true, nonzero = limit;
  }
  if (rank > RVL_MAX_RANK) beyond = true;
  if (!beyond && !empty) {
    for (int32_t d = 0; d < rank; ++d) {
      if (eff[d] <= -limit || eff[d] >= limit) beyond = true;
      const __int128 reach = static_cast<__int128>(shape[d] - 1) * eff[d];
      if (reach <= -limit || reach >= limit) beyond = true;
      (reach < 0 ? lo : hi) += reach;
    }
    if (hi - lo >= limit || byte_offset >= (uint64_t{1} << 43)) beyond = true;
  }
  const __int128 first = static_cast<__int128>(start) + byte_offset;
  const bool inside = !beyond && (empty || (first + lo * es >= 0 && first + (hi + 1) * es <= __int128{sizeof buffer} &&
                                            nonzero <= 4096));
  if (!beyond && !inside && !bad_dtype && !other_device) return 0;  // a lying producer: not imported

  // Bytes 0x40..0x46: read at any alignment as f32 or f64 they are normal, finite numbers (no
  // NaN or denormal that a flush-to-zero mode could change), as integers anything.
  for (size_t i = 0; i < sizeof buffer; ++i) reinterpret_cast<unsigned char*>(buffer)[i] = static_cast<unsigned char>(0x40 + i % 7);
  dl::DLTensor t{reinterpret_cast<char*>(buffer) + start,
                 {other_device ? dl::kDLCUDA : dl::kDLCPU, 0},
                 ndim,
                 dtype,
                 rank ? shape.data() : nullptr,
                 null_strides ? nullptr : strides.data(),
                 byte_offset};
  dl::DLManagedTensorVersioned v{};
  dl::DLManagedTensor u{};
  v.version = {bad_version ? 2u : 1u, 0};
  v.deleter = [](dl::DLManagedTensorVersioned*) { ++deleted; };
  u.deleter = [](dl::DLManagedTensor*) { ++deleted; };
  v.dl_tensor = u.dl_tensor = t;
  deleted = 0;
  const bool must_fail = beyond || bad_dtype || other_device || (bad_version && !legacy);
  try {
    ravel::Tensor out = legacy ? ravel::from_dlpack(&u) : ravel::from_dlpack(&v);
    if (must_fail) finding("accepted a tensor beyond the documented bounds, a bad dtype or foreign memory");
    // The values, read by the harness through the same strides, in row-major order.
    std::vector<double> want;
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    for (__int128 k = 0; k < (empty ? 0 : nonzero); ++k) {
      __int128 at = first;
      for (int32_t d = 0; d < rank; ++d) at += static_cast<__int128>(idx[d]) * eff[d] * es;
      const char* p = reinterpret_cast<const char*>(buffer) + static_cast<size_t>(at);
      double x = 0;
      uint16_t h;
      switch (dt % kDTypes) {
        case 0: { double y; std::memcpy(&y, p, 8); x = y; break; }
        case 1: { float y; std::memcpy(&y, p, 4); x = y; break; }
        case 2: { int32_t y; std::memcpy(&y, p, 4); x = y; break; }
        case 3: { int64_t y; std::memcpy(&y, p, 8); x = static_cast<double>(y); break; }
        case 4: x = static_cast<uint8_t>(*p); break;
        case 5: x = *p != 0; break;
        case 6: std::memcpy(&h, p, 2); x = rvl::f32_from_f16_bits(h); break;
        case 7: std::memcpy(&h, p, 2); x = rvl::f32_from_bf16_bits(h); break;
        case 8: x = static_cast<int8_t>(*p); break;
        case 9: { int16_t y; std::memcpy(&y, p, 2); x = y; break; }
        case 10: std::memcpy(&h, p, 2); x = h; break;
        case 11: { uint32_t y; std::memcpy(&y, p, 4); x = y; break; }
        case 12: { uint64_t y; std::memcpy(&y, p, 8); x = static_cast<double>(y); break; }
      }
      want.push_back(x);
      for (int32_t d = rank; d-- > 0;)
        if (++idx[d] < shape[d]) break;
        else idx[d] = 0;
    }
    const std::vector<double> got = out.cast(ravel::DType::F64).to_vector<double>();
    for (size_t k = 0; k < want.size() && k < got.size(); ++k)
      if (got[k] != want[k]) finding("a value differs from the producer's");
    if (got.size() != want.size()) finding("the element count differs from the producer's");
    out = ravel::Tensor();
    if (deleted != 1) finding("the deleter did not run exactly once after a successful import");
  } catch (const ravel::Error&) {
    const int expected = bad_version && !legacy ? 1 : 0;  // the spec's one exception
    if (deleted != expected) finding("a failed import called the deleter (the caller owns it and calls it too)");
  }
  return 0;
}
