// Index tensors outside their bound (docs/abi.md, "Indices"): gather, one_hot,
// nn::Embedding and nn::cross_entropy used to select nothing (zeros) silently; now each raises an
// IndexError naming the index, its position and the bound (Note [Checked indices] in
// core/src/tensor/indices.cpp). Also one_hot and argmax/argmin with a chosen index dtype.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "expect_error.hpp"
#include "ravel/nn.hpp"
#include "ravel/ravel.hpp"

using namespace rtest;
using ravel::DType;
using ravel::Shape;
using ravel::Tensor;

namespace {
Tensor ints(std::vector<int64_t> v, Shape s) { return Tensor::from_vector<int64_t>(v, std::move(s)); }
}  // namespace

BOOST_AUTO_TEST_CASE(one_hot_out_of_range) {
  expect_error<ravel::IndexError>("one_hot with -1", [] { ints({0, -1, 2}, {3}).one_hot(3); },
                                  {"one_hot", "index -1", "position [1]", "3 classes", "0 <= index < 3"});
  expect_error<ravel::IndexError>("one_hot with 3 of 3", [] { ints({0, 1, 2, 3}, {2, 2}).one_hot(3); },
                                  {"index 3", "position [1, 1]", "< 3"});
  // Other integer dtypes, and an index that is computed lazily (realized by the check).
  expect_error<ravel::IndexError>("one_hot of u8", [] { Tensor::from_vector<uint8_t>({7}, {1}).one_hot(4); },
                                  {"index 7", "position [0]"});
  expect_error<ravel::IndexError>("one_hot of a computed index", [] { (Tensor::arange(4) + 1).one_hot(4); },
                                  {"index 4", "position [3]"});
  // The IndexError is a ValueError (code that caught ValueError for select still does).
  expect_error<ravel::ValueError>("as a ValueError", [] { ints({5}, {1}).one_hot(3); }, {"index 5"});
}

