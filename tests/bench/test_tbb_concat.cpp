// The oneTBB plugin's concatenations (plugins/tbb_cpu/concat_copy.cpp, Note [Concatenations]):
// tensors laid end to end as the core's join does it (a chain of WHEREs over masked views),
// through the public API, bit for bit against the concatenation done on the host: -0.0, NaN
// payloads and infinities must come through as bits, gaps are zeros, a mask whose value is false
// selects the other branch, a later piece overrides an earlier one where they overlap, and the
// sizes reach the parallel path. CMake runs this also with forced parallelism
// (RAVEL_TBB_INLINE_WORK=0).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;

namespace {

// What the core's join builds (core/src/tensor/sharded.cpp): piece k padded to [at_k, at_k + len)
// of `total`, selected by a padded boolean of value `keep_k`, over the pieces before it.
Tensor chain(const std::vector<Tensor>& pieces, const std::vector<int64_t>& at, int64_t total,
             const std::vector<bool>& keep) {
  Tensor out;
  for (size_t k = 0; k < pieces.size(); ++k) {
    const int64_t len = pieces[k].numel();
    const std::vector<std::pair<int64_t, int64_t>> w{{at[k], total - at[k] - len}};
    const Tensor padded = pieces[k].pad(w);
    const Tensor mask = (keep[k] ? Tensor::ones({len}, DType::Bool) : Tensor::zeros({len}, DType::Bool)).pad(w);
    out = out.defined() ? Tensor::where(mask, padded, out) : padded;
  }
  return out;
}

// The same on the host.
template <class T>
std::vector<T> host_chain(const std::vector<std::vector<T>>& pieces, const std::vector<int64_t>& at, int64_t total,
                          const std::vector<bool>& keep) {
  std::vector<T> out(static_cast<size_t>(total), T{});
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (k > 0 && !keep[k]) continue;  // the first piece has no mask: zeros outside it
    for (size_t i = 0; i < pieces[k].size(); ++i) out[static_cast<size_t>(at[k]) + i] = pieces[k][i];
  }
  return out;
}

std::vector<float> floats(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 8.0f;
  }
  return v;
}

template <class T>
void check_bits(const Tensor& got, const std::vector<T>& want) {
  const std::vector<T> g = got.to_vector<T>();
  BOOST_REQUIRE_EQUAL(g.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (std::memcmp(&g[i], &want[i], sizeof(T)) != 0 && bad++ < 5)
      BOOST_ERROR("element " << i << ": " << +g[i] << " against " << +want[i]);
  BOOST_TEST(bad == 0u);
}

void check_f32(const std::vector<std::vector<float>>& pieces, const std::vector<int64_t>& at, int64_t total,
               const std::vector<bool>& keep) {
  std::vector<Tensor> ts;
  for (const auto& p : pieces) ts.push_back(Tensor::from_vector(p, {static_cast<int64_t>(p.size())}));
  check_bits(chain(ts, at, total, keep), host_chain(pieces, at, total, keep));
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_gradient_bucket_is_its_pieces_bit_for_bit) {
  // makemore's bucket (Note [Replica gradient buckets]): 270, 6000, 200, 5400 and 27 floats.
  const std::vector<int64_t> lens{270, 6000, 200, 5400, 27};
  std::vector<std::vector<float>> pieces;
  std::vector<int64_t> at;
  int64_t total = 0;
  for (size_t k = 0; k < lens.size(); ++k) {
    pieces.push_back(floats(lens[k], static_cast<uint32_t>(k)));
    at.push_back(total);
    total += lens[k];
  }
  uint32_t nan_bits = 0x7fc01234u;
  float nan;
  std::memcpy(&nan, &nan_bits, sizeof nan);
  pieces[1][0] = -0.0f, pieces[1][1] = nan, pieces[1][2] = -std::numeric_limits<float>::infinity();
  pieces[4][26] = -0.0f, pieces[0][0] = std::numeric_limits<float>::denorm_min();
  check_f32(pieces, at, total, std::vector<bool>(lens.size(), true));
}

BOOST_AUTO_TEST_CASE(gaps_false_masks_and_overlaps) {
  const auto a = floats(10, 1), b = floats(10, 2), c = floats(15, 3);
  check_f32({a, b}, {0, 20}, 40, {true, true});                   // zeros in [10, 20) and [30, 40)
  check_f32({a, b}, {5, 25}, 40, {true, true});                   // the first piece does not start at 0
  check_f32({a, b, c}, {0, 10, 20}, 35, {true, false, true});     // b's mask is false: not taken
  check_f32({a, c, b}, {0, 5, 12}, 30, {true, true, true});       // each later piece wins its overlap
  check_f32({a, b}, {0, 10}, 20, {true, false});                  // the last mask false: a alone
}

BOOST_AUTO_TEST_CASE(other_dtypes_and_the_parallel_path) {
  std::vector<int64_t> i1(3000), i2(5000);
  for (size_t i = 0; i < i1.size(); ++i) i1[i] = static_cast<int64_t>(i) * 7 - (int64_t{1} << 40);
  for (size_t i = 0; i < i2.size(); ++i) i2[i] = -static_cast<int64_t>(i) * 3;
  const Tensor ti = chain({Tensor::from_vector(i1, {3000}), Tensor::from_vector(i2, {5000})}, {0, 3000}, 8000,
                          {true, true});
  check_bits(ti, host_chain<int64_t>({i1, i2}, {0, 3000}, 8000, {true, true}));

  std::vector<uint8_t> u1(100, 7), u2(50, 200);
  const Tensor tu = chain({Tensor::from_vector(u1, {100}), Tensor::from_vector(u2, {50})}, {0, 120}, 170, {true, true});
  check_bits(tu, host_chain<uint8_t>({u1, u2}, {0, 120}, 170, {true, true}));

  // 3 x 700k floats: more work than the inline threshold (Note [Inline small kernels]).
  const int64_t n = 700000;
  check_f32({floats(n, 4), floats(n, 5), floats(n, 6)}, {0, n, 2 * n}, 3 * n, {true, true, true});
}
