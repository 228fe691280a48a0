// Sharded tensors on the backend under test (RAVEL_TEST_BACKEND: tbb_cpu in CTest, the HIP
// emulator in scripts/check-hip.sh, zecl in scripts/check-level-zero.sh) and on a mixed mesh of
// its devices and tbb_cpu:0: gathers are exact, all_reduce and reduce_scatter match a host
// loop, all_gather is exact, and a
// data-parallel gradient step matches the same step on one device. tests/sharding covers every
// rule on tbb_cpu; this file checks that nothing there depends on the backend. Kept small: a GPU
// stand-in compiles every kernel it runs.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <string>

#include "ravel/ravel.hpp"

using ravel::Device;
using ravel::Tensor;

namespace {

std::string backend() {
  const char* v = std::getenv("RAVEL_TEST_BACKEND");
  return v && *v ? v : "tbb_cpu";
}

std::vector<Device> devices_of(const std::string& name) {
  std::vector<Device> out;
  for (const auto& d : ravel::Runtime::get().devices())
    if (d.device.backend() == name) out.push_back(d.device);
  return out;
}

// The backend's devices, and the same plus tbb_cpu:0 when the backend is another plugin.
std::vector<std::vector<Device>> meshes() {
  std::vector<Device> own = devices_of(backend());
  BOOST_TEST_REQUIRE(own.size() >= 2u, "need two devices of " << backend());
  std::vector<std::vector<Device>> out{own};
  if (backend() != "tbb_cpu") {
    std::vector<Device> mixed = own;
    mixed.push_back(Device("tbb_cpu", 0));
    out.push_back(mixed);
  }
  return out;
}

std::string names(const std::vector<Device>& m) {
  std::string s;
  for (const auto& d : m) s += (s.empty() ? "" : ", ") + d.str();
  return s;
}

Tensor values(int64_t n, int salt, const Device& d) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>((i * 13 + salt) % 29) / 8.0f - 1.5f;
  return Tensor::from_vector<float>(v, {n}, d);
}

}  // namespace

BOOST_AUTO_TEST_CASE(sharded_tensors_on_the_backend_and_a_mixed_mesh) {
  for (const auto& mesh : meshes()) {
    BOOST_TEST_CONTEXT("mesh " << names(mesh)) {
      const Device home = mesh[0];
      const auto n = static_cast<int64_t>(mesh.size());
      // Gather is exact; all_reduce of each device's values is the host sum (exact: eighths).
      Tensor x = values(n * 5, 1, home);
      Tensor s = x.shard(mesh, 0);
      BOOST_TEST(s.to(mesh.back()).to_vector<float>() == x.to_vector<float>());
      std::vector<float> host = x.to_vector<float>(), want(5, 0.0f);
      for (int64_t k = 0; k < n; ++k)
        for (int64_t i = 0; i < 5; ++i) want[static_cast<size_t>(i)] += host[static_cast<size_t>(k * 5 + i)];
      Tensor r = ravel::all_reduce(s);
      for (const Tensor& rep : r.shards()) BOOST_TEST(rep.to_vector<float>() == want, boost::test_tools::per_element());
      // reduce_scatter and all_gather (the plugin's ABI 1.12 members on a one-plugin mesh under
      // RAVEL_PLUGIN_COLLECTIVES=1; the composition otherwise): exact sums of eighths and copies.
      Tensor y = values(n * n * 4, 4, home);
      const std::vector<float> yh = y.to_vector<float>();
      std::vector<float> scattered(static_cast<size_t>(n * 4), 0.0f);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < n * 4; ++i) scattered[static_cast<size_t>(i)] += yh[static_cast<size_t>(j * n * 4 + i)];
      Tensor rs = ravel::reduce_scatter(y.shard(mesh, 0));
      BOOST_TEST(rs.sharding().value().axis.value() == 0);
      BOOST_TEST(rs.to(home).to_vector<float>() == scattered, boost::test_tools::per_element());
      Tensor ag = ravel::all_gather(s);
      BOOST_TEST(ag.sharding().value().replicated());
      for (const Tensor& rep : ag.shards()) BOOST_TEST(rep.to_vector<float>() == host, boost::test_tools::per_element());
      // A data-parallel gradient: batch split, weights replicated, against one device.
      Tensor a = values(n * 4 * 3, 2, home).reshape({n * 4, 3}), w = values(6, 3, home).reshape({3, 2});
      auto f = [](const std::vector<Tensor>& in) { return (in[0].matmul(in[1]).tanh() - 0.25).square().mean(); };
      const Tensor g1 = ravel::grad(f, 1)({a, w});
      const Tensor gn = ravel::grad(f, 1)({a.shard(mesh, 0), w.replicate(mesh)});
      BOOST_TEST(gn.sharding().value().replicated());
      std::vector<float> got = gn.to_vector<float>(), ref = g1.to_vector<float>();
      for (size_t i = 0; i < ref.size(); ++i) BOOST_TEST(std::fabs(got[i] - ref[i]) <= 1e-5f * (1 + std::fabs(ref[i])));
    }
  }
}
