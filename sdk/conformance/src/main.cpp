// ravel-conformance PATH/TO/plugin.so [--device N] [--filter REGEX] [--json REPORT] [--list] [--decompose OPS] [-v]
//
// Loads a backend plugin directly (no core, no configuration) and checks it against the SDK's
// reference interpreter. Exit status: 0 if every case passed (skips allowed), 1 if any failed
// (a case in which the plugin crashed or hung counts as failed), 2 for a usage error or a
// plugin file that cannot be loaded at all.
#include "plugin.hpp"
#include "runner.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

using namespace rvl::conformance;

namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: ravel-conformance PATH/TO/plugin.so [--device N] [--filter REGEX]\n"
               "                         [--json REPORT] [--list] [--no-isolate]\n"
               "                         [--case-timeout SECONDS] [--jobs N] [--decompose OPS]\n"
               "                         [-v|--verbose]\n"
               "Runs the Ravel backend ABI v%d.%d conformance suite against a plugin.\n"
               "  --device N      device index to test (default 0)\n"
               "  --filter REGEX  only cases whose \"group/name\" matches (ECMAScript regex)\n"
               "  --json REPORT   also write a machine-readable report\n"
               "  --list          list the selected cases and exit\n"
               "  --no-isolate    run everything in this process (for debuggers); by default\n"
               "                  each case group runs in a child process, so a crash, abort\n"
               "                  or hang fails that case and the run goes on\n"
               "  --case-timeout S  a case running longer fails (isolated runs; default 300)\n"
               "  --jobs N        isolated runs: N child processes at once, each with its own\n"
               "                  plugin session (default 1); the report is the same\n"
               "  --decompose OPS treat the device as lacking OPS (comma-separated op names,\n"
               "                  or \"all\": every op with a decomposition), so that kernels\n"
               "                  reach it rewritten as a host rewrites them (ABI 1.6)\n"
               "  -v, --verbose   print every case, not only failures and skips\n",
               RVL_ABI_MAJOR, RVL_ABI_MINOR);
}

void register_all() {
  register_abi_cases();
  register_elementwise_cases();
  register_view_cases();
  register_reduction_cases();
  register_logsumexp_cases();
  register_row_epilogue_cases();
  register_row_chain_cases();
  register_contraction_cases();
  register_fused_cases();
  register_edge_cases();
  register_half_rounding_cases();
  register_malformed_cases();
  register_peer_cases();
  register_all_reduce_cases();
  register_scatter_gather_cases();
}

}  // namespace

// --decompose OPS: what the session masks off (children of isolated runs inherit it).
bool set_decompose(const std::string& spec) {
  Session& s = session();
  if (spec == "all") {
    s.decompose_all = true;
    return true;
  }
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t end = std::min(spec.find(',', start), spec.size());
    const std::string name = spec.substr(start, end - start);
    start = end + 1;
    int32_t op = 0;
    while (op < RVL_OP_COUNT_ && name != rvl::op_info(op).name) ++op;
    if (op == RVL_OP_COUNT_ || ((RVL_OPS_REQUIRED >> op) & 1u)) {
      std::fprintf(stderr, "ravel-conformance: --decompose takes \"all\" or op names of the op table "
                           "(e.g. SQRT,MAX; not LOAD, CONST or ACC), got '%s'\n", name.c_str());
      return false;
    }
    s.masked_ops |= RVL_OP_BIT(op);
  }
  return true;
}

bool parse_int(const std::string& text, int min, int max, int& out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > max) return false;
  out = static_cast<int>(v);
  return true;
}

int main(int argc, char** argv) {
  RunOptions opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ravel-conformance: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](int min, int max) {
      const std::string v = value();
      int n = 0;
      if (!parse_int(v, min, max, n)) {
        std::fprintf(stderr, "ravel-conformance: %s takes an integer in [%d, %d], got '%s'\n",
                     a.c_str(), min, max, v.c_str());
        std::exit(2);
      }
      return n;
    };
    if (a == "--device") opt.device = number(0, 1 << 20);
    else if (a == "--filter") opt.filter = value();
    else if (a == "--json") opt.json = value();
    else if (a == "--list") opt.list = true;
    else if (a == "--no-isolate") opt.isolate = false;
    else if (a == "--case-timeout") opt.case_timeout_s = number(1, 86400);
    else if (a == "--jobs") opt.jobs = number(1, 256);
    else if (a == "--decompose") opt.decompose = value();
    else if (a == "-v" || a == "--verbose") opt.verbose = true;
    else if (a == "-h" || a == "--help") { usage(stdout); return 0; }
    else if (!a.empty() && a[0] == '-') { usage(stderr); return 2; }
    else if (opt.plugin_path.empty()) opt.plugin_path = a;
    else { usage(stderr); return 2; }
  }
  if (!opt.decompose.empty() && !set_decompose(opt.decompose)) return 2;
  register_all();
  std::vector<const Case*> selected;
  try {
    selected = select_cases(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ravel-conformance: bad --filter '%s': %s\n", opt.filter.c_str(), e.what());
    return 2;
  }
  if (selected.empty()) {
    std::fprintf(stderr, "ravel-conformance: --filter '%s' matches none of the %zu cases (see --list)\n",
                 opt.filter.c_str(), cases().size());
    return 2;
  }
  if (opt.list) {
    for (const Case* c : selected) std::printf("%s/%s\n", c->group.c_str(), c->name.c_str());
    return 0;
  }
  if (opt.plugin_path.empty()) {
    usage(stderr);
    return 2;
  }
  return opt.isolate ? run_isolated(opt) : run_in_process(opt);
}
