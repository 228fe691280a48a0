// Hostile config input. Each case failed before the fix: deep nesting crashed (a
// recursive dump() building the error message), /dev/zero never returned, a huge bad value was
// echoed whole, duplicate keys were silently "last one wins", RAVEL_DEBUG=true read as 0, a missing
// plugin folder was silent, and `ravel-bench CONFIG --out --quiet` wrote into a folder "--quiet".
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "config/json_check.hpp"
#include "config/json_input.hpp"
#include "config/settings.hpp"
#include "ravel/error.hpp"

#include "test_support.hpp"

using namespace ravel::detail;
using ravel::ConfigError;
namespace fs = std::filesystem;

namespace {

// The ConfigError message parse_config throws for `text` (fails the test if it does not throw).
std::string config_error(const std::string& text) {
  try {
    parse_config(text, "test.json", "/tmp");
  } catch (const ConfigError& e) {
    return e.what();
  }
  BOOST_FAIL("expected a ConfigError for: " + text.substr(0, 100));
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A folder of the running test case's own (some remove theirs when done).
fs::path temp_dir() {
  auto d = scratch_dir() / boost::unit_test::framework::current_test_case().p_name.get();
  fs::create_directories(d);
  return d;
}

}  // namespace

BOOST_AUTO_TEST_CASE(deep_nesting_is_an_error_not_a_crash) {
  // 100k nested arrays is valid JSON; before, the "expected an object" message dumped it recursively.
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string msg = config_error(deep);
  BOOST_TEST(contains(msg, "nested deeper than 256 levels"), msg);
  BOOST_TEST(msg.size() < 300u, msg);
  // Unclosed, and inside an object: the same error, not a parse-stack blow-up.
  msg = config_error("{\"comment\": " + std::string(100000, '{'));
  BOOST_TEST(contains(msg, "nested deeper"), msg);
  // Brackets inside strings do not count.
  BOOST_CHECK_NO_THROW(parse_config("{\"comment\": \"" + std::string(1000, '[') + "\"}", "t", "/tmp"));
  // Up to the limit is fine (and the checker reports the deep value briefly).
  std::string ok = "{\"comment\": " + std::string(255, '[') + std::string(255, ']') + "}";
  BOOST_CHECK_NO_THROW(parse_config(ok, "t", "/tmp"));
}

BOOST_AUTO_TEST_CASE(echoed_values_are_capped) {
  // 50 MB is over the size bound: a short error, before any parsing.
  std::string msg = config_error("{\"fusion\": {\"policy\": \"" + std::string(50'000'000, 'x') + "\"}}");
  BOOST_TEST(contains(msg, "larger than 16 MiB"), msg.substr(0, 300));
  BOOST_TEST(msg.size() < 300u);
  // 10 MB fits: the value is echoed with its first 200 characters only.
  msg = config_error("{\"fusion\": {\"policy\": \"" + std::string(10'000'000, 'x') + "\"}}");
  BOOST_TEST(msg.size() < 1500u);
  BOOST_TEST(contains(msg, "$.fusion.policy"), msg.substr(0, 300));
  BOOST_TEST(contains(msg, "(10000000 bytes)"), msg.substr(0, 300));
  // A huge non-string value of the wrong type: brief_json counts without building the text.
  std::string list = "[";
  for (int i = 0; i < 1'000'000; ++i) list += "12345,";
  list += "1]";
  msg = config_error("{\"logging\": {\"plugins\": " + list + "}}");
  BOOST_TEST(msg.size() < 600u, msg.substr(0, 600));
  BOOST_TEST(contains(msg, "expected true or false, got [12345,12345"), msg);
  BOOST_TEST(contains(msg, "(6000003 bytes)"), msg);  // [ + 1M x "12345," + 1 + ]
  // Unknown keys and device names are capped too.
  msg = config_error("{\"placement\": {\"default\": \"" + std::string(100000, 'd') + ":x\"}}");
  BOOST_TEST(msg.size() < 1500u);
  msg = config_error("{\"" + std::string(100000, 'k') + "\": 1}");
  BOOST_TEST(msg.size() < 1500u);
}

BOOST_AUTO_TEST_CASE(duplicate_keys_are_errors) {
  std::string msg = config_error(R"({"fusion": {"policy": "none", "policy": "full"}})");
  BOOST_TEST(contains(msg, "test.json: $.fusion.policy: duplicate key"), msg);
  msg = config_error(R"({"logging": {}, "logging": {}})");
  BOOST_TEST(contains(msg, "$.logging: duplicate key"), msg);
  // The path goes through arrays: the second element of bench.peers.
  msg = config_error(R"({"bench": {"peers": [{"a": 1}, {"b": 1, "b": 2}]}})");
  BOOST_TEST(contains(msg, "$.bench.peers[1].b: duplicate key"), msg);
  // The same key in sibling objects is fine.
  BOOST_CHECK_NO_THROW(parse_config(R"({"comment": [{"a": 1}, {"a": 2}], "logging": {"level": "warn"}})", "t", "/"));
}

BOOST_AUTO_TEST_CASE(files_are_read_with_a_bound) {
  // /dev/zero never ends: refused before a byte is read, as a device (the 16 MiB
  // bound stopped it before, after 16 MiB).
  auto t0 = std::chrono::steady_clock::now();
  try {
    load_config("/dev/zero");
    BOOST_FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    BOOST_TEST(contains(e.what(), "/dev/zero: it is a character device, not a regular file"), e.what());
  }
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)));
  try {
    load_config(temp_dir().string());
    BOOST_FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    BOOST_TEST(contains(e.what(), "it is a folder"), e.what());
  }
  // A regular file over 16 MiB is refused from its size, without reading it.
  const auto big = temp_dir() / "big.json";
  fs::resize_file((std::ofstream(big), big), (std::uintmax_t{16} << 20) + 1);
  try {
    load_config(big.string());
    BOOST_FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    BOOST_TEST(contains(e.what(), "larger than 16 MiB"), e.what());
  }
}

