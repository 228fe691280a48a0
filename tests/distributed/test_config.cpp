// The config's "distributed" section (docs/config.md): distributed.timeout_s is a positive number
// of seconds; anything else is a ConfigError naming its JSON path. That init() uses it is checked
// end to end by dist_fault_never_join_config (a 3 s deadline from a config file, no variable).
#include "config/config.hpp"
#include "ravel/error.hpp"
#include "test_support.hpp"

using namespace ravel::detail;

BOOST_AUTO_TEST_SUITE(distributed_config)

BOOST_AUTO_TEST_CASE(timeout_s_is_read_from_the_config) {
  BOOST_TEST(parse_config("{}", "t.json", "/").distributed.timeout_s == 0.0);  // unset: the default applies
  BOOST_TEST(parse_config(R"({"distributed": {"timeout_s": 2.5}})", "t.json", "/").distributed.timeout_s == 2.5);
  BOOST_TEST(parse_config(R"({"distributed": {"timeout_s": 90}})", "t.json", "/").distributed.timeout_s == 90.0);
  BOOST_TEST(parse_config(R"({"distributed": {}})", "t.json", "/").distributed.timeout_s == 0.0);
}

BOOST_AUTO_TEST_CASE(bad_timeouts_are_config_errors_naming_the_path) {
  for (const char* bad : {"0", "-1", "\"60\"", "1e9", "true", "null", "[60]"}) {
    const std::string text = std::string(R"({"distributed": {"timeout_s": )") + bad + "}}";
    BOOST_CHECK_EXCEPTION(parse_config(text, "t.json", "/"), ravel::ConfigError, [&](const ravel::ConfigError& e) {
      const std::string w = e.what();
      BOOST_TEST_MESSAGE(w);
      return w.find("$.distributed.timeout_s") != std::string::npos && w.find("t.json") != std::string::npos;
    });
  }
  BOOST_CHECK_EXCEPTION(parse_config(R"({"distributed": {"timeout": 5}})", "t.json", "/"), ravel::ConfigError,
                        [](const ravel::ConfigError& e) { return std::string(e.what()).find("timeout_s") != std::string::npos; });
  BOOST_CHECK_THROW(parse_config(R"({"distributed": 5})", "t.json", "/"), ravel::ConfigError);
}

BOOST_AUTO_TEST_CASE(the_effective_config_shows_the_timeout) {
  BOOST_TEST(config_to_json(parse_config(R"({"distributed": {"timeout_s": 7}})", "t.json", "/")).find("\"timeout_s\": 7") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
