// Sizes that overflow int64 (a wrapped count would under-allocate): every place a shape's element count
// or byte size is formed refuses a product that does not fit, with a ShapeError naming the shape
// (Note [Checked sizes] in core/src/graph/view.hpp), and host-made values larger than the
// machine's memory are an OutOfMemoryError before anything is allocated (Note [Host memory]).
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>

#include "expect_error.hpp"
#include "ravel/ravel.hpp"

using namespace rtest;
using ravel::DType;
using ravel::Shape;
using ravel::Tensor;

namespace {
constexpr int64_t k40 = int64_t{1} << 40;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
}  // namespace

BOOST_AUTO_TEST_CASE(creation_refuses_element_counts_that_overflow) {
  // {1<<40, 1<<40} used to give numel() == 0, {4, 2^62 + 2} to wrap to 8 and accept 8 values.
  expect_error<ravel::ShapeError>("zeros({1<<40, 1<<40})", [] { Tensor::zeros({k40, k40}); },
                                  {"full", "[1099511627776, 1099511627776]", "int64"});
  const int64_t big = (int64_t{1} << 62) + 2;
  expect_error<ravel::ShapeError>("from_vector of 8 values as {4, 2^62+2}",
                                  [&] { Tensor::from_vector<float>(std::vector<float>(8, 1.0f), {4, big}); },
                                  {"from_vector", "[4, 4611686018427387906]"});
  expect_error<ravel::ShapeError>("rand({1<<40, 1<<40})", [] { Tensor::rand({k40, k40}, 1); },
                                  {"rand", "[1099511627776, 1099511627776]"});
  expect_error<ravel::ShapeError>("ones({2^62}) of f64: bytes overflow", [] { Tensor::ones({int64_t{1} << 62}, DType::F64); },
                                  {"[4611686018427387904]", "bytes"});
  expect_error<ravel::ShapeError>("eye(2^32)", [] { Tensor::eye(int64_t{1} << 32); }, {"eye(4294967296)"});
  expect_error<ravel::ShapeError>("eye(2^40, 2^40)", [] { Tensor::eye(k40, k40, 0); }, {"eye", "[1099511627776, 1099511627776]"});
  expect_error<ravel::ShapeError>("arange(0, 1e300)", [] { Tensor::arange(0, 1e300); }, {"arange", "int64"});
  // A zero anywhere makes the product 0, legally, however large the other sizes.
  BOOST_TEST(Tensor::zeros({0, k40, k40}).numel() == 0);
  // A negative size stays the ValueError it was, naming the shape.
  expect_error<ravel::ValueError>("zeros({2, -1})", [] { Tensor::zeros({2, -1}); }, {"[2, -1]"});
}

BOOST_AUTO_TEST_CASE(movement_ops_refuse_sizes_that_overflow) {
  const int64_t big = (int64_t{1} << 62) + 2;
  // 4 * (2^62 + 2) wraps to 8: the reshape must not accept it.
  expect_error<ravel::ShapeError>("reshape 8 elements to {4, 2^62+2}", [&] { Tensor::arange(8).reshape({4, big}); },
                                  {"reshape", "[4, 4611686018427387906]"});
  expect_error<ravel::ShapeError>("reshape to {-1, 2^40, 2^40}", [] { Tensor::arange(8).reshape({-1, k40, k40}); },
                                  {"reshape", "[1099511627776, 1099511627776]"});
  expect_error<ravel::ShapeError>("reshape with a negative size", [] { Tensor::arange(8).reshape({2, -4}); }, {"[2, -4]"});
  expect_error<ravel::ShapeError>("expand({1<<40, 1<<40})", [] { Tensor::ones({1, 1}).expand({k40, k40}); },
                                  {"expand", "[1099511627776, 1099511627776]"});
  expect_error<ravel::ShapeError>("broadcast [2^40, 1] + [1, 2^40]",
                                  [] { (void)(Tensor::ones({1}).expand({k40}).reshape({k40, 1}) + Tensor::ones({1, k40})); },
                                  {"[1099511627776, 1099511627776]"});
  expect_error<ravel::ShapeError>("pad by INT64_MAX", [] { Tensor::ones({2}).pad({{kMax, 0}}); },
                                  {"pad", "[2]", "9223372036854775807"});
  expect_error<ravel::ShapeError>("pad whose product overflows", [] { Tensor::ones({k40, 1}).pad({{0, 0}, {0, k40}}); },
                                  {"pad", "[1099511627776, 1099511627777]"});
  // A view of 2^62 u8 values is fine (nothing is allocated); cast to f64 it would need 2^65 bytes.
  Tensor u8 = Tensor::zeros({int64_t{1} << 62}, DType::U8);
  BOOST_TEST(u8.numel() == (int64_t{1} << 62));
  expect_error<ravel::ShapeError>("cast 2^62 u8 to f64", [&] { u8.cast(DType::F64); }, {"[4611686018427387904]", "bytes"});
  expect_error<ravel::ShapeError>("concatenate two 2^62 axes", [&] { Tensor::concatenate({u8, u8, u8}); },
                                  {"concatenate", "int64"});
}

