#include "config/config.hpp"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "config/json_check.hpp"
#include "config/json_input.hpp"
#include "ravel/device.hpp"
#include "ravel/error.hpp"

namespace ravel::detail {

using nlohmann::json;

namespace {

// plugins.skip and plugins.load list backend names, as devices spell them ("tbb_cpu" in
// "tbb_cpu:0"); a file name or path there matched no plugin and filtered everything out silently.
std::vector<std::string> plugin_names(const JsonChecker& ck, const json& v, const std::string& path) {
  std::vector<std::string> names = ck.strings(v, path);
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    bool ok = !n.empty();
    for (char ch : n) ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_');
    if (ok) continue;
    std::string hint;
    const size_t slash = n.find_last_of('/');
    std::string file = slash == std::string::npos ? n : n.substr(slash + 1);
    if (file.rfind("libravel_backend_", 0) == 0) {
      file = file.substr(17);
      file = file.substr(0, file.find('.'));
      hint = " (for " + cap_text(n, 64) + " write \"" + cap_text(file, 64) + "\"" +
             (slash == std::string::npos ? "" : " and add its folder to plugins.search_paths") + ")";
    }
    ck.fail(path + "[" + std::to_string(i) + "]",
            "\"" + cap_text(n, 64) + "\" is not a plugin name; expected a backend name as devices spell it: lower-case "
            "letters, digits and '_', e.g. \"tbb_cpu\" or \"hip\"" + hint);
  }
  return names;
}

void parse_plugins(const JsonChecker& ck, const json& p, const std::string& base_dir, Config& c) {
  ck.keys(p, "$.plugins", {"search_paths", "skip", "load"});
  if (p.contains("search_paths"))
    for (auto& s : ck.strings(p["search_paths"], "$.plugins.search_paths")) {
      std::filesystem::path path(s);
      if (path.is_relative()) path = std::filesystem::path(base_dir) / path;
      c.plugin_paths.push_back(path.lexically_normal().string());
    }
  if (p.contains("skip")) c.plugin_skip = plugin_names(ck, p["skip"], "$.plugins.skip");
  if (p.contains("load")) c.plugin_load = plugin_names(ck, p["load"], "$.plugins.load");
}

void check_device_name(const JsonChecker& ck, const std::string& name, const std::string& path) {
  try {
    Device::parse(name);
  } catch (const Error& e) {
    ck.fail(path, e.what());
  }
}

void parse_placement(const JsonChecker& ck, const json& p, Config& c) {
  ck.keys(p, "$.placement", {"devices", "default", "on_mixed_devices"});
  if (p.contains("devices")) {
    c.placement = ck.strings(p["devices"], "$.placement.devices");
    for (size_t i = 0; i < c.placement.size(); ++i)
      check_device_name(ck, c.placement[i], "$.placement.devices[" + std::to_string(i) + "]");
  }
  if (p.contains("default")) {
    // An explicit device has no fallback, so a preference list beside it would never be read:
    // say so rather than silently ignoring one of them.
    if (p.contains("devices"))
      ck.fail("$.placement.default", "expected either \"default\" (one explicit device) or \"devices\" (a "
                                     "preference list with fallback), got both");
    c.placement_default = ck.string(p["default"], "$.placement.default");
    check_device_name(ck, c.placement_default, "$.placement.default");
  }
  if (p.contains("on_mixed_devices"))
    c.on_mixed_devices = ck.choice(p["on_mixed_devices"], "$.placement.on_mixed_devices", {"error", "copy"});
}

void parse_fusion(const JsonChecker& ck, const json& f, Config& c) {
  ck.keys(f, "$.fusion", {"policy", "max_instructions", "max_inputs", "max_recompute_instructions"});
  if (f.contains("policy")) {
    std::string name = ck.string(f["policy"], "$.fusion.policy");
    try {
      c.fusion.policy = parse_fusion_policy(cap_text(name));  // a capped name is never valid, and echoes short
    } catch (const ConfigError& e) {
      ck.fail("$.fusion.policy", e.what());
    }
  }
  auto limit = [&](const char* key, int& out, int lo) {
    if (f.contains(key)) out = static_cast<int>(ck.integer(f[key], std::string("$.fusion.") + key, lo, 1000000));
  };
  limit("max_instructions", c.fusion.max_instructions, 2);
  limit("max_inputs", c.fusion.max_inputs, 2);
  limit("max_recompute_instructions", c.fusion.max_recompute_instructions, 0);
}

void parse_logging(const JsonChecker& ck, const json& l, Config& c) {
  ck.keys(l, "$.logging", {"level", "plugins", "placement"});
  if (l.contains("level"))
    c.logging.level = ck.choice(l["level"], "$.logging.level", {"off", "error", "warn", "info", "debug"});
  if (l.contains("plugins")) c.logging.plugins = ck.boolean(l["plugins"], "$.logging.plugins");
  if (l.contains("placement")) c.logging.placement = ck.boolean(l["placement"], "$.logging.placement");
}

void parse_parallel(const JsonChecker& ck, const json& p, Config& c) {
  ck.keys(p, "$.parallel", {"mesh", "batch_axis"});
  if (p.contains("mesh")) {
    c.parallel.mesh = ck.strings(p["mesh"], "$.parallel.mesh");
    if (c.parallel.mesh.empty()) ck.fail("$.parallel.mesh", "expected at least one device, got []");
    for (size_t i = 0; i < c.parallel.mesh.size(); ++i) {
      const std::string path = "$.parallel.mesh[" + std::to_string(i) + "]";
      check_device_name(ck, c.parallel.mesh[i], path);
      const std::string name = Device::parse(c.parallel.mesh[i]).str();
      for (size_t k = 0; k < i; ++k)
        if (Device::parse(c.parallel.mesh[k]).str() == name)
          ck.fail(path, "device " + name + " appears twice in the mesh (also at $.parallel.mesh[" + std::to_string(k) +
                            "]); expected distinct devices");
      c.parallel.mesh[i] = name;
    }
  }
  if (p.contains("batch_axis")) c.parallel.batch_axis = ck.integer(p["batch_axis"], "$.parallel.batch_axis", 0, 31);
}

// RAVEL_DIST_TIMEOUT_S overrides it, and Options::timeout both (core/src/distributed/world.cpp).
void parse_distributed(const JsonChecker& ck, const json& d, Config& c) {
  ck.keys(d, "$.distributed", {"timeout_s"});
  if (!d.contains("timeout_s")) return;
  const json& v = d["timeout_s"];
  if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() < 1e7))
    ck.fail("$.distributed.timeout_s", "expected a positive number of seconds below 1e7, got " + brief_json(v));
  c.distributed.timeout_s = v.get<double>();
}

}  // namespace

