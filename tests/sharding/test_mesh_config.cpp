// Placement as data: the config's "parallel" section (a mesh and the batch axis), the helpers that
// use it (shard_batch, replicate_on_mesh), and every bad mesh refused with its JSON path.
#include <fstream>

#include "../core/expect_error.hpp"
#include "sharding_common.hpp"
#include "test_support.hpp"

using namespace stest;

namespace {

// A config file with `body` in the scratch folder; the runtime reloaded from it.
ravel::Runtime& with_config(const std::string& name, const std::string& body) {
  const auto path = scratch_dir() / name;
  std::ofstream(path) << body;
  ravel::RuntimeOptions o;
  o.config_path = path.string();
  return ravel::Runtime::reset(o);
}

struct RestoreRuntime {
  ~RestoreRuntime() { ravel::Runtime::reset(ravel::RuntimeOptions{}); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_mesh_from_the_config_splits_batches_and_replicates_parameters) {
  RestoreRuntime restore;
  ravel::Runtime& rt = with_config("mesh.json", R"({"parallel": {"mesh": ["tbb_cpu:0", "tbb_cpu:2", "tbb_cpu:1"], "batch_axis": 1}})");
  const std::vector<Device> want = {Device("tbb_cpu", 0), Device("tbb_cpu", 2), Device("tbb_cpu", 1)};
  BOOST_TEST(rt.mesh() == want);
  Tensor x = data({2, 6, 3});
  Tensor s = ravel::shard_batch(x);
  BOOST_TEST(s.sharding().value().devices == want);
  BOOST_TEST(s.sharding().value().axis.value() == 1);
  check_exact(s, x);
  Tensor r = ravel::replicate_on_mesh(x);
  BOOST_TEST(r.sharding().value().replicated());
  // The effective config shows the section.
  BOOST_TEST(rt.effective_config().find("\"batch_axis\": 1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(without_a_mesh_the_helpers_change_nothing) {
  RestoreRuntime restore;
  ravel::Runtime& rt = with_config("none.json", R"({"placement": {"default": "tbb_cpu:0"}})");
  BOOST_TEST(rt.mesh().empty());
  Tensor x = data({4, 3});
  BOOST_TEST(ravel::shard_batch(x).node() == x.node());
  BOOST_TEST(ravel::replicate_on_mesh(x).node() == x.node());
}

BOOST_AUTO_TEST_CASE(bad_meshes_are_config_errors_with_their_path) {
  RestoreRuntime restore;
  auto fails = [](const std::string& what, const std::string& body, const std::vector<std::string>& needles) {
    rtest::expect_error<ravel::ConfigError>(what, [&] { with_config("bad.json", body).mesh(); }, needles);
  };
  fails("duplicate", R"({"parallel": {"mesh": ["tbb_cpu:0", "tbb_cpu:1", "tbb_cpu"]}})",
        {"$.parallel.mesh[2]", "tbb_cpu:0", "twice"});
  fails("empty", R"({"parallel": {"mesh": []}})", {"$.parallel.mesh", "at least one device"});
  fails("malformed", R"({"parallel": {"mesh": ["tbb_cpu:x"]}})", {"$.parallel.mesh[0]"});
  fails("not a list", R"({"parallel": {"mesh": "tbb_cpu:0"}})", {"$.parallel.mesh"});
  fails("axis", R"({"parallel": {"mesh": ["tbb_cpu:0"], "batch_axis": -1}})", {"$.parallel.batch_axis"});
  fails("unknown key", R"({"parallel": {"mesh": ["tbb_cpu:0"], "batch": 0}})", {"$.parallel", "batch"});
  fails("unknown device", R"({"parallel": {"mesh": ["tbb_cpu:0", "tbb_cpu:40"]}})",
        {"$.parallel.mesh[1]", "tbb_cpu:40", "cannot be used"});
  fails("unknown backend", R"({"parallel": {"mesh": ["tbb_cpu:0", "nosuch:0"]}})", {"$.parallel.mesh[1]", "nosuch:0"});
  // A device of a plugin that was skipped: the reason the plugin gave is in the message.
  fails("plugin not loaded", R"({"plugins": {"skip": ["tbb_cpu"]}, "parallel": {"mesh": ["tbb_cpu:0"]}})",
        {"$.parallel.mesh[0]", "tbb_cpu"});
  // A batch the mesh does not divide.
  with_config("three.json", R"({"parallel": {"mesh": ["tbb_cpu:0", "tbb_cpu:1", "tbb_cpu:2"]}})");
  rtest::expect_error<ravel::ConfigError>("divide", [&] { ravel::shard_batch(data({7, 2})); },
                                          {"$.parallel.mesh", "3 devices", "[7, 2]", "multiple of 3"});
}

// Run by its own CTest entry with RAVEL_TBB_DEVICES unset (disabled in the suite, which sets it):
// a mesh that names tbb_cpu:3 gets the plugin to expose four devices.
BOOST_AUTO_TEST_CASE(the_mesh_asks_the_cpu_plugin_for_its_devices, *boost::unit_test::disabled()) {
  RestoreRuntime restore;
  BOOST_TEST_REQUIRE(std::getenv("RAVEL_TBB_DEVICES") == nullptr);
  ravel::Runtime& rt = with_config("four.json", R"({"parallel": {"mesh": ["tbb_cpu:3", "tbb_cpu:0"]}})");
  BOOST_TEST(tbb_devices().size() == 4u);
  BOOST_TEST(rt.mesh().size() == 2u);
  check_exact(ravel::shard_batch(data({4, 2})), data({4, 2}));
}
