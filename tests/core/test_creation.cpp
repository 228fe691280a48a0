// Creation: from_vector/from_data, scalar, full/zeros/ones(_like), arange, linspace, eye, rand,
// randn.
#include "common.hpp"

using namespace rtest;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_CASE(from_vector_every_dtype) {
  BOOST_TEST(Tensor::from_vector<float>({1.5f, -2.f, 3.f, 4.f}, {2, 2}).to_vector<float>() ==
                 (std::vector<float>{1.5f, -2.f, 3.f, 4.f}),
             tt::per_element());
  BOOST_TEST(Tensor::from_vector<double>({0.1, 0.2}, {2}).to_vector<double>() == (std::vector<double>{0.1, 0.2}),
             tt::per_element());
  BOOST_TEST(Tensor::from_vector<int32_t>({-5, 7}, {2}).to_vector<int32_t>() == (std::vector<int32_t>{-5, 7}),
             tt::per_element());
  BOOST_TEST(Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX}, {2}).to_vector<int64_t>() ==
                 (std::vector<int64_t>{INT64_MIN, INT64_MAX}),
             tt::per_element());
  BOOST_TEST(Tensor::from_vector<uint8_t>({0, 255}, {2}).to_vector<uint8_t>() == (std::vector<uint8_t>{0, 255}),
             tt::per_element());
  auto b = Tensor::from_vector<bool>(std::vector<bool>{true, false, true}, {3});
  BOOST_TEST((b.dtype() == DType::Bool));
  std::vector<bool> bv = b.to_vector<bool>();
  BOOST_TEST((bv == std::vector<bool>{true, false, true}));
  auto t = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  BOOST_TEST((t.dtype() == DType::I32));
  BOOST_TEST(t.shape() == (Shape{2, 3}));
  BOOST_TEST(t.numel() == 6);
  BOOST_TEST(t.is_contiguous());
  BOOST_TEST((t.device() == ravel::Runtime::get().default_device()));  // from_vector: the placement's device
  // to_vector<T> casts: i32 -> f64
  BOOST_TEST(t.to_vector<double>() == (std::vector<double>{1, 2, 3, 4, 5, 6}), tt::per_element());
  // from_data copies the caller's bytes
  std::vector<double> raw = {1.25, 2.5};
  auto d = Tensor::from_data(raw.data(), DType::F64, {2});
  raw[0] = 99;
  BOOST_TEST(d.to_vector<double>() == (std::vector<double>{1.25, 2.5}), tt::per_element());
  // Empty tensors.
  auto e = Tensor::from_vector<float>({}, {0, 3});
  BOOST_TEST(e.numel() == 0);
  BOOST_TEST(e.to_vector<float>().empty());
}

BOOST_AUTO_TEST_CASE(scalar_full_zeros_ones) {
  auto s = Tensor::scalar(3.5);  // np.float32(3.5): 0-d
  BOOST_TEST(s.shape() == Shape{});
  BOOST_TEST(s.ndim() == 0);
  BOOST_TEST(s.numel() == 1);
  BOOST_TEST((s.dtype() == DType::F32));
  BOOST_TEST(s.item<float>() == 3.5f);
  BOOST_TEST(Tensor::scalar(7, DType::I64).item<int64_t>() == 7);
  BOOST_TEST(Tensor::scalar(-2.7, DType::I32).item<int32_t>() == -2);  // truncates like a cast

  auto f = Tensor::full({2, 3}, 1.5, DType::F64);
  BOOST_TEST(f.shape() == (Shape{2, 3}));
  BOOST_TEST(f.to_vector<double>() == std::vector<double>(6, 1.5), tt::per_element());
  for (DType dt : kAllDTypes)
    BOOST_TEST_CONTEXT(ravel::dtype_name(dt)) {
      auto z = Tensor::zeros({2, 2}, dt), o = Tensor::ones({3}, dt);
      BOOST_TEST((z.dtype() == dt));
      BOOST_TEST((o.dtype() == dt));
      BOOST_TEST(values(z) == std::vector<double>(4, 0.0), tt::per_element());
      BOOST_TEST(values(o) == std::vector<double>(3, 1.0), tt::per_element());
      auto ol = Tensor::ones_like(z), zl = Tensor::zeros_like(o), fl = Tensor::full_like(z, 1);
      BOOST_TEST(ol.shape() == z.shape());
      BOOST_TEST((ol.dtype() == dt));
      BOOST_TEST(values(ol) == std::vector<double>(4, 1.0), tt::per_element());
      BOOST_TEST(zl.shape() == o.shape());
      BOOST_TEST(values(zl) == std::vector<double>(3, 0.0), tt::per_element());
      BOOST_TEST((fl.dtype() == dt));
      BOOST_TEST(values(fl) == std::vector<double>(4, 1.0), tt::per_element());
    }
  // full_like of a view gets the view's shape, not its base's.
  auto v = Tensor::zeros({3, 4}).transpose();
  BOOST_TEST(Tensor::full_like(v, 2).shape() == (Shape{4, 3}));
}

