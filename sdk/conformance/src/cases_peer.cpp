// Copies between devices of one plugin (buffer_copy_peer, optional since ABI 1.5; backend.h has
// the contract): exact bytes between the device under test and every other device, in both
// directions, ordered after queued work and before later work on both devices without any
// synchronisation by the host, and bad arguments refused. Every case is skipped, saying why, when
// the plugin lacks the member or has a single device.
#include "kernel_case.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace rvl::conformance {
namespace {

const rvl_backend_api& api() { return *session().api; }

void expect(bool cond, const std::string& what) {
  if (!cond) throw Failure(what);
}

// The other devices the cases copy to and from (at most 3, so a big machine stays quick).
std::vector<int32_t> peers() {
  if (!RVL_CONF_HAS(api(), buffer_copy_peer))
    throw Skip("buffer_copy_peer is NULL or beyond the table (optional since ABI 1.5)");
  int32_t n = 0;
  check_ok(api().device_count(&n), "device_count");
  std::vector<int32_t> out;
  for (int32_t d = 0; d < n && out.size() < 3; ++d)
    if (d != session().device) out.push_back(d);
  if (out.empty())
    throw Skip("the plugin has one device; peer copies need two (RAVEL_TBB_DEVICES, RAVEL_HIP_EMU_DEVICES, "
               "ZECL_DEVICES give test devices)");
  return out;
}

// A buffer on any device, freed at the end of the scope.
class Buffer {
 public:
  Buffer(int32_t device, uint64_t bytes) : bytes_(bytes) {
    check_ok(api().buffer_allocate(device, bytes ? bytes : 1, &b_), "buffer_allocate on device " + std::to_string(device));
  }
  ~Buffer() { take_error(api().buffer_free(b_)); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  rvl_buffer* get() const { return b_; }
  void write(const std::vector<uint8_t>& bytes) {
    check_ok(api().buffer_write(nullptr, b_, 0, bytes.data(), bytes.size()), "buffer_write");
  }
  std::vector<uint8_t> read() const {
    std::vector<uint8_t> out(bytes_);
    check_ok(api().buffer_read(nullptr, b_, 0, out.data(), out.size()), "buffer_read");
    return out;
  }

 private:
  rvl_buffer* b_ = nullptr;
  uint64_t bytes_;
};

std::vector<uint8_t> pattern(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

// Fills `n` f32 elements of `b` on `device` with `value` through a kernel (queued work).
void fill_kernel(int32_t device, rvl_buffer* b, int64_t n, float value) {
  rvl_instruction c{};
  c.op = RVL_OP_CONST;
  c.dtype = RVL_DTYPE_F32;
  c.src[0] = c.src[1] = c.src[2] = -1;
  c.value.f = value;
  rvl_program p{};
  p.struct_size = sizeof p;
  p.rank = 1;
  p.shape[0] = n;
  p.n_instructions = 1;
  p.instructions = &c;
  p.output.struct_size = sizeof p.output;
  p.output.buffer = b;
  p.output.dtype = RVL_DTYPE_F32;
  p.output.view.struct_size = sizeof p.output.view;
  p.output.view.strides[0] = 1;
  p.output.view.valid_hi[0] = n;
  check_ok(api().execute_program(device, nullptr, &p), "execute_program on device " + std::to_string(device));
}

float first_float(const std::vector<uint8_t>& bytes, size_t at) {
  float f;
  std::memcpy(&f, bytes.data() + at * 4, 4);
  return f;
}

}  // namespace

void register_peer_cases() {
  add_case("peer", "exact_both_directions", [](Measure&) {
    const int32_t self = session().device;
    uint32_t seed = 1;
    for (int32_t other : peers())
      for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{13}, uint64_t{65536 + 7}})
        for (auto [from, to] : {std::pair{self, other}, std::pair{other, self}}) {
          const std::string what = "device " + std::to_string(from) + " -> " + std::to_string(to) + ", " +
                                   std::to_string(bytes) + " bytes at odd offsets";
          const uint64_t total = bytes + 16;
          const std::vector<uint8_t> data = pattern(total, seed++), old = pattern(total, seed++);
          Buffer src(from, total), dst(to, total);
          src.write(data);
          dst.write(old);
          check_ok(api().buffer_copy_peer(nullptr, src.get(), 3, nullptr, dst.get(), 5, bytes), what);
          std::vector<uint8_t> want = old;
          std::copy(data.begin() + 3, data.begin() + 3 + static_cast<std::ptrdiff_t>(bytes), want.begin() + 5);
          expect(dst.read() == want, what + ": the destination differs (copied range or its surroundings)");
        }
  });
  add_case("peer", "ordered_without_host_synchronisation", [](Measure&) {
    // A kernel writes the source, the copy follows, a kernel overwrites the source: the
    // destination has the first kernel's values and the source the second's.
    constexpr int64_t n = 1 << 18;
    const int32_t self = session().device;
    for (int32_t other : peers()) {
      Buffer src(self, n * 4), dst(other, n * 4);
      for (int round = 1; round <= 2; ++round) {
        fill_kernel(self, src.get(), n, static_cast<float>(round));
        check_ok(api().buffer_copy_peer(nullptr, src.get(), 0, nullptr, dst.get(), 0, n * 4), "buffer_copy_peer");
        fill_kernel(self, src.get(), n, -1.0f);
        const std::vector<uint8_t> got = dst.read();
        expect(first_float(got, 0) == static_cast<float>(round) && first_float(got, n - 1) == static_cast<float>(round),
               "device " + std::to_string(other) + " read " + std::to_string(first_float(got, n - 1)) +
                   " after the copy, expected " + std::to_string(round) + " (the copy is not ordered after the kernel, "
                   "or the later kernel overwrote the source before it was read)");
        expect(first_float(src.read(), n / 2) == -1.0f, "the source was not overwritten after the copy");
      }
    }
  });
  add_case("peer", "streams_of_each_device", [](Measure&) {
    const int32_t self = session().device;
    const int32_t other = peers().front();
    rvl_stream* mine = nullptr;
    rvl_stream* theirs = nullptr;
    check_ok(api().stream_create(self, &mine), "stream_create");
    check_ok(api().stream_create(other, &theirs), "stream_create");
    Buffer src(self, 4096), dst(other, 4096);
    src.write(pattern(4096, 77));
    check_ok(api().buffer_copy_peer(mine, src.get(), 0, theirs, dst.get(), 0, 4096), "copy on explicit streams");
    check_ok(api().stream_synchronize(theirs), "stream_synchronize");
    expect(dst.read() == pattern(4096, 77), "copy on explicit streams");
    // Each stream must belong to its buffer's device.
    check_error(api().buffer_copy_peer(theirs, src.get(), 0, mine, dst.get(), 0, 16), RVL_STATUS_INVALID_ARGUMENT,
                "buffer_copy_peer with the streams swapped");
    check_ok(api().stream_destroy(mine), "stream_destroy");
    check_ok(api().stream_destroy(theirs), "stream_destroy");
  });
  add_case("peer", "bad_arguments", [](Measure&) {
    const int32_t self = session().device;
    const int32_t other = peers().front();
    Buffer a(self, 64), b(other, 64);
    check_error(api().buffer_copy_peer(nullptr, a.get(), 60, nullptr, b.get(), 0, 8), RVL_STATUS_INVALID_ARGUMENT,
                "a source range beyond the buffer");
    check_error(api().buffer_copy_peer(nullptr, a.get(), 0, nullptr, b.get(), 57, 8), RVL_STATUS_INVALID_ARGUMENT,
                "a destination range beyond the buffer");
    check_error(api().buffer_copy_peer(nullptr, a.get(), 0, nullptr, a.get(), 4, 8), RVL_STATUS_INVALID_ARGUMENT,
                "overlapping ranges of one buffer");
    check_error(api().buffer_copy_peer(nullptr, nullptr, 0, nullptr, b.get(), 0, 8), RVL_STATUS_INVALID_ARGUMENT,
                "a NULL source");
    check_error(api().buffer_copy_peer(nullptr, a.get(), 0, nullptr, nullptr, 0, 8), RVL_STATUS_INVALID_ARGUMENT,
                "a NULL destination");
  });
}

}  // namespace rvl::conformance
