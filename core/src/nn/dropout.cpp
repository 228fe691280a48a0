// Dropout with counter-based masks: mask k of a Dropout seeded s is a pure function of (s, k).
#include "ravel/nn.hpp"

namespace ravel::nn {

namespace {
// SplitMix64's finaliser: a bijection of 64 bits whose outputs for neighbouring inputs share
// nothing, so (seed, call) pairs of different modules do not land on the same Threefry key
// (seed + call would: module seeded 1 at call 1 and module seeded 2 at call 0).
uint64_t dropout_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

Dropout::Dropout(double p_, uint64_t seed_) : p(p_), seed(seed_) {
  RAVEL_CHECK(p >= 0 && p <= 1, ValueError, "Dropout expects a probability 0 <= p <= 1, got ", p);
}

Tensor Dropout::operator()(const Tensor& x) {
  RAVEL_CHECK(p >= 0 && p <= 1, ValueError, "Dropout expects a probability 0 <= p <= 1, got ", p);
  RAVEL_CHECK(is_float(x.dtype()), DTypeError, "Dropout expects a floating-point input, got ", dtype_name(x.dtype()));
  if (!is_training() || p == 0) return x;
  const uint64_t key = dropout_mix64(seed ^ dropout_mix64(calls++));
  if (p == 1) return x * 0.0;  // torch: every element dropped (and no division by zero)
  // Kept where u >= p: probability 1 - p, as u is uniform on [0, 1). The mask is drawn in f32
  // (its granularity 2^-24 is far below any p one would use) whatever x's dtype.
  Tensor keep = Tensor::rand(x.shape(), key, DType::F32, x.device()).ge(Tensor::full({}, p, DType::F32, x.device()));
  return Tensor::where(keep, x * (1.0 / (1.0 - p)), Tensor::zeros({}, x.dtype(), x.device()));
}

}  // namespace ravel::nn
