// The oneTBB plugin's folded bf16 casts (plugins/tbb_cpu/half_fused.hpp, Note [Casts folded into
// their readers]) through the public API, against the unfused meaning computed here: every bf16
// input widened exactly to f32, the f32 ops in program order, one rounding to bf16 at the output
// (docs/dtypes.md: a fused kernel rounds once). The expressions fold a cast into a one- and a
// two-operand reader, read one folded value twice, mix folded and unfolded readers (a
// comparison and a select read the same widened value), round in the middle (an explicit cast
// to bf16 and back) and end in an op that is not foldable; inputs are dense, strided (every
// other element) and transposed (the tiled path), with NaN, infinities and signed zeros, at
// lengths around the block. Compared bit for bit (two NaNs compare equal). CMake runs it also
// with RAVEL_TBB_SIMD=portable and avx2 and with forced parallelism; not under the other fusion
// policies (op-by-op kernels round after every op).
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
using ravel::Shape;
using ravel::Tensor;

namespace {

float bf16_round(float x) { return rvl::f32_from_bf16_bits(rvl::bf16_bits_from(x)); }

// Values exactly representable in bf16, with specials every few elements.
std::vector<float> bf16_values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0e38f};
  for (size_t i = 0; i < v.size(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t r = s >> 33;
    v[i] = r % 23 == 0 ? bf16_round(special[(r / 23) % 6]) : bf16_round(static_cast<float>(static_cast<int64_t>(r % 4001) - 2000) / 37.0f);
  }
  return v;
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }

void check(const std::string& what, const Tensor& got_bf16, const std::vector<float>& want) {
  BOOST_TEST_REQUIRE((got_bf16.dtype() == DType::BF16), what);
  got_bf16.realize();  // the bf16 kernel output itself (a cast fused after it would not round)
  const std::vector<float> got = got_bf16.cast(DType::F32).to_vector<float>();
  BOOST_TEST_REQUIRE(got.size() == want.size(), what);
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!same(got[i], want[i]) && bad++ < 3) BOOST_ERROR(what << ": element " << i << " = " << got[i] << ", want " << want[i]);
  BOOST_TEST(bad == 0, what << ": " << bad << " wrong elements");
}

// want[i] = round(f(a[i], b[i], c[i])) with f in f32.
std::vector<float> expected(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
                            const std::function<float(float, float, float)>& f) {
  std::vector<float> w(a.size());
  for (size_t i = 0; i < a.size(); ++i) w[i] = bf16_round(f(a[i], b[i], c[i]));
  return w;
}

void expressions(const std::string& tag, const Tensor& a, const Tensor& b, const Tensor& c, const std::vector<float>& av,
                 const std::vector<float>& bv, const std::vector<float>& cv) {
  check(tag + " a * b + c", a * b + c, expected(av, bv, cv, [](float x, float y, float z) { return x * y + z; }));
  check(tag + " -a * a", -a * a, expected(av, bv, cv, [](float x, float, float) { return -x * x; }));
  check(tag + " sqrt(a * a) + b", (a * a).sqrt() + b,
        expected(av, bv, cv, [](float x, float y, float) { return std::sqrt(x * x) + y; }));
  check(tag + " where(a < b, a * c, b)", Tensor::where(a.lt(b), a * c, b),
        expected(av, bv, cv, [](float x, float y, float z) { return x < y ? x * z : y; }));
  check(tag + " (a * b).bf16 + c", (a * b).cast(DType::BF16).cast(DType::F32).cast(DType::BF16) + c,
        expected(av, bv, cv, [](float x, float y, float z) { return bf16_round(x * y) + z; }));
  check(tag + " max(a, b) < c", (a.maximum(b).lt(c)).cast(DType::BF16),
        expected(av, bv, cv, [](float x, float y, float z) {
          const float m = std::isnan(x) ? x : std::isnan(y) ? y : x < y ? y : x;  // NaN propagates
          return m < z ? 1.0f : 0.0f;
        }));
}

}  // namespace

BOOST_AUTO_TEST_CASE(folded_bf16_casts_round_once_like_the_unfused_program) {
  uint64_t seed = 1;
  for (int64_t n : {1, 17, 1023, 1025, 5000}) {
    const auto av = bf16_values(n, ++seed), bv = bf16_values(n, ++seed), cv = bf16_values(n, ++seed);
    auto t = [](const std::vector<float>& v) { return Tensor::from_vector<float>(v, {static_cast<int64_t>(v.size())}).cast(DType::BF16); };
    const Tensor a = t(av), b = t(bv), c = t(cv);
    a.realize(), b.realize(), c.realize();
    expressions("dense n=" + std::to_string(n), a, b, c, av, bv, cv);
    // Every other element of twice as long inputs: strided loads.
    std::vector<float> a2(static_cast<size_t>(2 * n), 7.0f);
    for (int64_t i = 0; i < n; ++i) a2[static_cast<size_t>(2 * i)] = av[static_cast<size_t>(i)];
    const Tensor as = t(a2).slice(0, 0, 2 * n, 2);
    expressions("strided n=" + std::to_string(n), as, b, c, av, bv, cv);
  }
  // Transposed [r, k] inputs (the evaluator tiles them).
  for (auto [r, k] : {std::pair<int64_t, int64_t>{64, 64}, {33, 100}, {128, 48}}) {
    const auto av = bf16_values(r * k, ++seed), bv = bf16_values(r * k, ++seed), cv = bf16_values(r * k, ++seed);
    std::vector<float> at(av.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < k; ++j) at[static_cast<size_t>(j * r + i)] = av[static_cast<size_t>(i * k + j)];
    const Tensor a = Tensor::from_vector<float>(at, {k, r}).cast(DType::BF16);
    a.realize();
    auto t = [&](const std::vector<float>& v) { return Tensor::from_vector<float>(v, {r, k}).cast(DType::BF16); };
    const Tensor b = t(bv), c = t(cv);
    b.realize(), c.realize();
    expressions("transposed " + std::to_string(r) + "x" + std::to_string(k), a.transpose(), b, c, av, bv, cv);
  }
}
