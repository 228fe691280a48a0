// Config keys (ravel-bench, placement): every bad value names its JSON path, the value and what was expected
// (unknown keys with "did you mean"); placement falls back along the preference list, while an
// explicit device that is missing is a DeviceError naming it and the available devices.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "bench_config.hpp"
#include "config/config.hpp"
#include "ravel/ravel.hpp"

#include "test_support.hpp"

using ravel::ConfigError;
namespace {
bool has(const std::string& s, const std::string& k) { return s.find(k) != std::string::npos; }

// parse_config (runtime keys) or parse_bench_config must throw ConfigError containing each needle.
void expect_error(const std::string& text, std::vector<std::string> needles, bool bench = false) {
  BOOST_TEST_CONTEXT(text) {
    try {
      if (bench) ravel::bench::parse_bench_config(text, "t.json", "/tmp");
      else ravel::detail::parse_config(text, "t.json", "/tmp");
      BOOST_ERROR("no ConfigError");
    } catch (const ConfigError& e) {
      for (const auto& n : needles) BOOST_TEST(has(e.what(), n), e.what() << "   (wanted: " << n << ")");
    }
  }
}

std::string write(const std::string& name, const std::string& text) {
  auto p = scratch_dir() / (name + ".json");
  std::ofstream(p) << text;
  return p.string();
}

ravel::Runtime& runtime_with(const std::string& cfg_text, std::vector<std::string> dirs = {}) {
  ravel::RuntimeOptions o;
  o.config_path = write("rt", cfg_text);
  o.extra_paths = std::move(dirs);
  o.use_environment = false;
  return ravel::Runtime::reset(o);
}
}  // namespace

BOOST_AUTO_TEST_CASE(runtime_keys_name_path_value_and_expectation) {
  expect_error(R"({"placement": {"on_mixed_device": "copy"}})", {"$.placement.on_mixed_device", "did you mean \"on_mixed_devices\""});
  expect_error(R"({"placement": {"on_mixed_devices": "cpy"}})", {"$.placement.on_mixed_devices", "\"cpy\"", "did you mean \"copy\"", "error, copy"});
  expect_error(R"({"placement": {"on_mixed_devices": 1}})", {"$.placement.on_mixed_devices", "expected a string, got 1"});
  expect_error(R"({"placement": {"defualt": "tbb_cpu"}})", {"$.placement.defualt", "did you mean \"default\""});
  expect_error(R"({"placement": {"default": "hip:x"}})", {"$.placement.default", "hip:x"});
  expect_error(R"({"placement": {"default": "hip:0", "devices": ["tbb_cpu"]}})", {"$.placement.default", "got both"});
  expect_error(R"({"placement": {"devices": ["tbb_cpu", 3]}})", {"$.placement.devices[1]", "expected a string, got 3"});
  expect_error(R"({"plugins": {"lod": ["tbb_cpu"]}})", {"$.plugins.lod", "did you mean \"load\""});
  expect_error(R"({"plugins": {"load": "tbb_cpu"}})", {"$.plugins.load", "expected an array of strings"});
  expect_error(R"({"logging": {"levle": "info"}})", {"$.logging.levle", "did you mean \"level\""});
  expect_error(R"({"logging": {"level": "verbose"}})", {"$.logging.level", "\"verbose\"", "off, error, warn, info, debug"});
  expect_error(R"({"logging": {"plugins": "yes"}})", {"$.logging.plugins", "expected true or false, got \"yes\""});
  expect_error(R"({"logging": {"placment": true}})", {"$.logging.placment", "did you mean \"placement\""});
  expect_error(R"({"bnech": {}})", {"$.bnech", "did you mean \"bench\""});
  auto c = ravel::detail::parse_config(R"({"placement": {"default": "tbb_cpu", "on_mixed_devices": "copy"},
      "logging": {"level": "debug", "plugins": true}})", "t.json", "/tmp");
  BOOST_TEST(c.on_mixed_devices == "copy");
  BOOST_TEST(c.placement_default == "tbb_cpu");
  BOOST_TEST(c.logging.level == "debug");
}

