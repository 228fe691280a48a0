// Copies between devices of one plugin (buffer_copy_peer, optional since ABI 1.5; backend.h has
// the contract): exact bytes between the device under test and every other device, in both
// directions, ordered after queued work and before later work on both devices without any
// synchronisation by the host, and bad arguments refused. Every case is skipped, saying why, when
// the plugin lacks the member or has a single device.
#include "device_buffers.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace rvl::conformance {
namespace {

const rvl_backend_api& api() { return *session().api; }

// The other devices the cases copy to and from (at most 3, so a big machine stays quick).
std::vector<int32_t> peers() {
  if (!RVL_CONF_HAS(api(), buffer_copy_peer))
    throw Skip("buffer_copy_peer is NULL or beyond the table (optional since ABI 1.5)");
  return other_devices(3, "a peer copy");
}

std::vector<uint8_t> pattern(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return v;
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
          DeviceBuffer src(from, total), dst(to, total);
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
      DeviceBuffer src(self, n * 4), dst(other, n * 4);
      for (int round = 1; round <= 2; ++round) {
        fill_f32(self, src.get(), n, static_cast<float>(round));
        check_ok(api().buffer_copy_peer(nullptr, src.get(), 0, nullptr, dst.get(), 0, n * 4), "buffer_copy_peer");
        fill_f32(self, src.get(), n, -1.0f);
        const std::vector<uint8_t> got = dst.read();
        expect(f32_at(got, 0) == static_cast<float>(round) && f32_at(got, n - 1) == static_cast<float>(round),
               "device " + std::to_string(other) + " read " + std::to_string(f32_at(got, n - 1)) +
                   " after the copy, expected " + std::to_string(round) + " (the copy is not ordered after the kernel, "
                   "or the later kernel overwrote the source before it was read)");
        expect(f32_at(src.read(), n / 2) == -1.0f, "the source was not overwritten after the copy");
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
    DeviceBuffer src(self, 4096), dst(other, 4096);
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
    DeviceBuffer a(self, 64), b(other, 64);
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
