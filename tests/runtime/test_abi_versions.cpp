// ABI minor versions in both directions (backend.h, "struct sizes per version"):
//  - a plugin built as if against 1.0 (table size and abi_minor of 1.0, fills only the 1.0
//    members) loads in this 1.1 core, its devices are listed with the 1.1 members empty, and
//    data goes through its buffers; a 1.1 plugin beside it reports its 1.1 members.
//  - the other direction (a 1.0 host calling the 1.1 oneTBB plugin with 1.0 struct sizes) is in
//    tests/abi/test_tbb_abi.cpp, which talks to the plugin through the C table directly.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Runtime;
using ravel::RuntimeOptions;

namespace {
const std::string kDir = BROKEN_PLUGIN_DIR;
RuntimeOptions only(const std::vector<std::string>& dirs) {
  return RuntimeOptions{.config_path = {}, .extra_paths = dirs, .use_environment = false,
                        .use_default_paths = false, .load_plugins = true, .excluded_plugins = {}};
}
}  // namespace

BOOST_AUTO_TEST_CASE(plugin_built_against_1_0_loads_in_a_1_1_core) {
  Runtime rt(only({kDir + "/v1_0", kDir + "/kernel_fails"}));
  BOOST_TEST_REQUIRE(rt.plugins().size() == 2u);
  for (const auto& r : rt.plugins()) {
    BOOST_TEST(r.loaded, r.path << ": " << r.status);
    BOOST_TEST(r.abi_major == 1u);
  }
  const auto& old = rt.plugins()[0].name == "oldminor" ? rt.plugins()[0] : rt.plugins()[1];
  BOOST_TEST(old.name == "oldminor");
  BOOST_TEST(old.abi_minor == 0u);
  bool seen_old = false, seen_new = false;
  for (const auto& d : rt.devices()) {
    if (d.device.backend() == "oldminor") {
      seen_old = true;
      BOOST_TEST(d.name == "oldminor test device");  // 1.0 members arrive
      BOOST_TEST(d.arch.empty());                     // 1.1 members stay empty, not garbage
      BOOST_TEST(d.warp_size == 0);
      BOOST_TEST(d.details.empty());
    } else {
      seen_new = true;
      BOOST_TEST(d.arch == "test-arch");
      BOOST_TEST(d.warp_size == 1);
      BOOST_TEST(d.details == "case=5");
    }
  }
  BOOST_TEST(seen_old);
  BOOST_TEST(seen_new);
}

BOOST_AUTO_TEST_CASE(buffers_of_a_1_0_plugin_carry_data) {
  Runtime::reset(only({kDir + "/v1_0"}));
  const std::vector<float> values{1.5f, -2.0f, 3.25f};
  ravel::Tensor t = ravel::Tensor::from_vector<float>(values, {3}).to(ravel::Device("oldminor", 0));
  BOOST_TEST(t.device().str() == "oldminor:0");
  const std::vector<float> back = t.to_vector<float>();
  BOOST_TEST(back == values, boost::test_tools::per_element());
  Runtime::reset(RuntimeOptions{});
}
