// Uses an installed Ravel: a small matmul and reduction, checked against values computed by hand.
// Exits non-zero if anything is wrong. No RAVEL_* environment is needed: the installed core
// finds its installed plugins (lib/ravel/plugins) by itself.
#include <ravel/ravel.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() try {
  using ravel::Tensor;
  // a = [[1, 2, 3], [4, 5, 6]], b = [[1, 0], [0, 1], [1, 1]]
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  const std::vector<float> c = a.matmul(b).to_vector<float>();  // [[4, 5], [10, 11]]
  const float total = (a * 2.0f).sum().item<float>();            // 42
  const std::vector<float> want = {4, 5, 10, 11};
  bool ok = c.size() == want.size() && std::fabs(total - 42.0f) < 1e-5f;
  for (size_t i = 0; ok && i < c.size(); ++i) ok = std::fabs(c[i] - want[i]) < 1e-5f;
  std::printf("ravel_consumer on %s: matmul = [%g %g %g %g], sum = %g -> %s\n",
              ravel::Runtime::get().default_device().str().c_str(), c.size() > 0 ? c[0] : -1.0f,
              c.size() > 1 ? c[1] : -1.0f, c.size() > 2 ? c[2] : -1.0f, c.size() > 3 ? c[3] : -1.0f,
              total, ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ravel_consumer: %s\n", e.what());
  return 1;
}
