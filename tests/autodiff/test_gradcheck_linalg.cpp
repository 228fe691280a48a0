// Gradient checks of matmul (2-D, 1-D on either side, batched, broadcast batches, transposed
// operands), dot, gather (with repeated indices), one_hot, concatenate and stack, in f64,
// against central finite differences (gradcheck.hpp explains eps and the tolerance).
#include "gradcheck.hpp"

using namespace adtest;

namespace {

Tensor mm(const Tensor& a, const Tensor& b) { return a.matmul(b); }

BOOST_AUTO_TEST_CASE(matmul_shapes) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},          // 2-D
      {{4}, {4, 5}},             // 1-D lhs: promoted to [1,4], the axis removed again
      {{3, 4}, {4}},             // 1-D rhs
      {{4}, {4}},                // both 1-D: a scalar
      {{1, 1}, {1, 1}},          // trivial
      {{2, 3, 4}, {2, 4, 5}},    // batched
      {{2, 3, 4}, {4, 5}},       // batched lhs, shared rhs (gradient of rhs sums over the batch)
      {{4, 5}, {2, 5, 3}},       // shared lhs, batched rhs
      {{2, 1, 3, 4}, {3, 4, 2}}, // broadcast batches -> [2, 3, 3, 2]
      {{2, 3, 4}, {4}},          // batched lhs, 1-D rhs
      {{4}, {2, 4, 3}},          // 1-D lhs, batched rhs
  };
  uint64_t seed = 10;
  for (const auto& [sa, sb] : cases) {
    seed += 2;
    gradcheck2("matmul " + shape_text(sa) + " @ " + shape_text(sb), mm, normal(sa, seed), normal(sb, seed + 1), seed);
  }
}

BOOST_AUTO_TEST_CASE(matmul_of_views_and_compositions) {
  Tensor a = normal({4, 3}, 100), b = normal({5, 4}, 101), c = normal({3, 4}, 102);
  gradcheck2("a^T @ b^T (transposed operands)", [](const Tensor& x, const Tensor& y) {
    return x.transpose().matmul(y.transpose());
  }, a, b, 100);
  gradcheck2("a @ a^T (one input on both sides)", [](const Tensor& x, const Tensor&) {
    return x.matmul(x.transpose());
  }, a, b, 101);
  gradcheck2("(c @ a) squared, both inputs", [](const Tensor& x, const Tensor& y) {
    return x.matmul(y).square();
  }, c, a, 102);
  gradcheck2("tanh(x @ W + b) (a dense layer)", [](const Tensor& x, const Tensor& w) {
    return (x.matmul(w) + Tensor::from_vector<double>({0.1, -0.2, 0.3}, {3})).tanh();
  }, b, a, 103);
  gradcheck2("flipped lhs @ sliced rhs", [](const Tensor& x, const Tensor& y) {
    return x.flip(0).matmul(y.slice(0, std::nullopt, std::nullopt, -1).shrink({{0, 4}, {0, 2}}));
  }, c, normal({4, 3}, 104), 104);
  gradcheck2("two-layer MLP: relu(x @ W1) @ W2, summed", [](const Tensor& w1, const Tensor& w2) {
    Tensor x = Tensor::from_vector<double>({0.3, -1.2, 0.8, 2.0, -0.5, 0.1, 1.1, -0.7}, {2, 4});
    return x.matmul(w1).tanh().matmul(w2).sum();
  }, normal({4, 3}, 105), normal({3, 2}, 106), 105);
}

BOOST_AUTO_TEST_CASE(dot_products) {
  gradcheck2("dot [5].[5]", [](const Tensor& x, const Tensor& y) { return x.dot(y); }, normal({5}, 200),
             normal({5}, 201), 200);
  gradcheck2("dot(x, x) + dot(x, y)", [](const Tensor& x, const Tensor& y) { return x.dot(x) + x.dot(y); },
             normal({7}, 202), normal({7}, 203), 202);
  gradcheck2("dot of a row and a column", [](const Tensor& x, const Tensor& y) {
    return x.at(1).dot(y.select(1, 2));
  }, normal({3, 4}, 204), normal({4, 3}, 205), 204);
}