BOOST_AUTO_TEST_CASE(matmul_refuses_products_that_overflow) {
  // [2^22, 2^22] @ [2^22, 2^22]: each operand fits (2^44 elements, lazy zeros), the result fits,
  // but the [m, k, n] product view has 2^66 elements.
  const int64_t n = int64_t{1} << 22;
  Tensor a = Tensor::zeros({n, n});
  expect_error<ravel::ShapeError>("matmul 2^22 cubed", [&] { a.matmul(a); },
                                  {"matmul of [4194304, 4194304] and [4194304, 4194304]", "product"});
  // Sizes that fit still build (lazily) with the right shape.
  BOOST_TEST(Tensor::zeros({k40, 2}).matmul(Tensor::zeros({2, 3})).shape() == (Shape{k40, 3}));
}

BOOST_AUTO_TEST_CASE(host_made_values_larger_than_memory_are_refused_before_allocating) {
  // These would need terabytes of host memory (Note [Host memory]): an OutOfMemoryError naming
  // the op, the shape and the bytes, raised before anything is allocated (no std::bad_alloc).
  expect_error<ravel::OutOfMemoryError>("rand({2^40})", [] { Tensor::rand({k40}, 7); },
                                        {"rand", "[1099511627776]", "bytes of host memory", "physical memory"});
  expect_error<ravel::OutOfMemoryError>("randn({2^40})", [] { Tensor::randn({k40}, 7); }, {"randn", "[1099511627776]"});
  expect_error<ravel::OutOfMemoryError>("arange(0, 1e15)", [] { Tensor::arange(0, 1e15); }, {"arange", "[1000000000000000]"});
  expect_error<ravel::OutOfMemoryError>("linspace(0, 1, 2^50)", [] { Tensor::linspace(0, 1, int64_t{1} << 50); },
                                        {"linspace", "bytes"});
}

BOOST_AUTO_TEST_CASE(one_hot_of_a_huge_class_count_builds_without_allocating) {
  // one_hot(1 << 40) used to make a 2^40-element range on the host (8 TiB) while building the
  // graph; now the range is two ~2^20-element pieces, and the result is lazy. (Realizing it fails
  // with an OutOfMemoryError: tests/core/test_memory_limit.cpp.)
  Tensor h = Tensor::from_vector<int64_t>({0, 5}, {2}).one_hot(k40);
  BOOST_TEST(h.shape() == (Shape{2, k40}));
  // Above 2^16 classes the two-piece range gives the same one-hot as a plain one.
  Tensor idx = Tensor::from_vector<int64_t>({0, 70000, 99999, 65536}, {4});
  Tensor big = idx.one_hot(100000, DType::I32);
  auto sums = big.sum(1).to_vector<int64_t>();
  BOOST_TEST(sums == (std::vector<int64_t>{1, 1, 1, 1}), boost::test_tools::per_element());
  auto at = big.argmax(1).to_vector<int64_t>();
  BOOST_TEST(at == (std::vector<int64_t>{0, 70000, 99999, 65536}), boost::test_tools::per_element());
}