BOOST_AUTO_TEST_CASE(bench_keys_name_path_value_and_expectation) {
  auto b = [](const std::string& inner) { return R"({"bench": {"workloads": ["matmul"], )" + inner + "}}"; };
  expect_error(R"({"plugins": {}})", {"$.bench", "missing"}, true);
  expect_error(R"({"bench": {"workloads": ["sofmax"]}})", {"$.bench.workloads[0]", "\"sofmax\"", "did you mean \"softmax\""}, true);
  expect_error(R"({"bench": {"workloads": [{"name": "matmul", "sizes": [[2, 3]]}]}})", {"$.bench.workloads[0].sizes[0]", "3 positive integers (m, k, n)", "[2,3]"}, true);
  expect_error(R"({"bench": {"workloads": [{"name": "matmul", "sizes": [[2, 0, 3]]}]}})", {"$.bench.workloads[0].sizes[0][1]", "got 0"}, true);
  expect_error(R"({"bench": {"workloads": [{"name": "matmul", "size": [[2, 2, 3]]}]}})", {"$.bench.workloads[0].size", "did you mean \"sizes\""}, true);
  expect_error(b(R"("repetition": 3)"), {"$.bench.repetition", "did you mean \"repetitions\""}, true);
  expect_error(R"({"bench": {"workloads": [{"name": "matmul", "repetitions": 0}]}})", {"$.bench.workloads[0].repetitions", "[1, 100000]", "got 0"}, true);
  expect_error(R"({"bench": {"workloads": [{"name": "matmul", "warmup": "5"}]}})", {"$.bench.workloads[0].warmup", "\"5\""}, true);
  expect_error(R"({"bench": {"workloads": [{"name": "matmul", "repetition": 5}]}})", {"$.bench.workloads[0].repetition", "did you mean \"repetitions\""}, true);
  expect_error(b(R"("repetitions": 0)"), {"$.bench.repetitions", "[1, 100000]", "got 0"}, true);
  expect_error(b(R"("warmup": -1)"), {"$.bench.warmup", "got -1"}, true);
  expect_error(b(R"("policies": ["ful"])"), {"$.bench.policies[0]", "did you mean \"full\""}, true);
  expect_error(b(R"("devices": ["tbb_cpu:"])"), {"$.bench.devices[0]", "tbb_cpu:"}, true);
  expect_error(b(R"("check": 1)"), {"$.bench.check", "expected true or false"}, true);
  expect_error(b(R"("peers": [{"name": "np"}])"), {"$.bench.peers[0].command", "missing"}, true);
  expect_error(b(R"("peers": [{"name": "np", "comand": ["x"]}])"), {"$.bench.peers[0].comand", "did you mean \"command\""}, true);
  expect_error(b(R"("peers": [{"name": "np", "command": []}])"), {"$.bench.peers[0].command", "non-empty"}, true);
  expect_error(b(R"("peers": [{"name": "np", "command": ["a"]}, {"name": "np", "command": ["b"]}])"),
               {"$.bench.peers[1].name", "\"np\" names an earlier peer too"}, true);  // results by name
  expect_error(b(R"("peers": [{"name": "numpy", "command": ["x"]}], "baseline": {"runner": "numpi"})"), {"$.bench.baseline.runner", "did you mean \"numpy\""}, true);
  expect_error(b(R"("baseline": {"polcy": "none"})"), {"$.bench.baseline.polcy", "did you mean \"policy\""}, true);
  expect_error(b(R"("output": {"name": "a/b"})"), {"$.bench.output.name", "a/b"}, true);
  expect_error(b(R"("output": {"dri": "x"})"), {"$.bench.output.dri", "did you mean \"dir\""}, true);
  auto c = ravel::bench::parse_bench_config(b(R"("policies": ["none", "full"], "repetitions": 3)"), "t.json", "/tmp");
  BOOST_TEST(c.policies.size() == 2u);
  BOOST_TEST(c.repetitions == 3);
  BOOST_TEST((c.workloads[0].warmup == -1 && c.workloads[0].repetitions == -1));  // the bench's counts
  c = ravel::bench::parse_bench_config(R"({"bench": {"workloads": [{"name": "matmul", "warmup": 0, "repetitions": 101}]}})", "t.json", "/tmp");
  BOOST_TEST((c.workloads[0].warmup == 0 && c.workloads[0].repetitions == 101));

}