BOOST_AUTO_TEST_CASE(gather_with_repeated_indices) {
  // Along axis 1 of [3,4]: row 0 takes column 2 twice (its gradient accumulates).
  Tensor idx1 = Tensor::from_vector<int64_t>({2, 2, 0, 3, 1, 1, 0, 3, 3}, {3, 3});
  gradcheck1("gather axis 1", [idx1](const Tensor& x) { return x.gather(1, idx1); }, normal({3, 4}, 300), 300);
  // Along axis 0 of [3,4] with index [2,4].
  Tensor idx0 = Tensor::from_vector<int64_t>({0, 2, 2, 1, 0, 0, 1, 2}, {2, 4});
  gradcheck1("gather axis 0", [idx0](const Tensor& x) { return x.gather(0, idx0); }, normal({3, 4}, 301), 301);
  gradcheck1("gather axis -1 of exp(x)", [idx1](const Tensor& x) { return x.exp().gather(-1, idx1).sin(); },
             normal({3, 4}, 302), 302);
  // 3-D, axis 2, i32 indices.
  Tensor idx3 = Tensor::from_vector<int32_t>({1, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 0}, {2, 3, 2});
  gradcheck1("gather 3-D axis 2 (i32 index)", [idx3](const Tensor& x) { return x.gather(2, idx3); },
             normal({2, 3, 2}, 303), 303);
  // The gradient of picking log-probabilities (negative log-likelihood of a classifier).
  Tensor labels = Tensor::from_vector<int64_t>({1, 3, 0}, {3, 1});
  gradcheck1("nll: -gather(log_softmax(x), labels).mean()", [labels](const Tensor& x) {
    return -x.log_softmax(-1).gather(1, labels).mean();
  }, normal({3, 4}, 304), 304);
}

BOOST_AUTO_TEST_CASE(one_hot_is_a_constant) {
  Tensor labels = Tensor::from_vector<int64_t>({2, 0, 1}, {3});
  gradcheck1("x * one_hot(labels)", [labels](const Tensor& x) {
    return x * labels.one_hot(3).cast(DType::F64);
  }, normal({3, 3}, 400), 400);
}

BOOST_AUTO_TEST_CASE(concatenate_and_stack) {
  using V = std::vector<Tensor>;
  Tensor a = normal({2, 3}, 500), b = normal({4, 3}, 501), c = normal({2, 2}, 502), d = normal({2, 3}, 503);
  gradcheck("concatenate axis 0 [2,3]+[4,3]", [](const V& v) { return Tensor::concatenate({v[0], v[1]}, 0); }, {a, b}, 500);
  gradcheck("concatenate axis 1 [2,3]+[2,2]+[2,3]", [](const V& v) {
    return Tensor::concatenate({v[0], v[1], v[2]}, 1);
  }, {a, c, d}, 501);
  gradcheck("concatenate axis -1, one input twice", [](const V& v) {
    return Tensor::concatenate({v[0], v[1], v[0]}, -1).sin();
  }, {a, c}, 502);
  gradcheck("concatenate 1-D", [](const V& v) { return Tensor::concatenate({v[0], v[1]}); },
            {normal({3}, 504), normal({2}, 505)}, 503);
  for (int64_t axis : {0, 1, 2, -1}) {
    gradcheck("stack 3 x [2,3] axis " + std::to_string(axis), [axis](const V& v) {
      return Tensor::stack({v[0], v[1], v[2]}, axis);
    }, {a, d, normal({2, 3}, 506)}, 504);
  }
  gradcheck("stack then reduce: stack([a, a*d]).prod(0)", [](const V& v) {
    return Tensor::stack({v[0], v[0] * v[1]}, 0).prod(0);
  }, {a, d}, 505);
}

}  // namespace
