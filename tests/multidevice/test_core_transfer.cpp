// The core's Transfer kernel between devices of one plugin: it uses buffer_copy_peer, which queues
// the copy on both devices, so every value must arrive exactly, for every pair of devices, every
// dtype, zero and odd sizes, views, and chains of copies with kernels in between that nobody
// synchronises; and between that plugin and tbb_cpu (through host memory), a mixed mesh.
// The backend under test and its device count come from the environment, which CTest and the
// backends' check scripts set:
//   RAVEL_TEST_BACKEND       the backend (default tbb_cpu)
//   RAVEL_TEST_DEVICES       how many devices it must have (default: RAVEL_TBB_DEVICES)
//   RAVEL_TEST_PLUGIN_DIR    a folder to load it from (the HIP emulator's), if not the default
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <string>

#include "ravel/ravel.hpp"

using ravel::Device;
using ravel::DType;
using ravel::Runtime;
using ravel::Tensor;

namespace {

std::string env(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
const std::string kBackend = env("RAVEL_TEST_BACKEND", "tbb_cpu");

struct BackendRuntime {
  BackendRuntime() {
    const std::string dir = env("RAVEL_TEST_PLUGIN_DIR");
    if (dir.empty()) return;
    ravel::RuntimeOptions o;
    o.extra_paths = {dir};
    Runtime::reset(o);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(BackendRuntime);

std::vector<Device> backend_devices() {
  std::vector<Device> out;
  for (const auto& d : Runtime::get().devices())
    if (d.device.backend() == kBackend) out.push_back(d.device);
  return out;
}

// Exact in every dtype: small integers (0/1 for bool).
std::vector<double> expected(int64_t n, DType dt, int salt) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = dt == DType::Bool ? double((i + salt) % 2) : double((i * 7 + salt) % 101);
  return v;
}

// Zero and odd sizes; a GPU backend compiles a kernel per shape and dtype (minutes on the CPU
// stand-ins in CI), so it gets two sizes, tbb_cpu four.
std::vector<int64_t> sizes() {
  if (kBackend == "tbb_cpu") return {0, 1, 7, 1031};
  return {0, 1031};
}

BOOST_AUTO_TEST_CASE(the_environment_gave_several_devices) {
  const std::string want = env("RAVEL_TEST_DEVICES", env("RAVEL_TBB_DEVICES").c_str());
  BOOST_TEST_REQUIRE(!want.empty(), "run through CTest or a check script, which set RAVEL_TEST_DEVICES");
  BOOST_TEST(backend_devices().size() == static_cast<size_t>(std::atoi(want.c_str())), Runtime::get().available_devices());
}

BOOST_AUTO_TEST_CASE(transfers_between_every_pair_are_exact) {
  const auto devices = backend_devices();
  BOOST_TEST_REQUIRE(devices.size() >= 2u);
  const DType dtypes[] = {DType::Bool, DType::U8, DType::I32, DType::I64, DType::F32, DType::F64};
  for (const Device& from : devices)
    for (const Device& to : devices)
      for (DType dt : dtypes)
        for (int64_t n : sizes()) {
          BOOST_TEST_CONTEXT(from.str() << " -> " << to.str() << ", " << static_cast<int>(dt) << " x " << n) {
            const std::vector<double> want = expected(n, dt, static_cast<int>(from.index()));
            Tensor x = Tensor::from_vector<double>(want, {n}, from).cast(dt);  // a kernel on `from`
            Tensor y = x.to(to);
            BOOST_TEST(y.device().str() == to.str());
            // Read through a kernel on `to`, queued right behind the copy.
            BOOST_TEST(y.cast(DType::F64).to_vector<double>() == want);
          }
        }
}

BOOST_AUTO_TEST_CASE(views_and_chains_of_transfers_with_kernels_between) {
  const auto devices = backend_devices();
  BOOST_TEST_REQUIRE(devices.size() >= 2u);
  Tensor x = Tensor::arange(0, 12 * 37, 1, DType::F32, devices[0]).reshape({12, 37});
  Tensor acc = x.transpose();  // a view: gathered on its device, then copied
  std::vector<float> want(12 * 37);
  for (int64_t i = 0; i < 37; ++i)
    for (int64_t j = 0; j < 12; ++j) want[static_cast<size_t>(i * 12 + j)] = static_cast<float>(j * 37 + i);
  // Around the ring twice, adding 1 on every device; nothing is read until the end.
  int hops = 0;
  for (int round = 0; round < 2; ++round)
    for (size_t k = 1; k <= devices.size(); ++k) {
      acc = acc.to(devices[k % devices.size()]) + 1.0f;
      ++hops;
    }
  for (float& w : want) w += static_cast<float>(hops);
  BOOST_TEST(acc.device().str() == devices[0].str());
  BOOST_TEST(acc.to_vector<float>() == want);
  // A result that needs every device: the sum of each device's share of work.
  Tensor total = Tensor::zeros({5}, DType::F64, devices[0]);
  for (size_t k = 0; k < devices.size(); ++k)
    total = total + (Tensor::full({5}, static_cast<double>(k + 1), DType::F64, devices[k]) * 2.0).to(devices[0]);
  const double n = static_cast<double>(devices.size());
  BOOST_TEST(total.to_vector<double>() == std::vector<double>(5, n * (n + 1)));
}

// A mixed mesh: the backend's devices and tbb_cpu:0 (different plugins: through host memory).
BOOST_AUTO_TEST_CASE(transfers_to_and_from_another_plugin) {
  if (kBackend == "tbb_cpu") {
    BOOST_TEST_MESSAGE("skipped: the backend under test is tbb_cpu itself");
    return;
  }
  const auto devices = backend_devices();
  BOOST_TEST_REQUIRE(!devices.empty());
  const Device cpu("tbb_cpu", 0);
  Tensor x = Tensor::arange(0, 1031, 1, DType::F32, cpu);
  Tensor acc = x;
  for (const Device& d : devices) acc = (acc.to(d) * 2.0f).to(cpu) + 1.0f;
  std::vector<float> want(1031);
  for (size_t i = 0; i < want.size(); ++i) {
    float v = static_cast<float>(i);
    for (size_t k = 0; k < devices.size(); ++k) v = v * 2.0f + 1.0f;
    want[i] = v;
  }
  BOOST_TEST(acc.to_vector<float>() == want);
}

}  // namespace
