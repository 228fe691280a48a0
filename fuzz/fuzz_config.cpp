// Fuzzes the config reader (core/src/config): any bytes as a config file's text. It must either
// accept them or throw ConfigError, never crash, hang or recurse deeply, and its message must stay
// short (echoed values are capped; docs/config.md). Accepted configs must survive a round trip
// through config_to_json, the text ravel-info --config prints.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/config.hpp"
#include "ravel/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto c = ravel::detail::parse_config(text, "fuzz.json", "/fuzz");
    // What ravel-info prints parses back to the same settings.
    auto again = ravel::detail::parse_config(ravel::detail::config_to_json(c), "round-trip", "/fuzz");
    if (ravel::detail::config_to_json(again) != ravel::detail::config_to_json(c)) {
      std::fprintf(stderr, "config fuzzer: config_to_json does not round-trip\n");
      std::abort();
    }
  } catch (const ravel::ConfigError& e) {
    if (std::string(e.what()).size() > 2000) {
      std::fprintf(stderr, "config fuzzer: %zu-byte error message\n", std::string(e.what()).size());
      std::abort();
    }
  }
  return 0;
}
