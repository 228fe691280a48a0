// Integer pow (docs/dtypes.md "Integer pow"): exact, wrapping like mul, against exact
// integer arithmetic done here in unsigned 64-bit (wrap-around is what two's complement mul
// gives, as NumPy's integer power: np.int32(3) ** 40 wraps the same way); negative exponents.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;

namespace {
// base ** exp modulo 2^64 by repeated multiplication (exp >= 0).
uint64_t wrap_pow(uint64_t base, int64_t exp) {
  uint64_t r = 1;
  for (int64_t i = 0; i < exp; ++i) r *= base;
  return r;
}
const std::vector<int64_t> kBases = {0, 1, -1, 2, -2, 3, -3, 7, 10, -10, 12345, -99991};
const std::vector<int64_t> kExps = {0, 1, 2, 3, 5, 10, 20, 31, 32, 33, 40, 62, 63, 64, 100, 1000};
}  // namespace

BOOST_AUTO_TEST_CASE(int_pow_matches_exact_wrapping_arithmetic) {
  std::vector<int64_t> a, b;
  for (int64_t x : kBases)
    for (int64_t e : kExps) a.push_back(x), b.push_back(e);
  const int64_t n = static_cast<int64_t>(a.size());
  auto got64 = Tensor::from_vector<int64_t>(a, {n}).pow(Tensor::from_vector<int64_t>(b, {n})).to_vector<int64_t>();
  std::vector<int32_t> a32(a.begin(), a.end()), b32(b.begin(), b.end());
  auto got32 = Tensor::from_vector<int32_t>(a32, {n}).pow(Tensor::from_vector<int32_t>(b32, {n})).to_vector<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    BOOST_TEST_CONTEXT(a[i] << " ** " << b[i]) {
      uint64_t w = wrap_pow(static_cast<uint64_t>(a[i]), b[i]);
      BOOST_TEST(got64[i] == static_cast<int64_t>(w));
      BOOST_TEST(got32[i] == static_cast<int32_t>(static_cast<uint32_t>(w)));
    }
  }
  std::vector<uint8_t> a8 = {0, 1, 2, 3, 255, 17, 200}, b8 = {0, 7, 8, 9, 2, 255, 3};
  auto got8 = Tensor::from_vector<uint8_t>(a8, {7}).pow(Tensor::from_vector<uint8_t>(b8, {7})).to_vector<uint8_t>();
  for (size_t i = 0; i < a8.size(); ++i) BOOST_TEST(got8[i] == static_cast<uint8_t>(wrap_pow(a8[i], b8[i])));
}

BOOST_AUTO_TEST_CASE(int_pow_negative_exponent) {
  // A tensor exponent: what torch.pow's integer kernel (powi in ATen's Pow.h) returns:
  // 1 ** -k = 1, (-1) ** -k = ±1 by parity, anything else 0.
  Tensor a = Tensor::from_vector<int64_t>({1, -1, -1, 2, -2, 0, 5}, {7});
  Tensor b = Tensor::from_vector<int64_t>({-3, -3, -2, -1, -1, -1, -2}, {7});
  BOOST_TEST(a.pow(b).to_vector<int64_t>() == (std::vector<int64_t>{1, -1, 1, 0, 0, 0, 0}),
             boost::test_tools::per_element());
  // A scalar exponent: numpy (ValueError "Integers to negative integer powers are not allowed")
  // and torch (RuntimeError, same words) both refuse.
  BOOST_CHECK_THROW(Tensor::from_vector<int32_t>({2}, {1}).pow(-1), ravel::ValueError);
  BOOST_TEST(Tensor::from_vector<int32_t>({2, 3}, {2}).pow(3).to_vector<int32_t>() == (std::vector<int32_t>{8, 27}),
             boost::test_tools::per_element());
  Tensor h = Tensor::from_vector<int32_t>({4, 9}, {2}).pow(0.5);  // non-integral: f32
  BOOST_TEST((h.dtype() == DType::F32));
  BOOST_TEST(h.to_vector<float>() == (std::vector<float>{2.f, 3.f}), boost::test_tools::per_element());
  BOOST_TEST(Tensor::from_vector<float>({2.f}, {1}).pow(-1).item<float>() == 0.5f);
}