BOOST_AUTO_TEST_CASE(preference_list_falls_back_to_the_next_available_device) {
  // Devices no machine has (hip:7, a backend never built), so the fallback is the same on the
  // GPU machine, where hip:0 exists.
  auto& rt = runtime_with(R"({"placement": {"devices": ["hip:7", "no_such_backend:0", "tbb_cpu:0"]}})");
  BOOST_TEST(rt.default_device().str() == "tbb_cpu:0");
  auto rules = rt.placement_rules();
  BOOST_TEST_REQUIRE(rules.size() == 3u);
  BOOST_TEST(!rules[0].available);
  BOOST_TEST(has(rules[0].reason, "hip"), rules[0].reason);
  BOOST_TEST(!rules[1].available);
  BOOST_TEST(has(rules[1].reason, "no_such_backend"), rules[1].reason);
  BOOST_TEST(rules[2].available);
  BOOST_TEST((ravel::Tensor::zeros({2}).device() == ravel::Device("tbb_cpu", 0)));
  BOOST_TEST(has(rt.effective_config(), "\"on_mixed_devices\": \"error\""), rt.effective_config());
}

BOOST_AUTO_TEST_CASE(explicit_missing_device_names_it_and_the_available_ones) {
  auto& rt = runtime_with(R"({"placement": {"default": "hip:7"}})");
  try {
    rt.default_device();
    BOOST_ERROR("no DeviceError");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(has(e.what(), "hip:7"), e.what());
    BOOST_TEST(has(e.what(), "tbb_cpu:0"), e.what());
  }
  try {
    rt.resolve_device("level_zero:1");
    BOOST_ERROR("no DeviceError");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(has(e.what(), "level_zero:1"), e.what());
    BOOST_TEST(has(e.what(), "available devices: "), e.what());
    BOOST_TEST(has(e.what(), "tbb_cpu:0"), e.what());
  }
  BOOST_TEST(runtime_with(R"({"placement": {"default": "tbb_cpu"}})").default_device().str() == "tbb_cpu:0");
}

BOOST_AUTO_TEST_CASE(mixed_devices_copy_moves_the_operand) {
  // "copy": the operand on the other device is moved to the first operand's device (a Transfer
  // node; the "failing" backend's kernels fail but its buffers work, so nothing may run there).
  auto& rt = runtime_with(R"({"placement": {"devices": ["tbb_cpu"], "on_mixed_devices": "copy"}})", {KERNEL_FAILS_DIR});
  BOOST_TEST((rt.on_mixed_devices() == ravel::MixedDevices::Copy));
  auto a = ravel::Tensor::full({2}, 1.5);
  auto b = ravel::Tensor::from_vector<float>({2, 3}, {2}, ravel::Device("failing", 0));
  auto z = ravel::Tensor::zeros({2}, ravel::DType::F32, ravel::Device("failing", 0));  // a constant: remade, not copied
  BOOST_TEST(((a + b).to_vector<float>() == std::vector<float>{3.5f, 4.5f}));
  BOOST_TEST(((a + z).to_vector<float>() == std::vector<float>{1.5f, 1.5f}));
  BOOST_TEST((a + b).device().str() == "tbb_cpu:0");
}

BOOST_AUTO_TEST_CASE(mixed_devices_error_names_both_devices) {
  runtime_with(R"({"placement": {"devices": ["tbb_cpu"]}})", {KERNEL_FAILS_DIR});
  auto a = ravel::Tensor::zeros({2});
  auto b = ravel::Tensor::zeros({2}, ravel::DType::F32, ravel::Device("failing", 0));
  try {
    (a + b).realize();
    BOOST_ERROR("no DeviceError");
  } catch (const ravel::DeviceError& e) {
    BOOST_TEST(has(e.what(), "operands are on different devices"), e.what());
    BOOST_TEST((has(e.what(), "tbb_cpu:0") && has(e.what(), "failing:0")), e.what());
  }
}

BOOST_AUTO_TEST_CASE(plugins_load_keeps_only_the_named_backends) {
  auto& rt = runtime_with(R"({"plugins": {"load": ["tbb_cpu"]}})", {KERNEL_FAILS_DIR});
  bool skipped = false;
  for (const auto& r : rt.plugins()) skipped = skipped || (r.name == "failing" && has(r.status, "plugins.load"));
  BOOST_TEST(skipped);
  BOOST_TEST(rt.available_devices() == "tbb_cpu:0");
}
