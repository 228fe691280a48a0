// level_zero:0 next to tbb_cpu:0 in one process (through the core, on the zecl test driver):
// the same computations agree on both devices, tensors move both ways, mixed-device ops copy
// when the config says so, and gradients flow back across the devices.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Device;
using ravel::Runtime;
using ravel::Tensor;

namespace {
const Device kCpu("tbb_cpu", 0), kGpu("level_zero", 0);

Runtime& runtime(const std::string& config = "") {
  ravel::RuntimeOptions o;
  o.use_environment = false;
  o.config_path = config;
  return Runtime::reset(o);
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_TEST(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])), "element " << i);
}

// A small network's forward pass: GEMM + bias + tanh, softmax, a reduction.
Tensor forward(const Device& d) {
  Tensor x = Tensor::randn({37, 19}, 1, ravel::DType::F32, d);
  Tensor w = Tensor::randn({19, 23}, 2, ravel::DType::F32, d);
  Tensor b = Tensor::randn({23}, 3, ravel::DType::F32, d);
  Tensor h = (x.matmul(w) + b).tanh();
  return h.softmax(-1).sum(0) + h.max({1}).sum();
}
}  // namespace

BOOST_AUTO_TEST_CASE(both_devices_are_there) {
  Runtime& rt = runtime();
  bool gpu = false, cpu = false;
  for (const auto& d : rt.devices()) {
    gpu |= d.device == kGpu;
    cpu |= d.device == kCpu;
  }
  BOOST_TEST(gpu);
  BOOST_TEST(cpu);
}

BOOST_AUTO_TEST_CASE(same_results_on_both_devices) {
  runtime();
  check_close(forward(kGpu).to_vector<float>(), forward(kCpu).to_vector<float>(), 1e-5f);
}

BOOST_AUTO_TEST_CASE(tensors_move_both_ways) {
  runtime();
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, kCpu);
  Tensor there = x.transpose().to(kGpu) * 2.0;
  BOOST_TEST(there.device().str() == "level_zero:0");
  Tensor back = there.to(kCpu) + 1.0;
  BOOST_TEST(back.to_vector<float>() == (std::vector<float>{3, 9, 5, 11, 7, 13}));
}

BOOST_AUTO_TEST_CASE(mixed_ops_copy_when_configured) {
  const std::string cfg = "l0_placement_mixed.json";
  std::ofstream(cfg) << R"({"placement": {"devices": ["level_zero:0", "tbb_cpu:0"], "on_mixed_devices": "copy"}})";
  runtime(cfg);
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3}, kGpu);
  Tensor b = Tensor::from_vector<float>({10, 20, 30}, {3}, kCpu);
  Tensor c = a * b;
  BOOST_TEST(c.to_vector<float>() == (std::vector<float>{10, 40, 90}));
  std::remove(cfg.c_str());
}

BOOST_AUTO_TEST_CASE(gradients_flow_across_devices) {
  runtime();
  Tensor x = Tensor::from_vector<float>({1, -2, 3}, {3}, kCpu);
  auto g = ravel::grad(ravel::UnaryFn([&](const Tensor& v) {
    return (v.to(kGpu).exp2().to(kCpu) * v).sum();
  }))(x);
  BOOST_TEST(g.device().str() == "tbb_cpu:0");
  std::vector<float> want;
  for (float v : {1.0f, -2.0f, 3.0f})  // d/dv (2^v * v) = 2^v (v ln 2 + 1)
    want.push_back(std::exp2(v) * (v * std::log(2.0f) + 1));
  check_close(g.to_vector<float>(), want, 1e-5f);
}

// Run with ZECL_NO_FP64=1 (CTest l0_placement_no_fp64): the device offers no f64, an f64 kernel
// is refused with a DTypeError naming the dtype (never a wrong result) and f32 still runs: the
// plugin answers RVL_STATUS_UNSUPPORTED "dtype f64 ...", which the core raises as DTypeError.
BOOST_AUTO_TEST_CASE(f64_is_refused_without_fp64) {
  if (!std::getenv("ZECL_NO_FP64")) return;  // only meaningful on the fp64-less test device
  Runtime& rt = runtime();
  for (const auto& d : rt.devices())
    if (d.device == kGpu)
      BOOST_TEST((std::find(d.dtypes.begin(), d.dtypes.end(), "f64") == d.dtypes.end()));
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3}, kGpu);
  try {
    (x * 2.0).sum().item<double>();
    BOOST_FAIL("an f64 kernel ran on a device without fp64");
  } catch (const ravel::DTypeError& e) {
    BOOST_TEST(std::string(e.what()).find("f64") != std::string::npos, e.what());
  } catch (const ravel::Error& e) {
    BOOST_ERROR("expected a DTypeError, got: " << e.what());
  }
  BOOST_TEST((Tensor::from_vector<float>({1, 2, 3}, {3}, kGpu) * 2.0).sum().item<float>() == 12.0f);
}
