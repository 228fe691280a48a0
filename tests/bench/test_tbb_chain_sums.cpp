// A row chain's SUM fold (Note [Wide lanes for chain sums], plugins/tbb_cpu/chain_sum.hpp): the
// same bits compiled for the baseline and for AVX2, the order it documents (lanes of 64 floats
// or 32 doubles, a halving tree, then the rest), and a sum within the pairwise bound of a long
// double loop, at lengths around the lanes; NaN and infinities propagate.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "chain_sum.hpp"

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

BOOST_AUTO_TEST_SUITE_END()
