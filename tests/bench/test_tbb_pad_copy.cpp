// The oneTBB plugin's padding copies (plugins/tbb_cpu/pad_copy.cpp, Note [Padding copies] and
// Note [Padding rows as masked vectors]): x.pad(widths).contiguous() through the public API, bit
// for bit against the padding done on the host. Rows of 16 (the convolution's 14 + 2), of more
// than one 16-lane piece with the valid span crossing a piece (37 + (5, 12)), shorter than one
// piece, pads on outer axes only (whole rows of zeros), asymmetric and one-sided widths, a source
// read at an offset through a larger tensor (a slice), and f32, i32 (the vector path), f64 and
// f16 (the library calls); NaN payloads, -0.0 and infinities come through as bits. CMake runs
// this also with RAVEL_TBB_PAD_VECTORS=0 and with forced parallelism.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Tensor;

namespace {

using Widths = std::vector<std::pair<int64_t, int64_t>>;

struct PadCase {
  std::vector<int64_t> shape;  // of the source, before the slice below
  Widths pad;
  int64_t cut_front = 0;       // the source is x.slice(0, cut_front, shape[0]): a view at an offset
};

// The padded copy on the host, element by element (row-major over the padded shape).
template <class T>
std::vector<T> host_pad(const std::vector<T>& x, const std::vector<int64_t>& shape, const Widths& pad) {
  const size_t rank = shape.size();
  std::vector<int64_t> out_shape(rank);
  int64_t total = 1;
  for (size_t d = 0; d < rank; ++d) total *= out_shape[d] = shape[d] + pad[d].first + pad[d].second;
  std::vector<T> out(static_cast<size_t>(total), T{});
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t src = 0;
    bool inside = true;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t s = idx[d] - pad[d].first;
      inside = inside && s >= 0 && s < shape[d];
      src = src * shape[d] + s;
    }
    if (inside) out[static_cast<size_t>(i)] = x[static_cast<size_t>(src)];
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Distinct bit patterns for every element, with NaN payloads, -0.0 and infinities among them.
template <class Bits>
std::vector<Bits> patterns(int64_t n, const std::vector<Bits>& specials, Bits step) {
  std::vector<Bits> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = i < static_cast<int64_t>(specials.size()) ? specials[static_cast<size_t>(i)]
                                                                           : static_cast<Bits>(step * (i + 1));
  return v;
}

template <class T, class Bits>
void check(const PadCase& c, const std::vector<Bits>& specials, Bits step, Bits keep = static_cast<Bits>(~Bits{0})) {
  int64_t n = 1;
  for (int64_t s : c.shape) n *= s;
  std::vector<Bits> bits = patterns<Bits>(n, specials, step);
  for (size_t i = specials.size(); i < bits.size(); ++i) bits[i] &= keep;
  std::vector<T> values(bits.size());
  std::memcpy(static_cast<void*>(values.data()), bits.data(), bits.size() * sizeof(T));
  Tensor x = Tensor::from_vector<T>(values, c.shape).realize();
  std::vector<int64_t> shape = c.shape;
  std::vector<T> host = values;
  if (c.cut_front > 0) {
    x = x.slice(0, c.cut_front, c.shape[0]);
    shape[0] -= c.cut_front;
    host.erase(host.begin(), host.begin() + static_cast<int64_t>(values.size()) / c.shape[0] * c.cut_front);
  }
  const std::vector<T> want = host_pad(host, shape, c.pad);
  const std::vector<T> got = x.pad(c.pad).contiguous().template to_vector<T>();
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    Bits g, w;
    std::memcpy(&g, &got[i], sizeof(T));
    std::memcpy(&w, &want[i], sizeof(T));
    if (g != w) {
      BOOST_TEST(g == w, "element " << i << ": bits " << std::hex << +g << " want " << +w);
      return;  // one report per case
    }
  }
}

const std::vector<PadCase> kCases = {
    {{3, 4, 14, 14}, {{0, 0}, {0, 0}, {1, 1}, {1, 1}}, 0},    // the convolution's rows of 16
    {{130, 2, 14, 14}, {{0, 0}, {0, 0}, {1, 1}, {1, 1}}, 1},  // parallel chunks, at an offset
    {{2, 3, 9, 37}, {{0, 0}, {0, 0}, {2, 0}, {5, 12}}, 0},    // 54 wide: 4 pieces, valid span across them
    {{2, 3, 5, 16}, {{0, 0}, {1, 2}, {0, 0}, {16, 1}}, 1},    // a piece with no valid lane, outer pads
    {{4, 6, 7}, {{1, 1}, {0, 3}, {0, 0}}, 0},                 // outer axes only: whole rows of zeros
    {{5, 3}, {{0, 0}, {2, 11}}, 2},                           // rows of 16, offset source
    {{33}, {{7, 0}}, 0},                                      // rank 1: one row of 40
    {{2, 2, 3}, {{0, 0}, {0, 0}, {0, 1}}, 0},                 // rows of 4
};

void for_cases(const std::function<void(const PadCase&)>& f) {
  for (size_t i = 0; i < kCases.size(); ++i) BOOST_TEST_CONTEXT("case " << i) { f(kCases[i]); }
}

}  // namespace

BOOST_AUTO_TEST_CASE(f32_padding_copies_bit_for_bit) {
  const std::vector<uint32_t> specials = {0x7fc01234u, 0x80000000u, 0x7f800000u, 0xff800000u, 0xffc00001u, 0x00000001u};
  for_cases([&](const PadCase& c) { check<float, uint32_t>(c, specials, 0x00010003u); });
}

BOOST_AUTO_TEST_CASE(i32_padding_copies) {
  for_cases([&](const PadCase& c) { check<int32_t, uint32_t>(c, {0xffffffffu, 0x80000000u}, 7u); });
}

BOOST_AUTO_TEST_CASE(f64_and_f16_padding_copies) {
  const std::vector<uint64_t> d = {0x7ff8000000001234ull, 0x8000000000000000ull};
  for_cases([&](const PadCase& c) { check<double, uint64_t>(c, d, 0x0001000300000000ull); });
  const std::vector<uint16_t> h = {0x8000u, 0x7c00u, 0xfc00u};  // finite values below 1 after these
  for_cases([&](const PadCase& c) { check<ravel::Float16, uint16_t>(c, h, 3u, 0x3bffu); });
}
