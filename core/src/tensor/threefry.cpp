#include "tensor/threefry.hpp"

#include <cstddef>

namespace ravel::detail {

namespace {
inline uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
}  // namespace

void threefry2x32(uint32_t k0, uint32_t k1, uint32_t& c0, uint32_t& c1) {
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  uint32_t x0 = c0 + ks[0], x1 = c1 + ks[1];
  for (int round = 0; round < 20; ++round) {
    x0 += x1;
    x1 = rotl(x1, kRotations[round % 8]);
    x1 ^= x0;
    if (round % 4 == 3) {  // key injection every 4 rounds
      int s = round / 4 + 1;
      x0 += ks[s % 3];
      x1 += ks[(s + 1) % 3] + static_cast<uint32_t>(s);
    }
  }
  c0 = x0;
  c1 = x1;
}

std::vector<double> uniform_threefry(uint64_t seed, int64_t n, bool wide) {
  std::vector<double> out(static_cast<std::size_t>(n));
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t c0 = static_cast<uint32_t>(i), c1 = static_cast<uint32_t>(static_cast<uint64_t>(i) >> 32);
    threefry2x32(k0, k1, c0, c1);
    if (wide) {
      uint64_t bits = (static_cast<uint64_t>(c0) << 32 | c1) >> 11;  // 53 bits
      out[i] = static_cast<double>(bits) * 0x1.0p-53;
    } else {
      out[i] = static_cast<double>(c0 >> 8) * 0x1.0p-24;  // 24 bits: exact in f32
    }
  }
  return out;
}

}  // namespace ravel::detail
