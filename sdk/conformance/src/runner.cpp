#include "runner.hpp"

// GCC 12 reports -Wmaybe-uninitialized false positives inside libstdc++ <regex> (std::function)
// at -O2 with sanitizers; the code below does not own any of it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>

namespace rvl::conformance {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o;
}

}  // namespace

PluginIdentity set_up_session(const std::string& path, int32_t device,
                              std::unique_ptr<Plugin>& holder) {
  try {
    holder = std::make_unique<Plugin>(path);
  } catch (const std::exception& e) {
    throw SetupError(2, e.what());
  }
  const rvl_backend_api& api = holder->api();
  if (api.abi_major != RVL_ABI_MAJOR ||
      api.struct_size < offsetof(rvl_backend_api, error_destroy) + sizeof(void*))
    throw SetupError(1, "the plugin speaks ABI " + std::to_string(api.abi_major) + "." +
                            std::to_string(api.abi_minor) + " (table of " +
                            std::to_string(api.struct_size) + " bytes); this runner checks ABI " +
                            std::to_string(RVL_ABI_MAJOR) + ".x");
  Session& s = session();
  s.api = &api;
  s.device = device;
  PluginIdentity id;
  id.abi_major = api.abi_major;
  id.abi_minor = api.abi_minor;
  try {
    check_ok(api.initialize(), "initialize");
    int32_t count = 0;
    check_ok(api.device_count(&count), "device_count");
    if (device < 0 || device >= count)
      throw Failure("device " + std::to_string(device) + " does not exist (the plugin has " +
                    std::to_string(count) + ")");
    s.props = rvl_device_properties{};
    s.props.struct_size = sizeof s.props;
    check_ok(api.device_properties(device, &s.props), "device_properties");
    s.props.name[sizeof s.props.name - 1] = '\0';
    s.ops = rvl::effective_ops(RVL_HAS_MEMBER(&s.props, rvl_device_properties, ops) ? s.props.ops : 0);
    rvl_backend_info info{};
    info.struct_size = sizeof info;
    check_ok(api.get_info(&info), "get_info");
    id.name = info.name ? info.name : "";
    id.version = info.version ? info.version : "";
    id.device_name = s.props.name;
  } catch (const std::exception& e) {
    throw SetupError(1, std::string("cannot set up the plugin: ") + e.what());
  }
  return id;
}

std::vector<const Case*> select_cases(const RunOptions& opt) {
  std::regex re;
  if (!opt.filter.empty()) re = std::regex(opt.filter, std::regex::ECMAScript);
  std::vector<const Case*> selected;
  for (const Case& c : cases())
    if (opt.filter.empty() || std::regex_search(c.group + "/" + c.name, re))
      selected.push_back(&c);
  return selected;
}

Outcome run_case(const Case& c) {
  Outcome o;
  o.c = &c;
  o.status = "passed";
  try {
    c.body(o.m);
  } catch (const Skip& e) {
    o.status = "skipped";
    o.message = e.what();
  } catch (const std::exception& e) {
    o.status = "failed";
    o.message = e.what();
  } catch (...) {
    o.status = "failed";
    o.message = "a non-standard exception escaped the case";
  }
  return o;
}

Report::Report(const RunOptions& opt) : opt_(opt), start_(now_seconds()) {}

void Report::close_group() {
  if (current_.empty()) return;
  const Tally& t = groups_[current_];
  std::printf("[%s] %d passed, %d failed, %d skipped\n", current_.c_str(), t.passed, t.failed,
              t.skipped);
  std::fflush(stdout);
}

void Report::add(Outcome o) {
  const Case& c = *o.c;
  if (c.group != current_) {
    close_group();
    current_ = c.group;
    std::printf("== %s\n", current_.c_str());
  }
  Tally& g = groups_[c.group];
  const char s = o.status[0];
  if (s == 'p') ++g.passed, ++total_.passed;
  else if (s == 'f') ++g.failed, ++total_.failed;
  else ++g.skipped, ++total_.skipped;
  const std::string full = c.group + "/" + c.name;
  if (s == 'f') std::printf("  FAIL %s: %s\n", full.c_str(), o.message.c_str());
  else if (s == 's') std::printf("  skip %s: %s\n", full.c_str(), o.message.c_str());
  else if (opt_.verbose)
    std::printf("  ok   %s (error %.3g, threshold %.3g)\n", full.c_str(), o.m.error, o.m.threshold);
  std::fflush(stdout);
  outcomes_.push_back(std::move(o));
}

int Report::finish(const PluginIdentity& id) {
  close_group();
  const double secs = now_seconds() - start_;
  std::printf("%d passed, %d failed", total_.passed, total_.failed);
  if (total_.skipped) std::printf(", %d skipped (not supported)", total_.skipped);
  std::printf(" (%.1f s)\n", secs);
  std::fflush(stdout);
  if (opt_.json.empty()) return total_.failed;
  std::ofstream f(opt_.json);
  f << "{\n  \"plugin\": \"" << json_escape(opt_.plugin_path) << "\",\n";
  f << "  \"backend\": \"" << json_escape(id.name) << "\",\n";
  f << "  \"device\": " << opt_.device << ",\n  \"device_name\": \"" << json_escape(id.device_name)
    << "\",\n";
  f << "  \"abi\": {\"host_major\": " << RVL_ABI_MAJOR << ", \"host_minor\": " << RVL_ABI_MINOR
    << ", \"plugin_major\": " << id.abi_major << ", \"plugin_minor\": " << id.abi_minor << "},\n";
  f << "  \"isolated\": " << (opt_.isolate ? "true" : "false") << ",\n";
  f << "  \"summary\": {\"passed\": " << total_.passed << ", \"failed\": " << total_.failed
    << ", \"skipped\": " << total_.skipped << ", \"seconds\": " << secs << "},\n";
  f << "  \"cases\": [\n";
  for (size_t i = 0; i < outcomes_.size(); ++i) {
    const Outcome& o = outcomes_[i];
    f << "    {\"group\": \"" << json_escape(o.c->group) << "\", \"name\": \""
      << json_escape(o.c->name) << "\", \"status\": \"" << o.status << "\", \"error\": "
      << o.m.error << ", \"threshold\": " << o.m.threshold << ", \"message\": \""
      << json_escape(o.message) << "\"}" << (i + 1 < outcomes_.size() ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
  if (!f) std::fprintf(stderr, "ravel-conformance: cannot write %s\n", opt_.json.c_str());
  return total_.failed;
}

int run_in_process(const RunOptions& opt) {
  const std::vector<const Case*> selected = select_cases(opt);
  std::unique_ptr<Plugin> plugin;
  PluginIdentity id;
  try {
    id = set_up_session(opt.plugin_path, opt.device, plugin);
  } catch (const SetupError& e) {
    std::fprintf(stderr, "ravel-conformance: %s\n", e.what());
    if (e.status == 1) std::printf("0 passed, 1 failed\n");
    return e.status;
  }
  std::printf("ravel-conformance: %s %s (ABI %u.%u), device %d: %s\n", id.name.c_str(),
              id.version.c_str(), id.abi_major, id.abi_minor, opt.device, id.device_name.c_str());
  Report report(opt);
  for (const Case* c : selected) report.add(run_case(*c));
  const int failed = report.finish(id);
  plugin->api().shutdown();
  return failed > 0 ? 1 : 0;
}

}  // namespace rvl::conformance
