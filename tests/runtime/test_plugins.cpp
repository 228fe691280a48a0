// Plugin loading with deliberately broken plugins (built by this folder's CMakeLists.txt into
// BROKEN_PLUGIN_DIR/<case>/): each is recorded as not loaded with the reason, load_plugin()
// throws a PluginError naming the path, and the real tbb_cpu plugin keeps working beside them.
#include "builtin_placement.hpp"
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "ravel/ravel.hpp"

namespace fs = std::filesystem;
using ravel::PluginRecord;
using ravel::Runtime;
using ravel::RuntimeOptions;

namespace {

const std::string kDir = BROKEN_PLUGIN_DIR;

struct BrokenCase {
  std::string dir, file;          // folder under BROKEN_PLUGIN_DIR, file name inside it
  std::vector<std::string> keys;  // the status must contain one of these (case-insensitive)
};

const std::vector<BrokenCase> kCases = {
    {"bad_major", "libravel_backend_badmajor.so", {"major"}},
    {"no_entry", "libravel_backend_noentry.so", {"rvl_backend_entry"}},
    {"init_fails", "libravel_backend_initfails.so", {"initializ"}},
    {"no_devices", "libravel_backend_nodevices.so", {"no devices", "no device", "0 devices"}},
    {"small_table", "libravel_backend_smalltable.so", {"size", "small"}},
    {"garbage", "libravel_backend_garbage.so", {"load", "shared object", "elf"}},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}
bool contains_any(const std::string& text, const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    if (lower(text).find(lower(k)) != std::string::npos) return true;
  return false;
}
std::string path_of(const BrokenCase& c) { return kDir + "/" + c.dir + "/" + c.file; }

// The record of the plugin file in `folder` (paths may be canonicalised, so match on the tail).
const PluginRecord* record_in(const Runtime& rt, const std::string& folder, const std::string& file) {
  for (const auto& r : rt.plugins())
    if (r.path.find("/" + folder + "/" + file) != std::string::npos || r.path.find(folder + "/" + file) != std::string::npos)
      return &r;
  return nullptr;
}
const PluginRecord* record_named(const Runtime& rt, const std::string& name) {
  for (const auto& r : rt.plugins())
    if (r.name == name) return &r;
  return nullptr;
}

RuntimeOptions only(const std::vector<std::string>& dirs, bool defaults) {
  return RuntimeOptions{.config_path = {}, .extra_paths = dirs, .use_environment = false, .use_default_paths = defaults, .load_plugins = true, .excluded_plugins = {}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(broken_plugin_files_exist) {
  for (const auto& c : kCases) BOOST_TEST(fs::exists(path_of(c)), path_of(c));
  BOOST_TEST(fs::exists(kDir + "/kernel_fails/libravel_backend_failing.so"));
}

BOOST_AUTO_TEST_CASE(each_broken_plugin_is_recorded_with_its_reason) {
  for (const auto& c : kCases)
    BOOST_TEST_CONTEXT(c.dir) {
      try {
        Runtime rt(only({kDir + "/" + c.dir}, false));
        BOOST_TEST_REQUIRE(rt.plugins().size() == 1u);
        const PluginRecord* r = record_in(rt, c.dir, c.file);
        BOOST_TEST_REQUIRE(r != nullptr, "no record for " << c.file);
        BOOST_TEST(!r->loaded);
        BOOST_TEST(r->status != "ok");
        BOOST_TEST(contains_any(r->status, c.keys), "status: " << r->status);
        BOOST_TEST(rt.devices().empty());
        // With nothing usable there is no default device.
        BOOST_CHECK_THROW(rt.default_device(), ravel::DeviceError);
      } catch (const std::exception& e) {
        BOOST_ERROR("constructing the runtime threw: " << e.what());
      }
    }
}

BOOST_AUTO_TEST_CASE(load_plugin_throws_naming_the_path) {
  for (const auto& c : kCases)
    BOOST_TEST_CONTEXT(c.dir) {
      Runtime rt(only({}, false));
      BOOST_TEST(rt.plugins().empty());
      const std::string p = path_of(c);
      try {
        rt.load_plugin(p);
        // A plugin with zero devices is "not an error" in the ABI's words; the runtime may
        // accept the call, but must still not count it as loaded.
        BOOST_TEST(c.dir == "no_devices", "load_plugin accepted a broken plugin");
      } catch (const ravel::PluginError& e) {
        std::string m = e.what();
        BOOST_TEST(m.find(p) != std::string::npos, "message '" << m << "' names " << p);
        BOOST_TEST(contains_any(m, c.keys), "message: " << m);
      } catch (const std::exception& e) {
        BOOST_ERROR("wrong exception type: " << e.what());
      }
      // The record is kept, not loaded.
      BOOST_TEST_REQUIRE(rt.plugins().size() == 1u);
      BOOST_TEST(!rt.plugins().back().loaded);
      BOOST_TEST(rt.plugins().back().path.find(c.file) != std::string::npos);
    }
  Runtime rt(only({}, false));
  const std::string missing = kDir + "/does_not_exist/libravel_backend_nothing.so";
  try {
    rt.load_plugin(missing);
    BOOST_ERROR("loading a missing file did not throw");
  } catch (const ravel::PluginError& e) {
    BOOST_TEST(std::string(e.what()).find(missing) != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(kernel_failing_plugin_loads_fine) {
  // Its failure only shows when a kernel runs (see runtime_devices); loading succeeds.
  Runtime rt(only({kDir + "/kernel_fails"}, false));
  const PluginRecord* r = record_named(rt, "failing");
  BOOST_TEST_REQUIRE(r != nullptr);
  BOOST_TEST(r->loaded);
  BOOST_TEST(r->status == "ok");
  BOOST_TEST(r->abi_major == 1u);
  BOOST_TEST(r->version == "0.0-broken");
  BOOST_TEST(r->device_count == 1);
  auto devs = rt.devices();
  BOOST_TEST_REQUIRE(devs.size() == 1u);
  BOOST_TEST((devs[0].device == ravel::Device("failing", 0)));
  BOOST_TEST(devs[0].kind == "cpu");
  BOOST_TEST(devs[0].name == "failing test device");
  BOOST_TEST(devs[0].dtypes.size() == 6u);
}

BOOST_AUTO_TEST_CASE(tbb_plugin_works_beside_all_broken_ones) {
  std::vector<std::string> dirs;
  for (const auto& c : kCases) dirs.push_back(kDir + "/" + c.dir);
  dirs.push_back(kDir + "/kernel_fails");
  RuntimeOptions opts = only(dirs, true);  // default paths find tbb_cpu next to libravel_core
  {
    Runtime rt(opts);
    for (const auto& c : kCases)
      BOOST_TEST_CONTEXT(c.dir) {
        const PluginRecord* r = record_in(rt, c.dir, c.file);
        BOOST_TEST_REQUIRE(r != nullptr);
        BOOST_TEST(!r->loaded);
        BOOST_TEST(contains_any(r->status, c.keys), "status: " << r->status);
      }
    const PluginRecord* tbb = record_named(rt, "tbb_cpu");
    BOOST_TEST_REQUIRE(tbb != nullptr, "tbb_cpu not found on the default paths");
    BOOST_TEST(tbb->loaded);
    BOOST_TEST(tbb->status == "ok");
    BOOST_TEST(tbb->device_count >= 1);
    bool has_tbb = false;
    for (const auto& d : rt.devices()) has_tbb = has_tbb || (d.device == ravel::Device("tbb_cpu", 0) && d.kind == "cpu");
    BOOST_TEST(has_tbb);
    // The search order: extra paths first.
    BOOST_TEST_REQUIRE(rt.search_paths().size() >= dirs.size());
    BOOST_TEST(rt.search_paths().front() == dirs.front());
  }
  // The process-wide runtime with the same options: tensors still compute correctly.
  Runtime& global = Runtime::reset(opts);
  // No config: the built-in placement (configs/default.json: hip:0, level_zero:0, tbb_cpu:0)
  // applies, so new tensors go to its choice even though the "failing" plugin loaded first.
  BOOST_TEST((global.default_device() == builtin_default_device(global)), "default device "
                                                                             << global.default_device().str());
  auto a = ravel::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}, ravel::Device("tbb_cpu", 0));
  auto b = (a.matmul(a) + 1.0).sum(0);  // [[7, 10], [15, 22]] + 1 -> column sums [24, 34]
  BOOST_TEST(b.to_vector<float>() == (std::vector<float>{24, 34}), boost::test_tools::per_element());
  auto c = ravel::Tensor::arange(0, 10, 1, std::nullopt, ravel::Device("tbb_cpu", 0)).sum();
  BOOST_TEST(c.item<int64_t>() == 45);
  Runtime::reset(only({}, true));
}

BOOST_AUTO_TEST_CASE(same_name_loaded_twice_keeps_the_first) {
  // load_plugin of the kernel-failing plugin's file twice: the second record is not loaded.
  Runtime rt(only({}, false));
  const std::string p = kDir + "/kernel_fails/libravel_backend_failing.so";
  rt.load_plugin(p);
  try {
    rt.load_plugin(p);
  } catch (const ravel::PluginError&) {
    // also acceptable: refusing a duplicate
  }
  BOOST_TEST_REQUIRE(rt.plugins().size() == 2u);
  BOOST_TEST(rt.plugins()[0].loaded);
  BOOST_TEST(!rt.plugins()[1].loaded);
  BOOST_TEST(rt.devices().size() == 1u);
}

// A plugin file that is a loop of symbolic links resolved to "" and was handed
// to dlopen (which opens the program itself). It is recorded, not loaded, with what to fix.
BOOST_AUTO_TEST_CASE(a_plugin_symlink_loop_is_recorded_with_the_fix) {
  const fs::path dir = fs::temp_directory_path() / ("ravel_plugin_loop_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink("libravel_backend_loop.so", dir / "libravel_backend_loop.so");
  {
    Runtime rt(only({dir.string()}, false));
    BOOST_TEST_REQUIRE(rt.plugins().size() == 1u);
    const PluginRecord& r = rt.plugins().front();
    BOOST_TEST(!r.loaded);
    BOOST_TEST(r.path.find("libravel_backend_loop.so") != std::string::npos, r.path);
    BOOST_TEST(r.status.find("loop of symbolic links") != std::string::npos, r.status);
    BOOST_TEST(rt.devices().empty());
  }
  fs::remove_all(dir);
}
