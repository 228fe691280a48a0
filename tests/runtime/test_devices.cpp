// Devices: Device::parse, unknown devices, the default device, and a backend whose kernels fail
// (BROKEN_PLUGIN_DIR/kernel_fails: buffers work, execute_program returns an error).
#include "builtin_placement.hpp"
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Device;
using ravel::DType;
using ravel::Runtime;
using ravel::RuntimeOptions;
using ravel::Tensor;
namespace tt = boost::test_tools;

namespace {
const std::string kDir = BROKEN_PLUGIN_DIR;
RuntimeOptions opts(const std::vector<std::string>& dirs) {
  return RuntimeOptions{.config_path = {}, .extra_paths = dirs, .use_environment = false, .use_default_paths = true, .load_plugins = true, .excluded_plugins = {}};
}
bool contains(const std::string& s, const std::string& k) { return s.find(k) != std::string::npos; }
}  // namespace

BOOST_AUTO_TEST_CASE(device_parse) {
  Device a = Device::parse("tbb_cpu");
  BOOST_TEST(a.backend() == "tbb_cpu");
  BOOST_TEST(a.index() == 0);
  Device b = Device::parse("hip:1");
  BOOST_TEST(b.backend() == "hip");
  BOOST_TEST(b.index() == 1);
  BOOST_TEST(b.str() == "hip:1");
  BOOST_TEST((Device::parse("level_zero:12") == Device("level_zero", 12)));
  BOOST_TEST((Device() == Device("tbb_cpu", 0)));
  for (const char* bad : {"x:y", "hip:", ":1", "hip:1:2", "hip:-1", ""})
    BOOST_TEST_CONTEXT("Device::parse(\"" << bad << "\")") {
      try {
        Device::parse(bad);
        BOOST_ERROR("no exception");
      } catch (const ravel::DeviceError& e) {
        if (*bad) BOOST_TEST(contains(e.what(), bad), e.what());
      } catch (const std::exception& e) {
        BOOST_ERROR("wrong exception type: " << e.what());
      }
    }
}

