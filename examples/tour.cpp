// A short tour of Ravel, in the style of Tensorken's tour: each line shows an expression and
// the tensor it evaluates to. Everything runs through the oneTBB plugin, loaded at run time.
#include <iostream>

#include "ravel/ravel.hpp"

using ravel::Tensor;

#define SHOW(expr)                                   \
  do {                                               \
    std::cout << ">>> " #expr "\n" << (expr) << "\n\n"; \
  } while (0)

int main() try {
  std::cout << "Ravel tour — running on " << ravel::Runtime::get().default_device().str() << "\n\n";

  std::cout << "# Creating tensors: data in row-major order, shaped\n";
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  SHOW(t);
  SHOW(Tensor::arange(0, 6).reshape({2, 3}));
  SHOW(Tensor::linspace(0, 1, 5));
  SHOW(Tensor::eye(3));

  std::cout << "# Unary operations map every element\n";
  SHOW(t.exp());
  SHOW(t.log());

  std::cout << "# Binary operations, with NumPy broadcasting\n";
  Tensor t1 = Tensor::from_vector<float>({0, 1, 2, 3}, {2, 2});
  Tensor t2 = Tensor::from_vector<float>({6, 7, 8, 9}, {2, 2});
  SHOW(t1 + t2);
  SHOW(t1 * t2);
  Tensor a = Tensor::from_vector<float>({2, 1, 4, 2, 8, 4}, {3, 2});
  SHOW(a + Tensor::from_vector<float>({10, 100}, {2}));  // [3,2] + [2]
  SHOW(a.reshape({3, 1, 2}) + Tensor::from_vector<float>({10, 100, 1000}, {3, 1}).reshape({1, 3, 1}));

  std::cout << "# Reductions over any set of axes\n";
  Tensor c = Tensor::arange(0, 24).reshape({2, 3, 4});
  SHOW(c);
  SHOW(c.sum(0));
  SHOW(c.sum({0, 2}));
  SHOW(c.max(-1, true));
  SHOW(c.cast(ravel::DType::F32).mean(1));

  std::cout << "# Movement ops are views: no data is copied\n";
  SHOW(t.transpose());
  SHOW(t.flip(0));
  SHOW(t.pad({{1, 0}, {0, 1}}));
  SHOW(c.slice({{}, ravel::Slice{std::nullopt, std::nullopt, -1}, ravel::Slice{1, std::nullopt, 2}}));
  SHOW(c.at(1).at(2));
  std::cout << "strides of c.transpose(0, 2): ";
  for (auto s : c.transpose(0, 2).strides()) std::cout << s << " ";
  std::cout << "\n\n";

  std::cout << "# Matrix multiplication (one contraction kernel, no [m, k, n] intermediate)\n";
  Tensor x = Tensor::linspace(0, 11, 12).reshape({3, 4});
  Tensor y = Tensor::linspace(12, 23, 12).reshape({4, 3});
  SHOW(x);
  SHOW(y);
  SHOW(x.matmul(y));
  SHOW(ravel::shape_str(Tensor::ones({3, 4, 1, 2}).matmul(Tensor::ones({1, 2, 3})).shape()));

  std::cout << "# Softmax, comparisons, argmax\n";
  Tensor logits = Tensor::from_vector<float>({1, 2, 3, 1, 5, 1}, {2, 3});
  SHOW(logits.softmax(-1));
  SHOW(logits > 1.5);
  SHOW(logits.argmax(1));
  SHOW(Tensor::randn({2, 4}, /*seed=*/42).to_string({.precision = 4, .show_meta = true}));
  return 0;
} catch (const ravel::Error& e) {
  std::cerr << "tour: " << e.what() << "\n";
  return 1;
}