BOOST_AUTO_TEST_CASE(arange_like_numpy) {
  auto a = Tensor::arange(5);  // np.arange(5) -> [0 1 2 3 4], int64
  BOOST_TEST((a.dtype() == DType::I64));
  BOOST_TEST(a.to_vector<int64_t>() == (std::vector<int64_t>{0, 1, 2, 3, 4}), tt::per_element());
  auto b = Tensor::arange(2, 11, 3);  // np.arange(2, 11, 3) -> [2 5 8]
  BOOST_TEST((b.dtype() == DType::I64));
  BOOST_TEST(b.to_vector<int64_t>() == (std::vector<int64_t>{2, 5, 8}), tt::per_element());
  auto c = Tensor::arange(10, 0, -3);  // np.arange(10, 0, -3) -> [10 7 4 1]
  BOOST_TEST((c.dtype() == DType::I64));
  BOOST_TEST(c.to_vector<int64_t>() == (std::vector<int64_t>{10, 7, 4, 1}), tt::per_element());
  auto d = Tensor::arange(0, 1, 0.25);  // np.arange(0, 1, 0.25) -> [0. 0.25 0.5 0.75] (f32 here)
  BOOST_TEST((d.dtype() == DType::F32));
  BOOST_TEST(d.to_vector<float>() == (std::vector<float>{0, 0.25f, 0.5f, 0.75f}), tt::per_element());
  auto e = Tensor::arange(5, -5, -2.5);  // np.arange(5, -5, -2.5) -> [ 5.   2.5  0.  -2.5]
  BOOST_TEST(e.to_vector<float>() == (std::vector<float>{5, 2.5f, 0, -2.5f}), tt::per_element());
  auto f = Tensor::arange(0, 3, 1, DType::F64);  // dtype given
  BOOST_TEST((f.dtype() == DType::F64));
  BOOST_TEST(f.to_vector<double>() == (std::vector<double>{0, 1, 2}), tt::per_element());
  BOOST_TEST(Tensor::arange(3, 3).numel() == 0);    // np.arange(3, 3) -> []
  BOOST_TEST(Tensor::arange(0, 10, -1).numel() == 0);
  BOOST_TEST(Tensor::arange(0.5, 2.0, 0.5).numel() == 3);  // ceil((2 - 0.5) / 0.5) = 3
}