BOOST_AUTO_TEST_CASE(unknown_device_lists_the_available_ones) {
  Runtime& rt = Runtime::reset(opts({}));
  BOOST_TEST((rt.default_device() == builtin_default_device(rt)));
  BOOST_TEST((Tensor::zeros({2}).device() == builtin_default_device(rt)));
  try {
    rt.plugin_for(Device("cuda", 0));
    BOOST_ERROR("no exception");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(contains(e.what(), "cuda"), e.what());
    BOOST_TEST(contains(e.what(), "tbb_cpu:0"), e.what());
  }
  try {
    rt.plugin_for(Device("tbb_cpu", 7));
    BOOST_ERROR("no exception");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(contains(e.what(), "tbb_cpu:7"), e.what());
    BOOST_TEST(contains(e.what(), "available devices: "), e.what());  // what to use instead
  }
  try {  // through the tensor API, at creation or at first use
    Tensor::ones({3}, DType::F32, Device("cuda", 0)).to_vector<float>();
    BOOST_ERROR("no exception");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(contains(e.what(), "cuda"), e.what());
    BOOST_TEST(contains(e.what(), "tbb_cpu"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(failing_kernels_raise_device_error_and_leave_tbb_working) {
  Runtime& rt = Runtime::reset(opts({kDir + "/kernel_fails"}));
  bool found = false;
  for (const auto& d : rt.devices()) found = found || d.device == Device("failing", 0);
  BOOST_TEST_REQUIRE(found, "the kernel-failing plugin did not load");

  // No config: the built-in placement (configs/default.json: hip:0, level_zero:0, tbb_cpu:0)
  // applies, so the default device stays the built-in choice although "failing" was found first.
  BOOST_TEST((rt.default_device() == builtin_default_device(rt)), "default device " << rt.default_device().str());
  const Device bad("failing", 0);
  // Buffers work: data goes in and comes back out without any kernel.
  auto x = Tensor::from_vector<float>({1, 2, 3}, {3}, bad);
  BOOST_TEST((x.device() == bad));
  BOOST_TEST(x.to_vector<float>() == (std::vector<float>{1, 2, 3}), tt::per_element());
  // A computation needs a kernel: DeviceError carrying the plugin's own message.
  auto y = x + 1.0;
  try {
    y.to_vector<float>();
    BOOST_ERROR("no exception");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(contains(e.what(), "kernel exploded on purpose"), e.what());
  } catch (const std::exception& e) {
    BOOST_ERROR("wrong exception type: " << e.what());
  }
  BOOST_TEST(!y.is_realized());
  // Trying again fails the same way (no half-realized state).
  BOOST_CHECK_THROW(y.realize(), ravel::DeviceError);
  BOOST_CHECK_THROW(Tensor::zeros({2, 2}, DType::F32, bad).sum().item<float>(), ravel::DeviceError);

  // Meanwhile the TBB device computes correctly.
  auto t = Tensor::arange(0, 6, 1, DType::F32, Device("tbb_cpu", 0)).reshape({2, 3});
  BOOST_TEST((t.device() == Device("tbb_cpu", 0)));
  auto s = (t * 2.0 + 1.0).sum(1);  // [[1,3,5],[7,9,11]] -> [9, 27]
  BOOST_TEST(s.to_vector<float>() == (std::vector<float>{9, 27}), tt::per_element());
  BOOST_TEST(Tensor::eye(3, DType::F32, Device("tbb_cpu", 0)).sum().item<float>() == 3.0f);
  // And the failing tensor's plain data is still readable.
  BOOST_TEST(x.to_vector<float>() == (std::vector<float>{1, 2, 3}), tt::per_element());
  Runtime::reset(opts({}));
}

BOOST_AUTO_TEST_CASE(devices_of_the_default_runtime) {
  Runtime& rt = Runtime::reset(opts({}));
  auto devs = rt.devices();
  BOOST_TEST_REQUIRE(!devs.empty());
  // The first device listed is the built-in choice (hip:0 first on the GPU machine).
  BOOST_TEST((devs[0].device == builtin_default_device(rt)));
  BOOST_TEST(devs[0].kind == (devs[0].device.backend() == "tbb_cpu" ? "cpu" : "gpu"));
  BOOST_TEST(devs[0].compute_units >= 1);
  BOOST_TEST(devs[0].max_rank >= 1);
  // tbb_cpu runs every dtype of ABI 1.7 (13); the GPU plugins the 1.0-1.6 ones (6)
  BOOST_TEST(devs[0].dtypes.size() == (devs[0].device.backend() == "tbb_cpu" ? 13u : 6u));
}

BOOST_AUTO_TEST_CASE(config_placement_makes_the_failing_backend_the_default) {
  // docs/config.md: placement.devices lists where new tensors go, first existing device first.
  const std::string cfg = kDir + "/placement_failing_first.json";
  {
    std::ofstream out(cfg);
    out << R"({"placement": {"devices": ["failing:0", "tbb_cpu:0"]}})";
  }
  RuntimeOptions o = opts({kDir + "/kernel_fails"});
  o.config_path = cfg;
  Runtime& rt = Runtime::reset(o);
  BOOST_TEST((rt.default_device() == Device("failing", 0)));
  auto x = Tensor::ones({4});
  BOOST_TEST((x.device() == Device("failing", 0)));
  try {
    (x * 3.0).sum().item<float>();
    BOOST_ERROR("no exception");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(contains(e.what(), "kernel exploded on purpose"), e.what());
  } catch (const std::exception& e) {
    BOOST_ERROR("wrong exception type: " << e.what());
  }
  // An explicit TBB tensor in the same runtime is fine.
  auto y = Tensor::full({3}, 2.0, DType::F32, Device("tbb_cpu", 0));
  BOOST_TEST((y * 3.0).sum().item<float>() == 18.0f);
  Runtime::reset(opts({}));
}

BOOST_AUTO_TEST_CASE(synchronize_waits_on_a_device_and_names_an_unknown_one) {
  Runtime::reset(RuntimeOptions{});
  Tensor y = (Tensor::full({1000}, 2.0) * 3.0).realize();
  ravel::synchronize(Device::parse("tbb_cpu:0"));  // nothing left to wait for: returns
  BOOST_TEST(y.to_vector<float>()[999] == 6.0f);
  try {
    ravel::synchronize(Device::parse("nosuch:0"));
    BOOST_FAIL("synchronize on an unknown device did not throw");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(std::string(e.what()).find("nosuch:0") != std::string::npos, e.what());
  }
}
