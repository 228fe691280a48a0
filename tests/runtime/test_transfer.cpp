// Tensor::to and mixed-device ops: copies between devices are graph nodes that the scheduler
// runs, gradients flow back across them, and "placement.on_mixed_devices" chooses between an
// error naming both devices and an automatic copy.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "ravel/ravel.hpp"

#include "test_support.hpp"

using ravel::Device;
using ravel::DType;
using ravel::Runtime;
using ravel::Tensor;

namespace {
const std::string kDir = BROKEN_PLUGIN_DIR;
const Device kCpu("tbb_cpu", 0), kOther("failing", 0);  // "failing": data works, kernels fail

Runtime& runtime_with_second_device(const std::string& config = "") {
  ravel::RuntimeOptions o;
  o.extra_paths = {kDir + "/kernel_fails"};
  o.use_environment = false;
  o.config_path = config;
  return Runtime::reset(o);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

BOOST_AUTO_TEST_CASE(to_moves_values_both_ways_as_graph_nodes) {
  runtime_with_second_device();
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, kCpu);
  Tensor there = x.transpose().to(kOther);  // a view is gathered on the CPU, then copied
  BOOST_TEST(there.device().str() == "failing:0");
  BOOST_TEST(!there.is_realized());  // lazy like any op
  // Reading it back only moves bytes on the other device (its kernels would fail).
  BOOST_TEST(there.to_vector<float>() == (std::vector<float>{1, 4, 2, 5, 3, 6}));
  Tensor back = there.to(kCpu) * 10.0;
  back.realize();
  BOOST_TEST(ravel::last_realization_stats().transfers >= 1);
  BOOST_TEST(back.to_vector<float>() == (std::vector<float>{10, 40, 20, 50, 30, 60}));
  BOOST_TEST((x.to(kCpu).node() == x.node()));  // already there: no node
  BOOST_CHECK_THROW(x.to(Device("nowhere", 0)), ravel::DeviceError);
}

BOOST_AUTO_TEST_CASE(mixed_devices_are_an_error_by_default) {
  runtime_with_second_device();
  Tensor a = Tensor::ones({3}, DType::F32, kCpu);
  Tensor b = Tensor::from_vector<float>({1, 2, 3}, {3}, kOther);
  try {
    (void)(a + b);
    BOOST_ERROR("no exception");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(contains(e.what(), "tbb_cpu:0"), e.what());
    BOOST_TEST(contains(e.what(), "failing:0"), e.what());
    BOOST_TEST(contains(e.what(), "on_mixed_devices"), e.what());
  }
}

// A composite names itself: matmul's product is a mul inside, but the user called matmul.
BOOST_AUTO_TEST_CASE(mixed_devices_error_names_the_users_operation) {
  runtime_with_second_device();
  Tensor a = Tensor::ones({2, 3}, DType::F32, kCpu);
  Tensor b = Tensor::ones({3, 2}, DType::F32, kOther);
  try {
    (void)a.matmul(b);
    BOOST_ERROR("no exception");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(std::string(e.what()).rfind("matmul: operands are on different devices", 0) == 0, e.what());
  }
}

BOOST_AUTO_TEST_CASE(mixed_devices_copy_when_the_config_says_so) {
  auto cfg = (scratch_dir() / "ravel_mixed_copy.json").string();
  std::ofstream(cfg) << R"({"placement": {"devices": ["tbb_cpu:0"], "on_mixed_devices": "copy"}})";
  runtime_with_second_device(cfg);
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3}, kCpu);
  Tensor b = Tensor::from_vector<float>({10, 20, 30}, {3}, kOther);
  Tensor c = a + b;  // b is copied to a's device
  BOOST_TEST(c.device().str() == "tbb_cpu:0");
  BOOST_TEST(c.to_vector<float>() == (std::vector<float>{11, 22, 33}));
}

BOOST_AUTO_TEST_CASE(gradients_flow_back_across_devices) {
  runtime_with_second_device();
  Tensor x = Tensor::from_vector<double>({1, -2, 3}, {3}, kCpu);
  auto g = ravel::grad(ravel::UnaryFn([&](const Tensor& v) { return (v.to(kOther).to(kCpu) * v).sum(); }))(x);
  BOOST_TEST(g.device().str() == "tbb_cpu:0");
  BOOST_TEST(g.to_vector<double>() == (std::vector<double>{2, -4, 6}));  // d(v*v)/dv = 2v
}
