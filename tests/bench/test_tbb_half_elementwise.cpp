// The oneTBB plugin's half elementwise programs (Note [Half programs as one fused loop],
// plugins/tbb_cpu/half_chunk.hpp) through the public API, in f16 and bf16: each result must be
// the f32 program on the exactly widened inputs, rounded once to the half type (docs/dtypes.md:
// a fused kernel rounds once), bit for bit, with the f32 program run through the API too (its
// own bits are the block evaluator's in every path: tbb_array_tiers); and `a * b + c` also
// against double arithmetic within the format's rounding. Inputs are dense, misaligned (a slice
// from element 1), strided (every other element: the passes), transposed (the tiled passes),
// and a row vector and a per-row column broadcast against a matrix, with NaN, infinities, signed
// zeros, subnormals and products that overflow the half type, at odd lengths around the chunks
// and blocks. CMake runs it with RAVEL_TBB_FUSED_MIN=0 (small kernels take the fused loops too)
// in every SIMD tier, with forced parallelism, and with RAVEL_TBB_NO_HALF_FUSED_LOOP=1 (the
// passes against the same reference: both paths give the same bits).
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

uint16_t bits_of(DType h, float x) { return h == DType::F16 ? rvl::f16_bits_from(x) : rvl::bf16_bits_from(x); }
float value_of(DType h, uint16_t b) { return h == DType::F16 ? rvl::f32_from_f16_bits(b) : rvl::f32_from_bf16_bits(b); }
float round_to(DType h, float x) { return value_of(h, bits_of(h, x)); }

// Values exactly representable in h, with specials every few elements: NaN, infinities, signed
// zeros, the smallest subnormal, and values whose products overflow h.
std::vector<float> half_values(DType h, int64_t n, uint64_t seed) {
  const float big = h == DType::F16 ? 400.0f : 3.0e38f;
  const float tiny = h == DType::F16 ? std::ldexp(1.0f, -24) : std::ldexp(1.0f, -133);
  const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, big, -big, tiny};
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t r = s >> 33;
    x = round_to(h, r % 19 == 0 ? special[(r / 19) % 8] : static_cast<float>(static_cast<int64_t>(r % 4001) - 2000) / 37.0f);
  }
  return v;
}

// The half result's bits against want (floats already rounded to h); two NaNs compare equal.
void check(const std::string& what, DType h, const Tensor& got_half, const std::vector<float>& want) {
  BOOST_TEST_REQUIRE((got_half.dtype() == h), what);
  got_half.realize();  // the half kernel's output itself (a cast fused after it would not round)
  const std::vector<float> got = got_half.cast(DType::F32).to_vector<float>();
  BOOST_TEST_REQUIRE(got.size() == want.size(), what);
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = (std::isnan(got[i]) && std::isnan(want[i])) || std::memcmp(&got[i], &want[i], 4) == 0;
    if (!same && bad++ < 3) BOOST_ERROR(what << ": element " << i << " = " << got[i] << ", want " << want[i]);
  }
  BOOST_TEST(bad == 0, what << ": " << bad << " wrong elements");
}

// The f32 program on the widened inputs, through the API, each element rounded once to h.
std::vector<float> rounded_f32(DType h, const Tensor& f32_result) {
  std::vector<float> v = f32_result.to_vector<float>();
  for (float& x : v) x = round_to(h, x);
  return v;
}

// Every expression on half inputs (a, b, c) against the same expression on their f32 twins.
void expressions(const std::string& tag, DType h, const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& af,
                 const Tensor& bf, const Tensor& cf) {
  check(tag + " a * b + c", h, a * b + c, rounded_f32(h, af * bf + cf));
  // exp(x) is exp2(x * log2 e) with log2 e a scalar of x's dtype (core/src/tensor/composite.cpp).
  const double log2e = round_to(h, static_cast<float>(1.0 / std::log(2.0)));
  check(tag + " exp(a) * b + c", h, a.exp() * b + c, rounded_f32(h, (af * log2e).exp2() * bf + cf));
  check(tag + " sqrt(a * a) - b", h, (a * a).sqrt() - b, rounded_f32(h, (af * af).sqrt() - bf));
  check(tag + " max(a, b) * 0.5", h, a.maximum(b) * 0.5, rounded_f32(h, af.maximum(bf) * 0.5));
}

