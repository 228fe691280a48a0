// The main() of every Boost.Test executable in tests/ (linked through ravel_test_main).
//
// Why one shared main rather than `#define BOOST_TEST_MODULE` in each test: that macro must be
// seen before the first Boost.Test header, which rules out a precompiled header for the test
// sources (tests/test_pch.hpp). With the main here, every test source starts with the same
// headers, the precompiled header covers them, and each test executable compiles ~2 s less of
// Boost.Test and Ravel headers (docs/testing.md, "Build time").
//
// The master suite is named after the executable (argv[0]'s file name), as BOOST_TEST_MODULE
// named it before, so `--log_level=test_suite` still says which test ran.
#include <boost/test/unit_test.hpp>

#include <string>

namespace {

bool init_module() {
  auto& suite = boost::unit_test::framework::master_test_suite();
  if (suite.argc > 0 && suite.argv[0] != nullptr) {
    const std::string path = suite.argv[0];
    suite.p_name.value = path.substr(path.find_last_of('/') + 1);
  }
  return true;
}

}  // namespace

int main(int argc, char* argv[]) { return boost::unit_test::unit_test_main(&init_module, argc, argv); }