// A FIFO as RAVEL_CONFIG hung start-up in open() (no writer) or read() (a writer
// that never closes). It is refused at once, and the message says what to do instead. The test
// runs the read on a thread and gives up after 20 s, so a regression fails rather than hangs.
BOOST_AUTO_TEST_CASE(a_fifo_config_is_refused_without_blocking) {
  const auto fifo = temp_dir() / "config.fifo";
  fs::remove(fifo);
  BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto result = std::async(std::launch::async, [&] {
    try {
      load_config(fifo.string());
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  });
  if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    // Unblock the reader so the test can end: open the FIFO for writing and close it.
    std::ofstream(fifo.string()).close();
    BOOST_FAIL("reading a FIFO config blocked for 20 s");
  }
  const std::string what = result.get();
  BOOST_TEST(contains(what, "it is a FIFO, not a regular file"), what);
  BOOST_TEST(contains(what, "write the config to a file first"), what);
  fs::remove(fifo);
}

BOOST_AUTO_TEST_CASE(environment_switches_are_strict) {
  auto settings_with = [](auto set) {
    Environment env;
    set(env);
    return load_settings("", false, env);
  };
  for (const char* bad : {"true", "1x", " 1", "3", "-1", "yes"}) {
    try {
      settings_with([&](Environment& e) { e.debug = bad; });
      BOOST_ERROR(std::string("RAVEL_DEBUG=") + bad + " was accepted");
    } catch (const ConfigError& e) {
      BOOST_TEST(contains(e.what(), "RAVEL_DEBUG: expected one of 0, 1, 2"), e.what());
    }
    BOOST_CHECK_THROW(settings_with([&](Environment& e) { e.kernel_cache = bad; }), ConfigError);
  }
  BOOST_TEST(settings_with([](Environment& e) { e.debug = "2"; }).debug == 2);
  BOOST_TEST(settings_with([](Environment& e) { e.debug = ""; }).debug == 0);
  BOOST_TEST(!settings_with([](Environment& e) { e.kernel_cache = "0"; }).kernel_cache);
  BOOST_TEST(settings_with([](Environment& e) { e.kernel_cache = "1"; }).kernel_cache);
  // A 1 MB RAVEL_FUSION is not echoed whole.
  try {
    settings_with([](Environment& e) { e.fusion = std::string(1 << 20, 'f'); });
    BOOST_FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    BOOST_TEST(std::string(e.what()).size() < 1500u);
  }
}