Config parse_config(const std::string& text, const std::string& source, const std::string& base_dir) {
  Config c;
  c.source = source;
  JsonChecker ck(source);
  json j = parse_json_text(text, source);  // bounded depth, no duplicate keys
  // "bench" is read (and checked) by ravel-bench; the core accepts it so that one file can
  // configure both the runtime and a benchmark run.
  ck.keys(j, "$", {"plugins", "placement", "fusion", "logging", "parallel", "distributed", "bench", "comment"});
  if (j.contains("plugins")) parse_plugins(ck, j["plugins"], base_dir, c);
  if (j.contains("placement")) parse_placement(ck, j["placement"], c);
  if (j.contains("fusion")) parse_fusion(ck, j["fusion"], c);
  if (j.contains("logging")) parse_logging(ck, j["logging"], c);
  if (j.contains("parallel")) parse_parallel(ck, j["parallel"], c);
  if (j.contains("distributed")) parse_distributed(ck, j["distributed"], c);
  return c;
}

Config load_config(const std::string& path) {
  std::string text = read_json_file(path);  // at most kMaxJsonBytes
  auto dir = std::filesystem::absolute(path).parent_path().string();
  return parse_config(text, path, dir);
}

std::string config_to_json(const Config& c) {
  json j;
  j["plugins"] = {{"search_paths", c.plugin_paths}, {"skip", c.plugin_skip}, {"load", c.plugin_load}};
  j["placement"] = json::object();
  if (c.placement_default.empty())
    j["placement"]["devices"] = c.placement;
  else
    j["placement"]["default"] = c.placement_default;
  j["placement"]["on_mixed_devices"] = c.on_mixed_devices;
  j["fusion"] = {{"policy", fusion_policy_name(c.fusion.policy)},
                 {"max_instructions", c.fusion.max_instructions},
                 {"max_inputs", c.fusion.max_inputs},
                 {"max_recompute_instructions", c.fusion.max_recompute_instructions}};
  j["logging"] = {{"level", c.logging.level}, {"plugins", c.logging.plugins}, {"placement", c.logging.placement}};
  j["parallel"] = {{"mesh", c.parallel.mesh}, {"batch_axis", c.parallel.batch_axis}};
  j["distributed"] = json::object();
  if (c.distributed.timeout_s > 0) j["distributed"]["timeout_s"] = c.distributed.timeout_s;
  return j.dump(2);
}

}  // namespace ravel::detail
