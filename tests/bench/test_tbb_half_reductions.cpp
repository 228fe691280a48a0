// Half reductions on the oneTBB plugin through the public API (Note [Widening in the fold],
// plugins/tbb_cpu/half_fold.cpp: the fold widens f16/bf16 values in registers). Each sum, max and
// product of a bf16 or f16 matrix must equal, bit for bit, the same reduction of an f32 matrix
// holding the same (widened) values rounded once to the half (the f32 fold adds in the same
// order), and each sum must lie within an order-independent bound of a sum in double. Layouts:
// rows (many outputs), one long row (the reduced range split across threads), columns (sum(0):
// rows of outputs, also with few outputs), a strided and a transposed view, lengths around the
// 16-lane and 1,024-element blocks, rows of whole blocks (two rows per fold) and an offset view. CMake runs it also with RAVEL_TBB_SIMD=portable and avx2 and
// with forced parallelism.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <ravel/half.hpp>

#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;

namespace {

float round_to(DType t, float x) {
  return t == DType::BF16 ? rvl::f32_from_bf16_bits(rvl::bf16_bits_from(x)) : rvl::f32_from_f16_bits(rvl::f16_bits_from(x));
}

// Values exact in the half dtype, near ±1 (products of a few hundred stay finite), with NaN,
// infinities and signed zeros every few elements when `specials`.
std::vector<float> half_values(DType t, int64_t n, uint64_t seed, bool specials) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f};
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t r = s >> 33;
    const float y = static_cast<float>(static_cast<int64_t>(r % 2001) - 1000) / 4000.0f + ((r >> 12) % 2 ? 1.0f : -1.0f);
    x = round_to(t, specials && r % 29 == 0 ? special[(r / 29) % 5] : y);
  }
  return v;
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }

void check(const std::string& what, DType t, const Tensor& got_half, const Tensor& f32_result) {
  BOOST_TEST_REQUIRE((got_half.dtype() == t), what);
  got_half.realize();  // the half kernel output itself (a cast fused after it would not round)
  const std::vector<float> got = got_half.to_vector<float>(), ref = f32_result.to_vector<float>();
  BOOST_TEST_REQUIRE(got.size() == ref.size(), what);
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!same(got[i], round_to(t, ref[i])) && bad++ < 3)
      BOOST_ERROR(what << ": element " << i << " = " << got[i] << ", want " << round_to(t, ref[i]));
  BOOST_TEST(bad == 0, what << ": " << bad << " elements differ");
}

// The sums of `x` (rows x cols, row-major values v) along `axis` against double sums: within
// n 2^-24 sum|x| (any f32 order) plus the final rounding to the half.
void check_sum_bound(const std::string& what, DType t, const Tensor& got, const std::vector<float>& v, int64_t rows,
                     int64_t cols, int axis) {
  got.realize();
  const std::vector<float> g = got.to_vector<float>();
  const double unit = t == DType::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  const int64_t outs = axis == 1 ? rows : cols, n = axis == 1 ? cols : rows;
  int64_t bad = 0;
  for (int64_t o = 0; o < outs; ++o) {
    double exact = 0, mag = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double x = v[static_cast<size_t>(axis == 1 ? o * cols + k : k * cols + o)];
      exact += x, mag += std::fabs(x);
    }
    const double err = std::fabs(g[static_cast<size_t>(o)] - exact);
    if (!(err <= unit * std::fabs(exact) * 1.01 + static_cast<double>(n) * std::ldexp(1.0, -24) * mag) && bad++ < 3)
      BOOST_ERROR(what << ": output " << o << " = " << g[static_cast<size_t>(o)] << ", exact " << exact);
  }
  BOOST_TEST(bad == 0, what);
}

}  // namespace

BOOST_AUTO_TEST_CASE(half_reductions_equal_the_f32_reduction_of_the_widened_values) {
  struct Shape2 {
    int64_t rows, cols;
  };
  const Shape2 shapes[] = {{64, 4096}, {300, 33}, {7, 1025}, {2, 70001}, {1, 100000}, {5000, 3}, {129, 1000}, {40, 17},
                           // Note [Two rows per fold]: rows a whole number of blocks long, an odd
                           // count (the last row alone), a pair only, one row only.
                           {9, 2048}, {2, 1024}, {1, 4096}, {33, 1024}};
  for (DType t : {DType::BF16, DType::F16}) {
    const std::string tn = t == DType::BF16 ? "bf16 " : "f16 ";
    uint64_t seed = 3;
    for (const Shape2& s : shapes) {
      const std::string sz = " [" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "]";
      for (bool specials : {false, true}) {
        const std::vector<float> v = half_values(t, s.rows * s.cols, ++seed, specials);
        const Tensor xf = Tensor::from_vector<float>(v, {s.rows, s.cols});
        const Tensor x = xf.cast(t);
        x.realize();  // a half tensor in memory: the reduction reads 2-byte values
        const std::string sp = specials ? " (specials)" : "";
        for (int axis : {1, 0}) {
          const std::string ax = axis == 1 ? "sum(1)" : "sum(0)";
          check(tn + ax + sz + sp, t, x.sum(axis), xf.sum(axis));
          check(tn + "max(" + std::to_string(axis) + ")" + sz + sp, t, x.max(axis), xf.max(axis));
          if (!specials) check_sum_bound(tn + ax + sz + " against double", t, x.sum(axis), v, s.rows, s.cols, axis);
        }
        if (s.cols <= 1025) check(tn + "prod(1)" + sz + sp, t, x.prod(1), xf.prod(1));
        // Views that are not dense: every other column (loaded through segments) and the
        // transpose (the reduced axis strided).
        check(tn + "strided sum(1)" + sz + sp, t, x.slice(1, 0, std::nullopt, 2).sum(1), xf.slice(1, 0, std::nullopt, 2).sum(1));
        check(tn + "transposed sum(1)" + sz + sp, t, x.transpose().sum(1), xf.transpose().sum(1));
        // Dense rows at an offset (the view's first row dropped): the two-row fold reads the
        // input from its offset.
        if (s.rows > 1)
          check(tn + "offset sum(1)" + sz + sp, t, x.slice(0, 1, std::nullopt, 1).sum(1), xf.slice(0, 1, std::nullopt, 1).sum(1));
        // The half computed in the same kernel (LOAD f32, CAST to the half, CAST back, fold): the
        // fold widens a slot, not a loaded array (the values are exact in the half, so equal).
        check(tn + "sum(1) of a cast" + sz + sp, t, xf.cast(t).sum(1), xf.sum(1));
      }
    }
  }
}
