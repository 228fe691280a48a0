// A row chain's SUM fold (Note [Wide lanes for chain sums], plugins/tbb_cpu/chain_sum.hpp): the
// same bits compiled for the baseline and for AVX2, the order it documents (lanes of 64 floats
// or 32 doubles, a halving tree, then the rest), and a sum within the pairwise bound of a long
// double loop, at lengths around the lanes; NaN and infinities propagate. And a register chain's
// sum folded in registers (Note [Chain sums in registers], register_chain.cpp) against the
// chain's stored values summed here, bit for bit, in every SIMD tier.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "array_ops.hpp"
#include "chain_sum.hpp"
#include "register_chain.hpp"

#include <ravel/backend.h>

namespace {

template <class T>
T baseline(T acc, const T* v, int64_t n) { return tbbcpu::sum_wide_lanes<T>(acc, v, n); }
#if defined(__x86_64__) || defined(__i386__)
template <class T>
__attribute__((target("avx2"))) T avx2(T acc, const T* v, int64_t n) { return tbbcpu::sum_wide_lanes<T>(acc, v, n); }
#endif

// The documented order, written out with scalars.
template <class T>
T by_the_note(T acc, const T* v, int64_t n) {
  constexpr int L = 256 / sizeof(T);
  if (n >= L) {
    T lane[L];
    for (int j = 0; j < L; ++j) lane[j] = v[j];
    int64_t i = L;
    for (; i + L <= n; i += L)
      for (int j = 0; j < L; ++j) lane[j] += v[i + j];
    for (int w = L / 2; w >= 1; w /= 2)
      for (int j = 0; j < w; ++j) lane[j] += lane[j + w];
    acc += lane[0];
    v += i, n -= i;
  }
  for (int64_t k = 0; k < n; ++k) acc += v[k];
  return acc;
}

template <class T>
bool same(T a, T b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

template <class T>
void check_lengths() {
  uint64_t s = 26;
  for (int64_t n : {0, 1, 31, 63, 64, 65, 127, 128, 255, 256, 257, 1000, 1024, 4099}) {
    std::vector<T> v(static_cast<size_t>(n));
    long double exact = 0, abs_sum = 0;
    for (T& x : v) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x = static_cast<T>(static_cast<int64_t>((s >> 33) % 20001) - 10000) / T(7);
      exact += x, abs_sum += std::fabs(static_cast<long double>(x));
    }
    const T got = baseline<T>(T(0), v.data(), n);
    BOOST_TEST_CONTEXT("n " << n << " bytes " << sizeof(T)) {
      BOOST_CHECK(same(got, by_the_note<T>(T(0), v.data(), n)));
#if defined(__x86_64__) || defined(__i386__)
      if (__builtin_cpu_supports("avx2")) BOOST_CHECK(same(got, avx2<T>(T(0), v.data(), n)));
#endif
      // Pairwise-ish: at most ~(n / lanes + log2(lanes) + 1) roundings of the running sums.
      const long double bound =
          (static_cast<long double>(n) / (256 / sizeof(T)) + 12) * std::numeric_limits<T>::epsilon() * abs_sum;
      BOOST_CHECK(std::fabs(static_cast<long double>(got) - exact) <= bound);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(chain_sums)

BOOST_AUTO_TEST_CASE(every_clone_and_the_documented_order_agree_and_stay_within_the_bound) {
  check_lengths<float>();
  check_lengths<double>();
}

BOOST_AUTO_TEST_CASE(nan_and_infinities_propagate) {
  std::vector<float> v(300, 1.0f);
  v[200] = std::numeric_limits<float>::infinity();
  BOOST_CHECK(std::isinf(baseline<float>(0.0f, v.data(), 300)));
  v[7] = -std::numeric_limits<float>::infinity();
  BOOST_CHECK(std::isnan(baseline<float>(0.0f, v.data(), 300)));
  v[7] = std::nanf("");
  BOOST_CHECK(std::isnan(baseline<float>(0.0f, v.data(), 300)));
  v.assign(300, 0.5f);
  BOOST_CHECK_EQUAL(baseline<float>(2.0f, v.data(), 300), 152.0f);  // acc is added, exactly here
}

// Random chains of every step form (a run, a single value, the value itself; NEG, RECIP), at
// lengths of 1 to 64 groups, with a non-zero starting sum and a few infinities.
BOOST_AUTO_TEST_CASE(chain_sums_in_registers_give_the_stored_values_sum_in_every_tier) {
  using tbbcpu::ChainOperand;
  uint64_t s = 73;
  auto next = [&] { return s = s * 6364136223846793005ull + 1442695040888963407ull, s >> 33; };
  auto value = [&] { return static_cast<float>(static_cast<int64_t>(next() % 2001) - 1000) / 128.0f; };
  const int32_t ops[] = {RVL_OP_ADD, RVL_OP_MUL, RVL_OP_NEG, RVL_OP_RECIP};
  int checked = 0;
  for (int prog = 0; prog < 60; ++prog) {
    const int64_t n = std::vector<int64_t>{64, 128, 192, 1024, 4096}[prog % 5];
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (float& v : x) v = value();
    for (float& v : y) v = value();
    if (prog % 7 == 3) x[static_cast<size_t>(n / 2)] = std::numeric_limits<float>::infinity();
    const float c = value();
    std::vector<tbbcpu::ChainStep> st;
    const int n_steps = 1 + static_cast<int>(next() % 6);
    for (int k = 0; k < n_steps; ++k) {
      const int32_t op = ops[next() % 4];
      const ChainOperand run_y{ChainOperand::Run, y.data(), 0}, one{ChainOperand::One, &c, 0},
          prev{ChainOperand::Prev, nullptr, 0};
      const ChainOperand a = k == 0 ? ChainOperand{ChainOperand::Run, x.data(), 0} : prev;
      const uint64_t form = next() % 3;
      const ChainOperand b = k == 0 || form == 0 ? run_y : form == 1 ? one : prev;
      st.push_back({op, a, b});
    }
    const float acc = prog % 2 ? 0.0f : value();
    for (int tier = tbbcpu::kSimdPortable; tier <= tbbcpu::simd_tier_supported(); ++tier) {
      BOOST_REQUIRE_EQUAL(tbbcpu::run_register_chain(tier, st.data(), n_steps, out.data(), n, 0), n);
      const float want = baseline<float>(acc, out.data(), n);
      const float got = tbbcpu::run_register_chain_sum(tier, st.data(), n_steps, n, acc);
      if (!same(got, want))
        BOOST_ERROR("chain " << prog << " (" << n_steps << " steps, n " << n << ") tier " << tier << ": " << got
                             << ", the stored values sum to " << want);
      ++checked;
    }
  }
  BOOST_CHECK_GE(checked, 60);
}

BOOST_AUTO_TEST_SUITE_END()
