// Laziness and the graph: nothing runs until it is read, equal ops share one node
// (hash-consing), and very long chains build, realize and die without deep recursion.
#include "common.hpp"

using namespace rtest;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_CASE(ops_are_lazy_until_read) {
  auto a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  auto b = a.add(a).mul(a).sum(0);
  BOOST_TEST(!b.is_realized());
  auto c = b.exp();
  BOOST_TEST(!c.is_realized());
  BOOST_TEST(!b.is_realized());
  b.realize();
  BOOST_TEST(b.is_realized());
  BOOST_TEST(b.to_vector<float>() == (std::vector<float>{2 * 1 * 1 + 2 * 3 * 3, 2 * 2 * 2 + 2 * 4 * 4}), tt::per_element());
  auto d = a.neg();
  BOOST_TEST(!d.is_realized());
  std::vector<float> dv = d.to_vector<float>();  // reading realizes
  BOOST_TEST(d.is_realized());
  BOOST_TEST(dv == (std::vector<float>{-1, -2, -3, -4}), tt::per_element());
  // realize() returns the tensor itself, and a second realize() is harmless.
  const Tensor& same = d.realize();
  BOOST_TEST(&same == &d);
  BOOST_TEST(d.to_vector<float>() == dv, tt::per_element());
  // Creating ops on a realized tensor is lazy again.
  auto e = d.add(a);
  BOOST_TEST(!e.is_realized());
  BOOST_TEST(e.to_string() == "[[0. 0.]\n [0. 0.]]");
}

BOOST_AUTO_TEST_CASE(hash_consing_shares_nodes) {
  auto a = Tensor::from_vector<float>({1, 2, 3}, {3});
  auto b = Tensor::from_vector<float>({4, 5, 6}, {3});
  BOOST_TEST((a.add(b).node() == a.add(b).node()));
  BOOST_TEST((a.mul(b).sum().node() == a.mul(b).sum().node()));
  BOOST_TEST((a.reshape({3, 1}).expand({3, 3}).node() == a.reshape({3, 1}).expand({3, 3}).node()));
  BOOST_TEST((a.permute({0}).node() == a.permute({0}).node()));
  // Different ops, operands or operand order are different nodes.
  BOOST_TEST((a.add(b).node() != a.mul(b).node()));
  BOOST_TEST((a.add(b).node() != a.add(a).node()));
  BOOST_TEST((a.sub(b).node() != b.sub(a).node()));
  BOOST_TEST((a.sum(0).node() != a.max(0).node()));
  // Two separately created leaves are different nodes even with equal data.
  auto a2 = Tensor::from_vector<float>({1, 2, 3}, {3});
  BOOST_TEST((a2.node() != a.node()));
  // Sharing does not change results.
  auto x = a.add(b), y = a.add(b);
  BOOST_TEST(x.to_vector<float>() == y.to_vector<float>(), tt::per_element());
  BOOST_TEST(y.is_realized());  // same node: realizing x realized y
}

BOOST_AUTO_TEST_CASE(long_chain_no_stack_overflow) {
  // 100,000 elementwise ops: building, realizing and destroying the chain must not recurse per node.
  const int n = 100000;
  {
    Tensor x = Tensor::zeros({4});
    for (int k = 0; k < n; ++k) x = x + 1.0;
    BOOST_TEST(!x.is_realized());
    BOOST_TEST(x.to_vector<float>() == std::vector<float>(4, float(n)), tt::per_element());
  }  // x (and with it the whole chain) dies here
  {
    // A chain that is never realized is destroyed too.
    Tensor y = Tensor::ones({2}, DType::I64);
    for (int k = 0; k < n; ++k) y = y * 1.0 + 1.0;
  }
  {
    // Alternating views and math, then a reduction.
    Tensor z = Tensor::zeros({2, 2}, DType::F64);
    for (int k = 0; k < n / 4; ++k) z = (z + 1.0).transpose();
    BOOST_TEST(z.sum().item<double>() == 4.0 * (n / 4));
  }
}

BOOST_AUTO_TEST_CASE(shared_subexpressions_compute_once_correctly) {
  // A diamond: y is used by both branches; the result must count it once per use.
  auto x = Tensor::arange(0, 6, 1, DType::F32).reshape({2, 3});
  auto y = x * 2.0;
  auto z = y + y.transpose().transpose() + y.sum(1, true);
  // y = [[0,2,4],[6,8,10]], y.sum(1) = [6, 24] -> z = 2y + rowsum
  BOOST_TEST(z.to_vector<float>() == (std::vector<float>{6, 10, 14, 36, 40, 44}), tt::per_element());
  // Reading y afterwards still gives y.
  BOOST_TEST(y.to_vector<float>() == (std::vector<float>{0, 2, 4, 6, 8, 10}), tt::per_element());
}