BOOST_AUTO_TEST_CASE(gather_out_of_range) {
  Tensor x = Tensor::arange(0, 6, 1, DType::F32).reshape({2, 3});
  expect_error<ravel::IndexError>("gather axis 1 with 3", [&] { x.gather(1, ints({0, 3, 1, 0}, {2, 2})); },
                                  {"gather", "index 3", "position [0, 1]", "axis 1", "size 3", "< 3"});
  expect_error<ravel::IndexError>("gather axis 0 with -1", [&] { x.gather(0, ints({0, -1, 1}, {1, 3})); },
                                  {"index -1", "position [0, 1]", "axis 0", "< 2"});
  // In range: the values torch.gather gives.
  auto g = x.gather(1, ints({2, 0, 1, 1}, {2, 2})).to_vector<float>();
  BOOST_TEST(g == (std::vector<float>{2, 0, 4, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(large_index_tensors_are_checked_on_the_device) {
  // Above 2^16 elements the check reduces min and max on the device, then names the offender.
  const int64_t n = 100000;
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i % 10;
  Tensor ok = ints(v, {n});
  auto sums = ok.one_hot(10).sum(0).to_vector<float>();
  BOOST_TEST(sums == (std::vector<float>(10, 10000.0f)), boost::test_tools::per_element());
  v[n - 2] = 10;
  expect_error<ravel::IndexError>("one large value", [&] { ints(v, {n}).one_hot(10); }, {"index 10", "position [99998]"});
  v[n - 2] = 0;
  v[12345] = -7;
  expect_error<ravel::IndexError>("one negative value", [&] { ints(v, {n / 10, 10}).one_hot(10); },
                                  {"index -7", "position [1234, 5]"});
}

BOOST_AUTO_TEST_CASE(embedding_out_of_range) {
  ravel::nn::Embedding emb(27, 4, 1);
  expect_error<ravel::IndexError>("Embedding(27) with 27", [&] { emb(ints({1, 2, 3, 27}, {2, 2})); },
                                  {"Embedding", "index 27", "position [1, 1]", "27 rows", "< 27"});
  expect_error<ravel::IndexError>("Embedding(27) with -1", [&] { emb(ints({-1}, {1})); }, {"index -1", "position [0]"});
  // In range: the rows of the weight.
  auto row = emb(ints({5}, {1})).to_vector<float>();
  auto w = emb.weight.to_vector<float>();
  BOOST_TEST(row == std::vector<float>(w.begin() + 20, w.begin() + 24), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(cross_entropy_targets_out_of_range) {
  using ravel::nn::Reduction;
  Tensor logits = Tensor::zeros({3, 4});
  expect_error<ravel::IndexError>("target 4 of 4 classes", [&] { ravel::nn::cross_entropy(logits, ints({0, 4, 1}, {3})); },
                                  {"cross_entropy", "index 4", "position [1]", "4 classes", "< 4"});
  expect_error<ravel::IndexError>("target -1", [&] { ravel::nn::cross_entropy(logits, ints({-1, 0, 0}, {3}), Reduction::Mean); },
                                  {"index -1", "position [0]", "ignored value -100"});
  // ignore_index is allowed (and ignored); everything else is checked.
  double loss = ravel::nn::cross_entropy(logits, ints({-100, 3, 0}, {3}), Reduction::Mean).item<double>();
  BOOST_TEST(loss == std::log(4.0), boost::test_tools::tolerance(1e-6));
  expect_error<ravel::IndexError>("ignore 7, target 9", [&] { ravel::nn::cross_entropy(logits, ints({7, 9, 0}, {3}), Reduction::Sum, 7); },
                                  {"index 9", "position [1]"});
}

BOOST_AUTO_TEST_CASE(select_out_of_range_is_an_index_error) {
  expect_error<ravel::IndexError>("at(3) of 3", [] { Tensor::zeros({3}).at(3); }, {"index 3", "size 3"});
  expect_error<ravel::IndexError>("select(1, -4) of [2, 3]", [] { Tensor::zeros({2, 3}).select(1, -4); },
                                  {"index -4", "-3 <= index < 3"});
}

BOOST_AUTO_TEST_CASE(one_hot_with_a_dtype) {
  Tensor idx = ints({2, 0}, {2});
  for (DType d : {DType::Bool, DType::U8, DType::I32, DType::I64, DType::F32, DType::F64}) {
    Tensor h = idx.one_hot(3, d);
    BOOST_TEST((h.dtype() == d));
    BOOST_TEST(h.to_vector<double>() == (std::vector<double>{0, 0, 1, 1, 0, 0}), boost::test_tools::per_element());
  }
  BOOST_TEST((idx.one_hot(3).dtype() == DType::F32));  // the default, as before
  expect_error<ravel::DTypeError>("one_hot of f32", [] { Tensor::zeros({2}).one_hot(3); }, {"f32"});
}

BOOST_AUTO_TEST_CASE(argmax_and_argmin_with_a_dtype) {
  Tensor x = Tensor::from_vector<float>({3, 1, 7, 7, -2, 0}, {2, 3});
  for (DType d : {DType::U8, DType::I32, DType::I64}) {
    Tensor a = x.argmax(1, false, d), b = x.argmin(1, false, d);
    BOOST_TEST((a.dtype() == d));
    BOOST_TEST((b.dtype() == d));
    BOOST_TEST(a.to_vector<int64_t>() == (std::vector<int64_t>{2, 0}), boost::test_tools::per_element());
    BOOST_TEST(b.to_vector<int64_t>() == (std::vector<int64_t>{1, 1}), boost::test_tools::per_element());
  }
  BOOST_TEST(x.argmin().item<int64_t>() == 4);
  BOOST_TEST(x.argmin(0, true).shape() == (Shape{1, 3}));
  // argmin: the first minimum; NaN counts as the minimum (numpy.argmin); integers at their
  // extremes (where -x would overflow) and bools.
  Tensor nan = Tensor::from_vector<float>({1, NAN, -5, NAN}, {4});
  BOOST_TEST(nan.argmin().item<int64_t>() == 1);
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  BOOST_TEST(ints({hi, 0, lo, lo}, {4}).argmin().item<int64_t>() == 2);
  BOOST_TEST(Tensor::from_vector<uint8_t>({9, 255, 0, 0}, {4}).argmin().item<int64_t>() == 2);
  BOOST_TEST(Tensor::from_vector<bool>({true, false, false}, {3}).argmin().item<int64_t>() == 1);
  // Only integer index dtypes, and one that holds every index.
  expect_error<ravel::DTypeError>("argmax as f32", [&] { x.argmax(1, false, DType::F32); }, {"argmax", "f32", "integer"});
  expect_error<ravel::DTypeError>("argmin as bool", [&] { x.argmin(1, false, DType::Bool); }, {"argmin", "bool"});
  expect_error<ravel::DTypeError>("argmax of 300 as u8", [] { Tensor::zeros({300}).argmax({}, false, DType::U8); },
                                  {"299", "u8", "255"});
  BOOST_TEST((Tensor::zeros({256}).argmax({}, false, DType::U8).dtype() == DType::U8));  // 0..255 fit
}
