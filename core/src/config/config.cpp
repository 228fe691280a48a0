#include "config/config.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ravel/device.hpp"
#include "ravel/error.hpp"

namespace ravel::detail {

using nlohmann::json;

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

[[noreturn]] void fail(const Config& c, const std::string& path, const std::string& msg) {
  throw ConfigError(c.source + ": " + path + ": " + msg);
}

void check_keys(const Config& c, const json& obj, const std::string& path, const std::vector<std::string>& known) {
  if (!obj.is_object()) fail(c, path, "expected an object, got " + obj.dump());
  for (const auto& [key, value] : obj.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    // Suggest the closest known key if it is within half the longer name's length.
    std::string best;
    size_t best_d = SIZE_MAX;
    for (const auto& k : known)
      if (size_t d = edit_distance(key, k); d <= std::max<size_t>(2, std::max(key.size(), k.size()) / 2) && d < best_d)
        best_d = d, best = k;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    fail(c, path + "." + key, "unknown key" + (best.empty() ? "" : " (did you mean \"" + best + "\"?)") +
                                  "; expected one of: " + list);
  }
}

std::vector<std::string> string_list(const Config& c, const json& v, const std::string& path) {
  if (!v.is_array()) fail(c, path, "expected an array of strings, got " + v.dump());
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) fail(c, path + "[" + std::to_string(i) + "]", "expected a string, got " + v[i].dump());
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

}  // namespace

Config parse_config(const std::string& text, const std::string& source, const std::string& base_dir) {
  Config c;
  c.source = source;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ConfigError(source + ": malformed JSON: " + e.what());
  }
  // "fusion", "logging" and "bench" are read by the scheduler and ravel-bench; accepted here.
  check_keys(c, j, "$", {"plugins", "placement", "fusion", "logging", "bench", "comment"});
  if (j.contains("plugins")) {
    const json& p = j["plugins"];
    check_keys(c, p, "$.plugins", {"search_paths", "skip"});
    if (p.contains("search_paths"))
      for (auto& s : string_list(c, p["search_paths"], "$.plugins.search_paths")) {
        std::filesystem::path path(s);
        if (path.is_relative()) path = std::filesystem::path(base_dir) / path;
        c.plugin_paths.push_back(path.lexically_normal().string());
      }
    if (p.contains("skip")) c.plugin_skip = string_list(c, p["skip"], "$.plugins.skip");
  }
  if (j.contains("placement")) {
    const json& p = j["placement"];
    check_keys(c, p, "$.placement", {"devices"});
    if (p.contains("devices")) {
      c.placement = string_list(c, p["devices"], "$.placement.devices");
      for (size_t i = 0; i < c.placement.size(); ++i) {
        try {
          Device::parse(c.placement[i]);
        } catch (const Error& e) {
          fail(c, "$.placement.devices[" + std::to_string(i) + "]", e.what());
        }
      }
    }
  }
  if (j.contains("fusion")) {
    const json& f = j["fusion"];
    check_keys(c, f, "$.fusion", {"policy", "max_instructions", "max_inputs", "max_recompute_instructions"});
    if (f.contains("policy")) {
      if (!f["policy"].is_string()) fail(c, "$.fusion.policy", "expected a string, got " + f["policy"].dump());
      try {
        c.fusion.policy = parse_fusion_policy(f["policy"].get<std::string>());
      } catch (const ConfigError& e) {
        fail(c, "$.fusion.policy", e.what());
      }
    }
    auto limit = [&](const char* key, int& out, int lo) {
      if (!f.contains(key)) return;
      const json& v = f[key];
      if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > 1000000)
        fail(c, std::string("$.fusion.") + key, "expected an integer in [" + std::to_string(lo) + ", 1000000], got " + v.dump());
      out = v.get<int>();
    };
    limit("max_instructions", c.fusion.max_instructions, 2);
    limit("max_inputs", c.fusion.max_inputs, 2);
    limit("max_recompute_instructions", c.fusion.max_recompute_instructions, 0);
  }
  return c;
}

Config load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read config file " + path + " (expected a readable JSON file)");
  std::stringstream ss;
  ss << in.rdbuf();
  auto dir = std::filesystem::absolute(path).parent_path().string();
  return parse_config(ss.str(), path, dir);
}

}  // namespace ravel::detail
