// The oneTBB plugin's AVX512-BF16 GEMM family (RAVEL_TBB_GEMM=avx512bf16, Note [BF16
// dot-product family] in plugins/tbb_cpu/gemm_bf16_dot.cpp) through the public API: bf16
// products against a double GEMM of the same (exact) bf16 values, within f32 accumulation's
// error bound plus the output's rounding to bf16 (the family adds pairs of products before
// accumulating, so its bits are not the default path's). Shapes take the blocked path (above
// the unpacked path's 2^20 multiply-adds) with odd K (a padded last pair), edge tiles, transposed
// A and B (the pair packers' other layouts), a batch and a fused epilogue. One case checks that
// the family ran at all: a subnormal bf16 input is flushed to zero by vdpbf16ps and kept by the
// default path. CTest runs it with RAVEL_TBB_GEMM=avx512bf16; on a CPU without AVX512-BF16 it
// exits with 77, which CTest reports as skipped.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ravel/half.hpp>

#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;

namespace {

float bf16(float x) { return rvl::f32_from_bf16_bits(rvl::bf16_bits_from(x)); }

std::vector<float> values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = bf16(static_cast<float>(static_cast<int64_t>((s >> 33) % 2001) - 1000) / 500.0f);
  }
  return v;
}

void skip_without_avx512bf16() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bf16")) {
    std::printf("SKIP: this CPU has no AVX512-BF16; the avx512bf16 GEMM family cannot run here\n");
    std::fflush(stdout);
    std::_Exit(77);
  }
  const char* env = std::getenv("RAVEL_TBB_GEMM");
  BOOST_TEST_REQUIRE((env != nullptr && std::string(env) == "avx512bf16"), "run with RAVEL_TBB_GEMM=avx512bf16");
}

// got (m x n, bf16 read as f32) against the double product of a (m x k) and b (k x n), row-major
// values: |got - ref| <= 2^-8 |ref| (the output's rounding) + k 2^-23 sum |a b| (f32 sums).
void check(const std::string& what, const Tensor& got_t, const std::vector<float>& a, const std::vector<float>& b,
           int64_t m, int64_t k, int64_t n, int64_t batches = 1) {
  got_t.realize();  // the bf16 kernel output itself (a cast fused after it would not round)
  const std::vector<float> got = got_t.to_vector<float>();
  BOOST_TEST_REQUIRE(static_cast<int64_t>(got.size()) == batches * m * n, what);
  int64_t bad = 0;
  for (int64_t q = 0; q < batches; ++q)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = double(a[static_cast<size_t>((q * m + i) * k + p)]) * b[static_cast<size_t>((q * k + p) * n + j)];
          ref += x, mag += std::fabs(x);
        }
        const double g = got[static_cast<size_t>((q * m + i) * n + j)];
        if (!(std::fabs(g - ref) <= std::ldexp(std::fabs(ref), -8) + double(k) * std::ldexp(mag, -23)) && bad++ < 3)
          BOOST_ERROR(what << ": [" << q << "," << i << "," << j << "] = " << g << ", want " << ref);
      }
  BOOST_TEST(bad == 0, what << ": " << bad << " outside the bound");
}

}  // namespace

BOOST_AUTO_TEST_CASE(bf16_dot_family_products_are_within_f32_accumulation_of_a_double_gemm) {
  skip_without_avx512bf16();
  struct Case {
    int64_t m, k, n;
  };
  for (const Case c : {Case{130, 201, 70}, Case{64, 1024, 96}, Case{300, 64, 129}, Case{37, 1999, 33}}) {
    const std::string tag = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n);
    const std::vector<float> a = values(c.m * c.k, 1 + c.m), b = values(c.k * c.n, 2 + c.n);
    const Tensor ta = Tensor::from_vector<float>(a, {c.m, c.k}).cast(DType::BF16);
    const Tensor tb = Tensor::from_vector<float>(b, {c.k, c.n}).cast(DType::BF16);
    check(tag, ta.matmul(tb), a, b, c.m, c.k, c.n);
    // Transposed operands: A stored k-major, B stored n-major (x @ W^T), read in place.
    std::vector<float> at(a.size()), bt(b.size());
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t p = 0; p < c.k; ++p) at[static_cast<size_t>(p * c.m + i)] = a[static_cast<size_t>(i * c.k + p)];
    for (int64_t p = 0; p < c.k; ++p)
      for (int64_t j = 0; j < c.n; ++j) bt[static_cast<size_t>(j * c.k + p)] = b[static_cast<size_t>(p * c.n + j)];
    const Tensor tat = Tensor::from_vector<float>(at, {c.k, c.m}).cast(DType::BF16);
    const Tensor tbt = Tensor::from_vector<float>(bt, {c.n, c.k}).cast(DType::BF16);
    tat.realize(), tbt.realize();
    check(tag + " A^T B^T", tat.transpose().matmul(tbt.transpose()), a, b, c.m, c.k, c.n);
  }
  // A batch of 3 with a fused epilogue: relu(a @ b) in bf16 (the bound holds for relu too).
  const int64_t m = 96, k = 333, n = 80;
  const std::vector<float> a = values(3 * m * k, 9), b = values(3 * k * n, 10);
  const Tensor ta = Tensor::from_vector<float>(a, {3, m, k}).cast(DType::BF16);
  const Tensor tb = Tensor::from_vector<float>(b, {3, k, n}).cast(DType::BF16);
  const Tensor r = ta.matmul(tb).relu();
  const Tensor plain = ta.matmul(tb);
  r.realize(), plain.realize();  // the bf16 outputs themselves
  const std::vector<float> got = r.to_vector<float>(), p = plain.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) BOOST_TEST_REQUIRE(got[i] == (p[i] > 0 ? p[i] : 0.0f));
  check("batched", plain, a, b, m, k, n, 3);
}

// vdpbf16ps treats denormal inputs as zero (Intel SDM), the default path widens them exactly: a
// subnormal bf16 times 2^100 is 2^-28 or so on the default path and 0 here. This is what
// decision 45 keeps the family out of the default for, and proves the forced family ran.
BOOST_AUTO_TEST_CASE(bf16_dot_family_flushes_subnormal_inputs) {
  skip_without_avx512bf16();
  const int64_t m = 128, k = 128, n = 128;  // 2^21 multiply-adds: the blocked path
  std::vector<float> a(static_cast<size_t>(m * k), 0.0f), b(static_cast<size_t>(k * n), 0.0f);
  const float tiny = bf16(std::ldexp(1.0f, -130));  // subnormal in f32 and in bf16
  BOOST_TEST_REQUIRE((tiny > 0.0f && std::fpclassify(tiny) == FP_SUBNORMAL));
  for (int64_t i = 0; i < m; ++i) a[static_cast<size_t>(i * k)] = tiny;
  for (int64_t j = 0; j < n; ++j) b[static_cast<size_t>(j)] = std::ldexp(1.0f, 100);
  const Tensor c = Tensor::from_vector<float>(a, {m, k}).cast(DType::BF16).matmul(Tensor::from_vector<float>(b, {k, n}).cast(DType::BF16));
  const std::vector<float> got = c.to_vector<float>();
  BOOST_TEST(got[0] == 0.0f, "vdpbf16ps flushes the subnormal input; the default path would give " << bf16(tiny * std::ldexp(1.0f, 100)));
}
