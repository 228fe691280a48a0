// Half products on the oneTBB plugin's small (unpacked) GEMM path (Note [Half operands of the
// small GEMM], plugins/tbb_cpu/gemm_small.cpp: A widened a block of rows at a time, B once, plain
// products rounded row by row into the output) must equal, bit for bit, the f32 product of the
// same values rounded once to the half: the f32 small path runs the same kernels on the same
// values in the same order. Shapes are the makemore ones and edges around the 6 x 16 tile, with
// transposed and strided operands and an epilogue; CMake runs it also with
// RAVEL_TBB_SIMD=portable and RAVEL_TBB_GEMM=avx2 and portable (other tiles and conversions).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
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

std::vector<float> values(DType t, int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = round_to(t, static_cast<float>(static_cast<int64_t>((s >> 33) % 2001) - 1000) / 700.0f);
  }
  return v;
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }

void check(const std::string& what, DType t, const Tensor& got, const Tensor& f32) {
  BOOST_TEST_REQUIRE((got.dtype() == t), what);
  got.realize();  // the half kernel output itself (a cast fused after it would not round)
  const std::vector<float> g = got.to_vector<float>(), r = f32.to_vector<float>();
  BOOST_TEST_REQUIRE(g.size() == r.size(), what);
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!same(g[i], round_to(t, r[i])) && bad++ < 3)
      BOOST_ERROR(what << ": element " << i << " = " << g[i] << ", want " << round_to(t, r[i]));
  BOOST_TEST(bad == 0, what << ": " << bad << " elements differ");
}

}  // namespace

BOOST_AUTO_TEST_CASE(small_half_products_equal_the_f32_product_rounded_once) {
  struct Mkn {
    int64_t m, k, n;
  };
  for (DType t : {DType::BF16, DType::F16}) {
    const std::string tn = t == DType::BF16 ? " bf16" : " f16";
    uint64_t seed = 5;
    for (const Mkn s : {Mkn{64, 30, 200}, Mkn{64, 200, 27}, Mkn{7, 33, 17}, Mkn{13, 5, 16}, Mkn{6, 64, 33}, Mkn{1, 70, 40}}) {
      const std::string sz = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) + tn;
      const Tensor af = Tensor::from_vector<float>(values(t, s.m * s.k, ++seed), {s.m, s.k});
      const Tensor bf = Tensor::from_vector<float>(values(t, s.k * s.n, ++seed), {s.k, s.n});
      const Tensor a = af.cast(t), b = bf.cast(t);
      a.realize(), b.realize();
      check(sz, t, a.matmul(b), af.matmul(bf));
      // Transposed operands (A k-major, B n-major: read element by element) and a strided B.
      const Tensor at = af.transpose().contiguous().cast(t), bt = bf.transpose().contiguous().cast(t);
      at.realize(), bt.realize();
      const Tensor atf = af.transpose().contiguous(), btf = bf.transpose().contiguous();
      check(sz + " A^T B^T", t, at.transpose().matmul(bt.transpose()), atf.transpose().matmul(btf.transpose()));
      const Tensor b2f = Tensor::from_vector<float>(values(t, s.k * 2 * s.n, ++seed), {s.k, 2 * s.n});
      const Tensor b2 = b2f.cast(t);
      b2.realize();
      check(sz + " B every other column", t, a.matmul(b2.slice(1, 0, std::nullopt, 2)),
            af.matmul(b2f.slice(1, 0, std::nullopt, 2)));
      // An epilogue (through the evaluator, not the row rounding) that commutes with rounding,
      // so the reference holds whether or not the schedule fuses it: 2 (a @ b).
      check(sz + " 2x epilogue", t, a.matmul(b) * 2.0, af.matmul(bf) * 2.0);
    }
  }
}