BOOST_AUTO_TEST_CASE(missing_plugin_folders_are_warnings_naming_them) {
  auto dir = temp_dir();
  std::ofstream(dir / "a_file") << "x";
  auto cfg = dir / "paths.json";
  std::ofstream(cfg) << R"({"plugins": {"search_paths": ["no_such_folder", "a_file", "."]}})";
  Environment env;
  env.plugin_path = "/no/such/env/folder:" + dir.string();
  Settings s = load_settings(cfg.string(), true, env);
  BOOST_TEST_REQUIRE(s.warnings.size() == 3u);
  BOOST_TEST(contains(s.warnings[0], "/no/such/env/folder (from RAVEL_PLUGIN_PATH) does not exist"), s.warnings[0]);
  BOOST_TEST(contains(s.warnings[1], (dir / "no_such_folder").string() + " (from plugins.search_paths"), s.warnings[1]);
  BOOST_TEST(contains(s.warnings[2], "a_file (from plugins.search_paths in the config) is not a folder"), s.warnings[2]);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(ravel_bench_out_needs_a_folder) {
  auto dir = temp_dir();
  // A tiny valid run, so that without the check the command would succeed and write results.
  const std::string cfg = (dir / "bench.json").string();
  std::ofstream(cfg) << R"({"bench": {"workloads": [{"name": "elementwise", "sizes": [[100]]}],
                          "warmup": 0, "repetitions": 1, "peers": []}})";
  auto run = [&](const std::string& args) {
    std::string cmd = "cd " + dir.string() + " && " + RAVEL_BENCH_EXE + " " + args + " > out.txt 2>&1";
    int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  BOOST_TEST(run(cfg + " --out") == 2);
  BOOST_TEST(run(cfg + " --out --quiet") == 2);  // before: ran, wrote results into ./--quiet
  BOOST_TEST(!fs::exists(dir / "--quiet"));
  fs::remove_all(dir);
}

// A peer that floods stderr: only the last 400 bytes are quoted (and only they are read; before,
// ravel-bench loaded the whole file, gigabytes from a peer flooding until its time limit).
BOOST_AUTO_TEST_CASE(ravel_bench_quotes_only_the_tail_of_a_peers_stderr) {
  auto dir = temp_dir();
  const std::string cfg = (dir / "peer.json").string();
  std::ofstream(cfg) << R"({"bench": {"workloads": [{"name": "elementwise", "sizes": [[100]]}],
      "warmup": 0, "repetitions": 1, "devices": [],
      "peers": [{"name": "noisy", "command": ["sh", "-c", "head -c 200000 /dev/zero | tr '\\000' e >&2; echo END-OF-STDERR >&2; exit 3"]}]}})";
  std::string cmd = std::string(RAVEL_BENCH_EXE) + " " + cfg + " --peers-only --quiet --out " + (dir / "out").string() +
                    " > " + (dir / "log.txt").string() + " 2>&1";
  (void)std::system(cmd.c_str());
  std::ifstream in(dir / "out" / "results.json");
  BOOST_TEST_REQUIRE(in.good(), "no results file");
  auto j = nlohmann::json::parse(in);
  bool seen = false;
  for (const auto& row : j["results"]) {
    if (row.value("runner", "") != "noisy") continue;
    const std::string msg = row.value("message", "");
    seen = true;
    BOOST_TEST(contains(msg, "peer exited with status 3"), msg);
    BOOST_TEST(contains(msg, "END-OF-STDERR"), msg);
    BOOST_TEST(msg.size() < 500u, msg.size());
  }
  BOOST_TEST(seen);
  fs::remove_all(dir);
}

// plugins.load and plugins.skip list backend names; a file name or path there
// matched nothing and skipped every plugin without a word. A NUL inside any string is refused.
BOOST_AUTO_TEST_CASE(plugin_name_lists_and_nul_bytes_say_what_to_fix) {
  std::string m = config_error(R"({"plugins": {"load": ["tbb_cpu", "build/libravel_backend_hip.so"]}})");
  BOOST_TEST(contains(m, "$.plugins.load[1]"), m);
  BOOST_TEST(contains(m, "is not a plugin name"), m);
  BOOST_TEST(contains(m, "write \"hip\" and add its folder to plugins.search_paths"), m);
  m = config_error(R"({"plugins": {"skip": ["TBB CPU"]}})");
  BOOST_TEST(contains(m, "$.plugins.skip[0]"), m);
  BOOST_TEST(contains(m, "lower-case letters, digits and '_'"), m);
  BOOST_CHECK_NO_THROW(parse_config(R"({"plugins": {"load": ["tbb_cpu", "level_zero"]}})", "t", "/"));
  m = config_error(R"({"plugins": {"search_paths": ["plugins\u0000/evil"]}})");
  BOOST_TEST(contains(m, "$.plugins.search_paths[0]"), m);
  BOOST_TEST(contains(m, "NUL character (\\u0000) at position 7; remove it"), m);
}

// A search path that is a loop of symbolic links was reported as "does not exist".
BOOST_AUTO_TEST_CASE(a_search_path_symlink_loop_is_named_as_such) {
  const auto dir = temp_dir();
  fs::remove(dir / "loop");
  fs::create_directory_symlink(dir / "loop", dir / "loop");
  Environment env;
  env.plugin_path = (dir / "loop").string();
  Settings s = load_settings("", true, env);
  BOOST_TEST_REQUIRE(s.warnings.size() == 1u);
  BOOST_TEST(contains(s.warnings[0], "is a loop of symbolic links; point it at the plugin folder itself"), s.warnings[0]);
}