Tensor half_of(DType h, const std::vector<float>& v, ravel::Shape shape) {
  const Tensor t = Tensor::from_vector<float>(v, shape).cast(h);
  t.realize();
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(half_programs_round_once_like_the_f32_program) {
  for (const DType h : {DType::F16, DType::BF16}) {
    const std::string hn = h == DType::F16 ? "f16" : "bf16";
    uint64_t seed = h == DType::F16 ? 10 : 20;
    for (int64_t n : {1, 17, 33, 1023, 1025, 4097, 40001}) {
      const auto av = half_values(h, n + 1, ++seed), bv = half_values(h, n, ++seed), cv = half_values(h, n, ++seed);
      const Tensor a1 = half_of(h, av, {n + 1}), b = half_of(h, bv, {n}), c = half_of(h, cv, {n});
      const Tensor af1 = Tensor::from_vector<float>(av, {n + 1}), bf = Tensor::from_vector<float>(bv, {n}),
                   cf = Tensor::from_vector<float>(cv, {n});
      const std::string tag = hn + " n=" + std::to_string(n);
      // Dense, and a misaligned start (a's element 1 on).
      expressions(tag + " dense", h, a1.slice(0, 0, n, 1), b, c, af1.slice(0, 0, n, 1), bf, cf);
      expressions(tag + " misaligned", h, a1.slice(0, 1, n + 1, 1), b, c, af1.slice(0, 1, n + 1, 1), bf, cf);
      // Every other element of a twice as long input: strided loads.
      std::vector<float> a2(static_cast<size_t>(2 * n), 7.0f);
      for (int64_t i = 0; i < n; ++i) a2[static_cast<size_t>(2 * i)] = av[static_cast<size_t>(i)];
      expressions(tag + " strided", h, half_of(h, a2, {2 * n}).slice(0, 0, 2 * n, 2), b, c,
                  Tensor::from_vector<float>(a2, {2 * n}).slice(0, 0, 2 * n, 2), bf, cf);
      // a * b + c against double arithmetic: one rounding of the exact value to h, give or take
      // the f32 arithmetic (an f32 product of halves is exact unless it overflows f32, where
      // the program's f32 arithmetic gives infinity: skipped; the sum rounds once in f32).
      const Tensor r = a1.slice(0, 0, n, 1) * b + c;
      r.realize();  // rounded by its own kernel (a cast fused after it would not round)
      const std::vector<float> got = r.cast(DType::F32).to_vector<float>();
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = static_cast<size_t>(i);
        const double product = double(av[k]) * bv[k];  // exact
        if (std::isnan(product) || std::fabs(product) > 3.4028234663852886e38) continue;  // overflows f32 itself
        const double want = product + cv[k];
        if (std::isnan(want) || std::isinf(want)) continue;
        const double ulp = std::ldexp(1.0, std::ilogb(want == 0 ? 1.0 : want) - (h == DType::F16 ? 10 : 7));
        const double max = h == DType::F16 ? 65504.0 : 3.3895313892515355e38;
        if (std::fabs(want) > max)  // the largest finite value, or infinity from half an ulp above it
          BOOST_REQUIRE_MESSAGE(std::isinf(got[k]) || std::fabs(got[k]) == max,
                                tag << " element " << i << " overflows: " << got[k] << " for " << want << " = " << av[k]
                                    << " * " << bv[k] << " + " << cv[k]);
        else BOOST_REQUIRE_MESSAGE(std::fabs(got[k] - want) <= 0.5 * ulp + std::ldexp(std::fabs(want), -23) + 1e-7,
                                   tag << " element " << i << ": " << got[k] << " against " << want);
      }
    }
    // A matrix with a row vector and a per-row column broadcast over it, and transposed inputs.
    for (auto [r, k] : {std::pair<int64_t, int64_t>{64, 64}, {33, 100}, {300, 128}}) {
      const auto xv = half_values(h, r * k, ++seed), rowv = half_values(h, k, ++seed), colv = half_values(h, r, ++seed);
      const Tensor x = half_of(h, xv, {r, k}), row = half_of(h, rowv, {1, k}), col = half_of(h, colv, {r, 1});
      const Tensor xf = Tensor::from_vector<float>(xv, {r, k}), rowf = Tensor::from_vector<float>(rowv, {1, k}),
                   colf = Tensor::from_vector<float>(colv, {r, 1});
      const std::string tag = hn + " " + std::to_string(r) + "x" + std::to_string(k);
      expressions(tag + " broadcast", h, x, row.expand({r, k}), col.expand({r, k}), xf, rowf.expand({r, k}),
                  colf.expand({r, k}));
      const Tensor xt = half_of(h, xv, {k, r}).transpose(), xtf = Tensor::from_vector<float>(xv, {k, r}).transpose();
      expressions(tag + " transposed", h, xt, x, row.expand({r, k}), xtf, xf, rowf.expand({r, k}));
    }
  }
}