BOOST_AUTO_TEST_CASE(linspace_like_numpy) {
  struct L {
    double start, stop;
    int64_t n;
    std::vector<double> numpy;  // numpy.linspace(start, stop, n)
  };
  const std::vector<L> rows = {
      {0, 1, 5, {0., 0.25, 0.5, 0.75, 1.}},
      {-1, 2, 7, {-1., -0.5, 0., 0.5, 1., 1.5, 2.}},
      {0, 1, 7, {0., 0.16666666666666666, 0.3333333333333333, 0.5, 0.6666666666666666, 0.8333333333333333, 1.}},
      {0, 11, 12, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
      {10, 0, 3, {10., 5., 0.}},
      {2, 3, 1, {2.}},
      {0, 1, 0, {}},
  };
  for (const L& r : rows)
    for (DType dt : kFloats)
      BOOST_TEST_CONTEXT("linspace(" << r.start << ", " << r.stop << ", " << r.n << ") " << ravel::dtype_name(dt)) {
        auto t = Tensor::linspace(r.start, r.stop, r.n, dt);
        BOOST_TEST((t.dtype() == dt));
        BOOST_TEST(t.shape() == (Shape{r.n}));
        NDArray want({r.n}, dt, r.numpy);
        check_tensor(t, want);
        if (r.n >= 2) BOOST_TEST(values(t).back() == r.stop);  // the endpoint is exact
      }
}

BOOST_AUTO_TEST_CASE(eye_is_identity) {
  for (int64_t n : {1, 2, 3, 5})
    for (DType dt : {DType::F32, DType::I64, DType::Bool})
      BOOST_TEST_CONTEXT("eye(" << n << ") " << ravel::dtype_name(dt)) {
        NDArray want({n, n}, dt);
        for (int64_t i = 0; i < n; ++i) want[{i, i}] = 1;
        check_tensor(Tensor::eye(n, dt), want);
      }
}

BOOST_AUTO_TEST_CASE(rand_uniform) {
  auto a = Tensor::rand({1000}, 42), b = Tensor::rand({1000}, 42), c = Tensor::rand({1000}, 43);
  BOOST_TEST((a.dtype() == DType::F32));
  auto va = a.to_vector<float>(), vb = b.to_vector<float>(), vc = c.to_vector<float>();
  BOOST_TEST(va == vb, tt::per_element());  // same seed, same numbers
  size_t same = 0;
  for (size_t k = 0; k < va.size(); ++k) same += va[k] == vc[k];
  BOOST_TEST(same < 10u);  // a different seed gives different numbers
  for (float v : va) BOOST_TEST_REQUIRE((v >= 0.0f && v < 1.0f));
  // 100k samples of U[0,1): mean 1/2 with standard error sqrt(1/12 / 1e5) = 9.1e-4; variance
  // 1/12 with standard error sqrt((1/80 - 1/144) / 1e5) = 2.4e-4. 5 sigma: 0.005 and 0.0012.
  const int64_t n = 100000;
  auto big = Tensor::rand({n}, 7);
  std::vector<float> v = big.to_vector<float>();
  double m = 0, s2 = 0, lo = 1, hi = 0;
  for (float x : v) m += x, lo = std::min<double>(lo, x), hi = std::max<double>(hi, x);
  m /= n;
  for (float x : v) s2 += (x - m) * (x - m);
  s2 /= n;
  BOOST_TEST(std::fabs(m - 0.5) < 0.005, "mean " << m);
  BOOST_TEST(std::fabs(s2 - 1.0 / 12) < 0.0012, "variance " << s2);
  BOOST_TEST((lo >= 0.0 && hi < 1.0));
  BOOST_TEST(big.mean().item<float>() == float(m), tt::tolerance(1e-4f));  // Ravel's own mean agrees
  // Shapes, f64, and the same seed with a different shape still being deterministic.
  auto r2 = Tensor::rand({3, 4}, 1, DType::F64);
  BOOST_TEST((r2.dtype() == DType::F64));
  BOOST_TEST(r2.shape() == (Shape{3, 4}));
  BOOST_TEST(r2.to_vector<double>() == Tensor::rand({3, 4}, 1, DType::F64).to_vector<double>(), tt::per_element());
}

BOOST_AUTO_TEST_CASE(rand_matches_threefry_known_answer) {
  // docs/random.md: element i of seed s is Threefry-2x32-20 of counter (i, 0) under key
  // (s mod 2^32, s / 2^32). Random123's known-answer vector for key 0, counter 0 is
  // (0x6b200159, 0x99ba4efe); f32 keeps the top 24 bits of the first word, f64 the top 53 of both.
  const uint64_t words = (uint64_t{0x6b200159} << 32) | 0x99ba4efeu;
  BOOST_TEST(Tensor::rand({1}, 0, DType::F64).item<double>() == static_cast<double>(words >> 11) * 0x1.0p-53);
  BOOST_TEST(Tensor::rand({1}, 0).item<float>() == static_cast<float>((0x6b200159u >> 8) * 0x1.0p-24));
}

BOOST_AUTO_TEST_CASE(randn_standard_normal) {
  // 100k samples: mean 0 with standard error 1/sqrt(1e5) = 3.2e-3 (5 sigma: 0.016); the sample
  // standard deviation has standard error 1/sqrt(2e5) = 2.2e-3 (5 sigma: 0.012).
  const int64_t n = 100000;
  auto x = Tensor::randn({n}, 11);
  BOOST_TEST((x.dtype() == DType::F32));
  std::vector<float> v = x.to_vector<float>();
  double m = 0, s2 = 0;
  size_t beyond3 = 0;
  for (float e : v) m += e, beyond3 += std::fabs(e) > 3;
  m /= n;
  for (float e : v) s2 += (e - m) * (e - m);
  double sd = std::sqrt(s2 / n);
  BOOST_TEST(std::fabs(m) < 0.016, "mean " << m);
  BOOST_TEST(std::fabs(sd - 1.0) < 0.012, "std " << sd);
  // P(|z| > 3) = 0.0027: 270 expected, sd ~16.4.
  BOOST_TEST((beyond3 > 190 && beyond3 < 350), "beyond 3 sigma: " << beyond3);
  for (float e : v) BOOST_TEST_REQUIRE(std::isfinite(e));
  BOOST_TEST(Tensor::randn({5}, 3).to_vector<float>() == Tensor::randn({5}, 3).to_vector<float>(), tt::per_element());
  BOOST_TEST((Tensor::randn({5}, 3).to_vector<float>() != Tensor::randn({5}, 4).to_vector<float>()));
  BOOST_TEST((Tensor::randn({2}, 3, DType::F64).dtype() == DType::F64));
}

// from_data checks its arguments at the API; a null pointer or a dtype code
// outside the enum failed later inside the plugin, in the plugin's words.
#include "expect_error.hpp"
BOOST_AUTO_TEST_CASE(from_data_checks_pointer_and_dtype_at_the_api) {
  expect_error<ravel::ValueError>("null data", [] { Tensor::from_data(nullptr, DType::F32, {2, 3}); },
                                  {"from_data: data is a null pointer for shape [2, 3]", "6 elements of f32"});
  expect_error<ravel::DTypeError>("dtype 42", [] {
    const float v[1] = {1};
    Tensor::from_data(v, static_cast<DType>(42), {1});
  }, {"from_data: dtype code 42 is not a Ravel dtype"});
  // An empty tensor needs no data.
  BOOST_TEST(Tensor::from_data(nullptr, DType::F32, {0, 3}).numel() == 0);
}
