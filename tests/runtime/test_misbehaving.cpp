// Plugins that throw C++ exceptions through the C ABI (from the entry point, probe or
// initialize) are recorded with a message naming them, and the runtime starts with the other
// backends working; plugins.skip / plugins.load are applied before a plugin is probed or
// initialised (a skipped plugin whose initialize aborts cannot hurt the process).
#include "builtin_placement.hpp"
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

#include "test_support.hpp"

using ravel::PluginRecord;
using ravel::Runtime;
using ravel::RuntimeOptions;

namespace {
const std::string kDir = MISBEHAVING_DIR;

RuntimeOptions with(const std::vector<std::string>& dirs, const std::string& config = {}) {
  RuntimeOptions o;
  o.config_path = config;
  o.extra_paths = dirs;
  o.use_environment = false;
  return o;
}
const PluginRecord* record_under(const Runtime& rt, const std::string& dir) {
  for (const auto& r : rt.plugins())
    if (r.path.find(dir) != std::string::npos) return &r;
  return nullptr;
}
// A computation on the default device (the built-in placement's: tbb_cpu:0, or hip:0 on the GPU
// machine): the runtime still works.
float sum_on_default_device() {
  return ravel::Tensor::from_vector<float>({1, 2, 3.5f}, {3}).sum().item<float>();
}
std::string write_config(const std::string& name, const std::string& json) {
  const auto path = scratch_dir() / name;
  std::ofstream(path) << json;
  return path.string();
}
}  // namespace

BOOST_AUTO_TEST_CASE(exceptions_through_the_abi_name_the_plugin) {
  struct Case { const char* dir; const char* what; };
  for (const Case& c : {Case{"throw_entry", "rvl_backend_entry threw on purpose"},
                        Case{"throw_probe", "probe threw on purpose"},
                        Case{"throw_init", "initialize threw on purpose"}})
    BOOST_TEST_CONTEXT(c.dir) {
      Runtime& rt = Runtime::reset(with({kDir + "/" + c.dir}));
      const PluginRecord* r = record_under(rt, c.dir);
      BOOST_TEST_REQUIRE(r != nullptr);
      BOOST_TEST(!r->loaded);
      BOOST_TEST(r->status.find(r->path) != std::string::npos, r->status);  // names the plugin
      BOOST_TEST(r->status.find("exception escaped through the C ABI") != std::string::npos, r->status);
      BOOST_TEST(r->status.find(c.what) != std::string::npos, r->status);
      BOOST_TEST((rt.default_device() == builtin_default_device(rt)));
      BOOST_TEST(sum_on_default_device() == 6.5f);
    }
  Runtime::reset(RuntimeOptions{});
}

BOOST_AUTO_TEST_CASE(skip_is_applied_before_probe_and_initialize) {
  // abortinit's initialize() calls abort(): if the runtime initialised it before applying
  // plugins.skip, this test process would die here.
  const std::string cfg = write_config("ravel_skip_abortinit.json",
                                       R"({"plugins": {"skip": ["abortinit"]}})");
  Runtime& rt = Runtime::reset(with({kDir + "/abort_init"}, cfg));
  const PluginRecord* r = record_under(rt, "abort_init");
  BOOST_TEST_REQUIRE(r != nullptr);
  BOOST_TEST(r->name == "abortinit");
  BOOST_TEST(!r->loaded);
  BOOST_TEST(r->status.find("plugins.skip") != std::string::npos, r->status);
  BOOST_TEST(sum_on_default_device() == 6.5f);
  // plugins.load naming only tbb_cpu: the same, through the other list.
  const std::string cfg2 = write_config("ravel_load_only_tbb.json",
                                        R"({"plugins": {"load": ["tbb_cpu"]}})");
  Runtime& rt2 = Runtime::reset(with({kDir + "/abort_init"}, cfg2));
  r = record_under(rt2, "abort_init");
  BOOST_TEST_REQUIRE(r != nullptr);
  BOOST_TEST(r->status.find("plugins.load") != std::string::npos, r->status);
  BOOST_TEST(sum_on_default_device() == 6.5f);
  std::filesystem::remove(cfg);
  std::filesystem::remove(cfg2);
  Runtime::reset(RuntimeOptions{});
}

BOOST_AUTO_TEST_CASE(excluded_plugins_are_recorded_not_loaded) {
  // What ravel-info does with a plugin that crashed in its child process.
  const std::string path =
      std::filesystem::weakly_canonical(kDir + "/crash_probe/libravel_backend_crashprobe.so").string();
  RuntimeOptions o = with({kDir + "/crash_probe"});
  o.excluded_plugins[path] = "not loaded: crashed in a child process (test)";
  Runtime& rt = Runtime::reset(o);
  const PluginRecord* r = record_under(rt, "crash_probe");
  BOOST_TEST_REQUIRE(r != nullptr);
  BOOST_TEST(r->status == "not loaded: crashed in a child process (test)");
  BOOST_TEST(sum_on_default_device() == 6.5f);
  Runtime::reset(RuntimeOptions{});
}

// A plugin reporting INT32_MAX devices made every program allocate per-device
// records without bound; a backend name no device name can spell loaded but was unreachable.
// Both are refused, with the rule in the message, and the other backends work.
BOOST_AUTO_TEST_CASE(device_counts_are_capped_and_names_must_be_spellable) {
  struct Case { const char* dir; const char* what; };
  for (const Case& c : {Case{"many_devices", "reports 2147483647 devices, more than the 1024 Ravel accepts"},
                        Case{"bad_name", "names the backend \"Bad Name:0\", which no device name can spell: "
                                         "expected 1 to 64 lower-case letters, digits and '_'"}})
    BOOST_TEST_CONTEXT(c.dir) {
      Runtime& rt = Runtime::reset(with({kDir + "/" + c.dir}));
      const PluginRecord* r = record_under(rt, c.dir);
      BOOST_TEST_REQUIRE(r != nullptr);
      BOOST_TEST(!r->loaded);
      BOOST_TEST(r->status.find(c.what) != std::string::npos, r->status);
      BOOST_TEST(sum_on_default_device() == 6.5f);
    }
  Runtime::reset(RuntimeOptions{});
}
