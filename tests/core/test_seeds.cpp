// The worked examples of the seed documents (shared/seeds/000_*, Tensorken part 1).
#include "common.hpp"

using namespace rtest;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_CASE(broadcast_3x2_plus_2) {
  // [[2,1],[4,2],[8,4]] + [10,100] = [[12,101],[14,102],[18,104]]
  auto a = Tensor::from_vector<float>({2, 1, 4, 2, 8, 4}, {3, 2});
  auto b = Tensor::from_vector<float>({10, 100}, {2});
  auto c = a.add(b);
  BOOST_TEST(c.shape() == (Shape{3, 2}));
  BOOST_TEST(c.to_vector<float>() == (std::vector<float>{12, 101, 14, 102, 18, 104}), tt::per_element());
}

// Tensorken's eye (copied from tinygrad), step by step with the printed intermediate values:
//   scalar(1) -> pad [(0, dim)] -> [1 0 0 0] -> reshape [1, dim+1] -> expand [dim, dim+1]
//   -> reshape [dim*(dim+1)] = [1 0 0 0 1 0 0 0 1 0 0 0] -> crop [(0, dim*dim)] -> reshape [dim, dim]
// Ravel's scalar is 0-d, so it is first reshaped to [1]; crop is shrink.
Tensor tensorken_eye(int64_t dim, DType dt) {
  auto t = Tensor::scalar(1.0, dt).reshape({1});
  t = t.pad({{0, dim}});
  t = t.reshape({1, dim + 1});
  t = t.expand({dim, dim + 1});
  t = t.reshape({dim * (dim + 1)});
  t = t.shrink({{0, dim * dim}});
  return t.reshape({dim, dim});
}

BOOST_AUTO_TEST_CASE(eye_equals_naive_identity_and_tensorken_construction) {
  // The printed intermediate for dim = 3.
  auto mid = Tensor::scalar(1.0).reshape({1}).pad({{0, 3}}).reshape({1, 4}).expand({3, 4}).reshape({12});
  BOOST_TEST(mid.to_vector<float>() == (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0}), tt::per_element());
  for (int64_t dim : {1, 2, 3, 4, 7})
    for (DType dt : {DType::F32, DType::F64, DType::I32})
      guarded("dim=" + std::to_string(dim) + " " + ravel::dtype_name(dt), [&] {
        NDArray naive({dim, dim}, dt);
        for (int64_t i = 0; i < dim; ++i) naive[{i, i}] = 1;
        check_tensor(Tensor::eye(dim, dt), naive);
        check_tensor(tensorken_eye(dim, dt), naive);
        BOOST_TEST(values(Tensor::eye(dim, dt)) == values(tensorken_eye(dim, dt)), tt::per_element());
      });
}

BOOST_AUTO_TEST_CASE(linspace_matmul) {
  // l = linspace(0, 11, 12).reshape([3, 4]); r = linspace(12, 23, 12).reshape([4, 3])
  // l.matmul(r) = [[114 120 126] [378 400 422] [642 680 718]]
  auto l = Tensor::linspace(0, 11, 12).reshape({3, 4});
  auto r = Tensor::linspace(12, 23, 12).reshape({4, 3});
  BOOST_TEST(l.to_vector<float>() == (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), tt::per_element());
  BOOST_TEST(r.to_vector<float>() == (std::vector<float>{12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}),
             tt::per_element());
  auto c = l.matmul(r);
  BOOST_TEST(c.shape() == (Shape{3, 3}));
  BOOST_TEST(c.to_vector<float>() == (std::vector<float>{114, 120, 126, 378, 400, 422, 642, 680, 718}),
             tt::per_element());
  // Tensorken's own construction: broadcasted multiply then sum, via reshape/transpose.
  auto lb = l.reshape({3, 1, 4});
  auto rb = r.reshape({1, 4, 3}).transpose(2, 1);  // [1, 3, 4]
  auto c2 = lb.mul(rb).sum(-1);
  BOOST_TEST(c2.to_vector<float>() == c.to_vector<float>(), tt::per_element());
}

BOOST_AUTO_TEST_CASE(transposed_reshape_example) {
  // Tensorken: a (6, 2) tensor has strides (2, 1); permute [1, 0] gives shape (2, 6) strides
  // (1, 2); reshaping that to (2, 2, 3) needs a copy, with row-major values of the transpose.
  auto x = Tensor::arange(12).reshape({6, 2});
  BOOST_TEST(x.strides() == (std::vector<int64_t>{2, 1}));
  auto p = x.permute({1, 0});
  BOOST_TEST(p.shape() == (Shape{2, 6}));
  BOOST_TEST(p.strides() == (std::vector<int64_t>{1, 2}));
  auto r = p.reshape({2, 2, 3});
  // np.arange(12).reshape(6, 2).T.reshape(2, 2, 3).ravel() -> [0 2 4 6 8 10 1 3 5 7 9 11]
  BOOST_TEST(r.to_vector<int64_t>() == (std::vector<int64_t>{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}), tt::per_element());
}
