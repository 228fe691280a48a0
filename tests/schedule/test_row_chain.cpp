#include <boost/test/unit_test.hpp>
#include <cstdio>
#include "ravel/ravel.hpp"
#include "policy_scope.hpp"
using ravel::Tensor;
namespace nn = ravel::nn;
BOOST_AUTO_TEST_CASE(probe) {
  PolicyScope scope(ravel::FusionPolicy::Full);
  nn::LayerNorm ln(64, 1e-5);
  Tensor x = Tensor::from_vector(std::vector<float>(8 * 64, 1.0f), {8, 64});
  x.requires_grad_();
  Tensor y = ln(x);
  y.realize();
  std::fprintf(stderr, "forward: %lld kernels\n", (long long)ravel::last_realization_stats().kernels());
  (y * y).sum().backward();
  std::fprintf(stderr, "backward: %lld kernels\n", (long long)ravel::last_realization_stats().kernels());
  Tensor z = x.detach();
  Tensor r = z * (z.square().mean(-1, true) + 1e-5).sqrt().recip() * ln.weight.detach();
  r.realize();
  std::fprintf(stderr, "rms: %lld kernels\n", (long long)ravel::last_realization_stats().kernels());
}
