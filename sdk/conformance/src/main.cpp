// ravel-conformance PATH/TO/plugin.so [--device N] [--filter REGEX] [--json REPORT] [--list] [-v]
//
// Loads a backend plugin directly (no core, no configuration) and checks it against the SDK's
// reference interpreter. Exit status: 0 if every case passed (skips allowed), 1 if any failed,
// 2 for a usage error or a plugin that cannot even be loaded and initialised.
#include "harness.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

using namespace rvl::conformance;

namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: ravel-conformance PATH/TO/plugin.so [--device N] [--filter REGEX]\n"
               "                         [--json REPORT] [--list] [-v|--verbose]\n"
               "Runs the Ravel backend ABI v%d.%d conformance suite against a plugin.\n"
               "  --device N      device index to test (default 0)\n"
               "  --filter REGEX  only cases whose \"group/name\" matches (ECMAScript regex)\n"
               "  --json REPORT   also write a machine-readable report\n"
               "  --list          list the selected cases and exit\n"
               "  -v, --verbose   print every case, not only failures and skips\n",
               RVL_ABI_MAJOR, RVL_ABI_MINOR);
}

void register_all() {
  register_abi_cases();
  register_elementwise_cases();
  register_view_cases();
  register_reduction_cases();
  register_contraction_cases();
  register_fused_cases();
  register_edge_cases();
  register_malformed_cases();
}

}  // namespace

int main(int argc, char** argv) {
  RunOptions opt;
  int32_t device = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ravel-conformance: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--device") device = std::atoi(value().c_str());
    else if (a == "--filter") opt.filter = value();
    else if (a == "--json") opt.json = value();
    else if (a == "--list") opt.list = true;
    else if (a == "-v" || a == "--verbose") opt.verbose = true;
    else if (a == "-h" || a == "--help") { usage(stdout); return 0; }
    else if (!a.empty() && a[0] == '-') { usage(stderr); return 2; }
    else if (opt.plugin_path.empty()) opt.plugin_path = a;
    else { usage(stderr); return 2; }
  }
  register_all();
  if (opt.list) {
    try {
      return run_cases(opt);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ravel-conformance: %s\n", e.what());
      return 2;
    }
  }
  if (opt.plugin_path.empty()) {
    usage(stderr);
    return 2;
  }

  std::unique_ptr<Plugin> plugin;
  try {
    plugin = std::make_unique<Plugin>(opt.plugin_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ravel-conformance: %s\n", e.what());
    return 2;
  }
  const rvl_backend_api& api = plugin->api();
  if (api.abi_major != RVL_ABI_MAJOR || api.struct_size < offsetof(rvl_backend_api, error_destroy) + sizeof(void*)) {
    std::fprintf(stderr, "ravel-conformance: the plugin speaks ABI %u.%u (table of %zu bytes); this runner "
                 "checks ABI %d.x\n", api.abi_major, api.abi_minor, api.struct_size, RVL_ABI_MAJOR);
    std::printf("0 passed, 1 failed\n");
    return 1;
  }
  Session& s = session();
  s.api = &api;
  s.device = device;
  int rc = 0;
  try {
    check_ok(api.initialize(), "initialize");
    int32_t count = 0;
    check_ok(api.device_count(&count), "device_count");
    if (device < 0 || device >= count)
      throw Failure("device " + std::to_string(device) + " does not exist (the plugin has " +
                    std::to_string(count) + ")");
    s.props.struct_size = sizeof s.props;
    check_ok(api.device_properties(device, &s.props), "device_properties");
    rvl_backend_info info{};
    info.struct_size = sizeof info;
    check_ok(api.get_info(&info), "get_info");
    std::printf("ravel-conformance: %s %s (ABI %u.%u), device %d: %s\n", info.name ? info.name : "?",
                info.version ? info.version : "?", api.abi_major, api.abi_minor, device,
                s.props.name);
    std::fflush(stdout);
    rc = run_cases(opt) > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ravel-conformance: cannot set up the plugin: %s\n", e.what());
    std::printf("0 passed, 1 failed\n");
    rc = 1;
  }
  api.shutdown();
  return rc;
}
