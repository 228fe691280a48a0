// Helpers shared by the global-view suites (test_mesh_tensor.cpp, test_entered_buckets.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "ravel/ravel.hpp"

namespace mesh_support {

inline const ravel::Device kOne{"tbb_cpu", 0};

// This rank's local devices: the first two tbb_cpu devices (RAVEL_TBB_DEVICES=2 under mpirun).
inline std::vector<ravel::Device> local_devices() {
  std::vector<ravel::Device> out;
  for (const auto& d : ravel::Runtime::get().devices())
    if (d.device.backend() == "tbb_cpu" && out.size() < 2) out.push_back(d.device);
  return out;
}

// The largest difference between two tensors of the same shape (infinity when shapes differ).
inline double diff(const ravel::Tensor& a, const ravel::Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  const auto va = a.to(kOne).to_vector<double>(), vb = b.to(kOne).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vb[i]));
  return worst;
}

}  // namespace mesh_support
