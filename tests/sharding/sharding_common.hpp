// Shared helpers of the sharding tests: the tbb_cpu devices CTest asked for (RAVEL_TBB_DEVICES),
// meshes of the sizes the issue names, deterministic data, and comparisons against the same
// program on one device.
#pragma once

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

// Printable in Boost.Test's messages.
namespace ravel {
inline std::ostream& operator<<(std::ostream& o, const Device& d) { return o << d.str(); }
inline std::ostream& operator<<(std::ostream& o, const Sharding& s) { return o << s.str(); }
}  // namespace ravel

namespace stest {

using ravel::Device;
using ravel::DType;
using ravel::Shape;
using ravel::Tensor;

inline std::vector<Device> tbb_devices() {
  std::vector<Device> out;
  for (const auto& d : ravel::Runtime::get().devices())
    if (d.device.backend() == "tbb_cpu") out.push_back(d.device);
  return out;
}

// The first n tbb_cpu devices (the test fails, not skips, when CTest gave fewer).
inline std::vector<Device> mesh(size_t n) {
  std::vector<Device> all = tbb_devices();
  BOOST_TEST_REQUIRE(all.size() >= n, "need " << n << " tbb_cpu devices (RAVEL_TBB_DEVICES), have " << all.size());
  return std::vector<Device>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
}

inline const std::vector<size_t> kMeshSizes = {1, 2, 3, 4, 8};

// Deterministic values in [-2, 2) with a few exact zeros; integral in integer dtypes.
inline std::vector<double> pattern(int64_t n, int salt = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>((i * 37 + salt * 11) % 41) / 10.0 - 2.0;
  return v;
}

inline Tensor data(const Shape& shape, int salt = 0, DType dt = DType::F32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v = pattern(n, salt);
  if (!ravel::is_float(dt))
    for (auto& x : v) x = std::round(x * 10) + (dt == DType::U8 || dt == DType::Bool ? 20 : 0);
  if (dt == DType::Bool)
    for (auto& x : v) x = std::fmod(x, 2.0) != 0;
  return Tensor::from_vector<double>(v, shape).cast(dt);
}

// Bitwise equality of two tensors' values (read as f64, after a check of shape and dtype).
inline void check_exact(const Tensor& got, const Tensor& want) {
  BOOST_TEST_REQUIRE(got.shape() == want.shape());
  BOOST_TEST_REQUIRE(static_cast<int>(got.dtype()) == static_cast<int>(want.dtype()));
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    if (std::memcmp(&g[i], &w[i], sizeof(double)) != 0 && !(std::isnan(g[i]) && std::isnan(w[i]))) {
      BOOST_ERROR("element " << i << ": got " << g[i] << ", want " << w[i]);
      return;
    }
}

// Agreement within a float tolerance (sums over devices add in another order than on one).
inline void check_close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  BOOST_TEST_REQUIRE(got.shape() == want.shape());
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::fabs(g[i] - w[i]) <= tol * (1 + std::fabs(w[i]))) && !(std::isnan(g[i]) && std::isnan(w[i]))) {
      BOOST_ERROR("element " << i << ": got " << g[i] << ", want " << w[i]);
      return;
    }
}

// Every part of a sharded tensor lives on its device and has the size its bounds say.
inline void check_parts(const Tensor& t) {
  auto s = t.sharding();
  BOOST_TEST_REQUIRE(s.has_value());
  std::vector<Tensor> parts = t.shards();
  BOOST_TEST_REQUIRE(parts.size() == s->devices.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    BOOST_TEST(parts[i].device() == s->devices[i]);
    BOOST_TEST(!parts[i].sharding().has_value());
    Shape want = t.shape();
    if (s->axis) want[*s->axis] = s->bounds[i + 1] - s->bounds[i];
    BOOST_TEST(parts[i].shape() == want);
  }
}

// The collective ops, and one step of each as a host loop computes it (the reference).
inline const ravel::CollectiveOp kCollectiveOps[] = {ravel::CollectiveOp::Sum, ravel::CollectiveOp::Max,
                                                     ravel::CollectiveOp::Min, ravel::CollectiveOp::Prod};
inline double host_combine(double a, double b, ravel::CollectiveOp op) {
  switch (op) {
    case ravel::CollectiveOp::Sum: return a + b;
    case ravel::CollectiveOp::Prod: return a * b;
    case ravel::CollectiveOp::Max: return std::max(a, b);
    case ravel::CollectiveOp::Min: return std::min(a, b);
  }
  return 0;
}

// Device k's part of `len` elements, value(k, i), for k < n: stacked along axis 0 and split one
// part per device of mesh(n).
template <class Value>
Tensor parts_on_mesh(size_t n, int64_t len, DType dt, Value value) {
  std::vector<double> all;
  for (size_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < len; ++i) all.push_back(value(static_cast<int64_t>(k), i));
  return Tensor::from_vector<double>(all, {static_cast<int64_t>(n) * len}).cast(dt).shard(mesh(n), 0);
}

// RAVEL_PLUGIN_COLLECTIVES set for the scope (the plugin's collectives or the composition), then
// what CTest gave restored.
class CollectivesEnv {
 public:
  explicit CollectivesEnv(const char* v) {
    if (const char* old = std::getenv("RAVEL_PLUGIN_COLLECTIVES")) old_ = old;
    setenv("RAVEL_PLUGIN_COLLECTIVES", v, 1);
  }
  ~CollectivesEnv() {
    if (old_) setenv("RAVEL_PLUGIN_COLLECTIVES", old_->c_str(), 1);
    else unsetenv("RAVEL_PLUGIN_COLLECTIVES");
  }
  CollectivesEnv(const CollectivesEnv&) = delete;
  CollectivesEnv& operator=(const CollectivesEnv&) = delete;

 private:
  std::optional<std::string> old_;
};

}  // namespace stest
