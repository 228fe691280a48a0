#include "harness.hpp"

// GCC 12 reports -Wmaybe-uninitialized false positives inside libstdc++ <regex> (std::function)
// at -O2 with sanitizers; the code below does not own any of it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace rvl::conformance {

std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

void add_case(const std::string& group, const std::string& name, std::function<void(Measure&)> body) {
  cases().push_back(Case{group, name, std::move(body)});
}

std::string dtype_str(int32_t dt) {
  return rvl::dtype_valid(dt) ? rvl::dtype_name(dt) : "dtype" + std::to_string(dt);
}

std::string op_str(int32_t op) {
  return rvl::op_valid(op) ? rvl::op_name(op) : "op" + std::to_string(op);
}

// ---- error measure -----------------------------------------------------------------------
double threshold(Accuracy a, int32_t dt) {
  switch (a) {
    case Accuracy::Exact: return rvl::accuracy_threshold(rvl::OpAccuracy::Exact, dt);
    case Accuracy::Rounding: return rvl::accuracy_threshold(rvl::OpAccuracy::Rounding, dt);
    case Accuracy::Transcendental:
      return rvl::accuracy_threshold(rvl::OpAccuracy::Transcendental, dt);
    case Accuracy::Accumulation:
      return dt == RVL_DTYPE_F32 ? 1e-8 : dt == RVL_DTYPE_F64 ? 1e-20 : 0;
  }
  return 0;
}

Accuracy accuracy_of(int32_t op) {
  switch (rvl::op_info(op).accuracy) {
    case rvl::OpAccuracy::Exact: return Accuracy::Exact;
    case rvl::OpAccuracy::Rounding: return Accuracy::Rounding;
    case rvl::OpAccuracy::Transcendental: return Accuracy::Transcendental;
  }
  return Accuracy::Exact;
}

namespace {
std::string fmt(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}
}  // namespace

double compare(const ref::HostBuffer& got, const ref::HostBuffer& want, double thr,
               const std::string& what) {
  if (got.dtype != want.dtype || got.bytes.size() != want.bytes.size())
    throw Failure(what + ": result buffer has the wrong size");
  const int64_t n = want.elements();
  if (n == 0) return 0;
  if (!ref::is_float(want.dtype)) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; ++i)
      if (got.get(i).i != want.get(i).i && bad++ == 0) first = i;
    if (bad)
      throw Failure(what + ": " + std::to_string(bad) + " of " + std::to_string(n) +
                    " elements differ (exact match required); first at element " +
                    std::to_string(first) + ": got " + std::to_string(got.get(first).i) +
                    ", expected " + std::to_string(want.get(first).i));
    return 0;
  }
  double err = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got.get(i).f, w = want.get(i).f;
    if (std::isnan(w) || std::isinf(w) || std::isnan(g) || std::isinf(g)) {
      const bool same = (std::isnan(w) && std::isnan(g)) || (!std::isnan(w) && g == w);
      if (!same)
        throw Failure(what + ": element " + std::to_string(i) + " is " + fmt(g) + ", expected " +
                      fmt(w) + " (NaN/Inf must match exactly)");
      continue;
    }
    err += (g - w) * (g - w);
    norm += w * w;
  }
  const double nmse = err / std::max(norm, double(n) * 1e-30);
  if (!(nmse <= thr)) {
    int64_t worst = 0;
    double worst_d = -1;
    for (int64_t i = 0; i < n; ++i) {
      const double d = std::fabs(got.get(i).f - want.get(i).f);
      if (d > worst_d) worst_d = d, worst = i;
    }
    throw Failure(what + ": normalised mean squared error " + fmt(nmse) + " exceeds " + fmt(thr) +
                  "; worst element " + std::to_string(worst) + " is " + fmt(got.get(worst).f) +
                  ", expected " + fmt(want.get(worst).f));
  }
  return nmse;
}

// ---- runner --------------------------------------------------------------------------------
namespace {

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
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

struct Result {
  const Case* c;
  const char* status;  // "passed", "failed", "skipped"
  std::string message;
  Measure m;
};

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
};

}  // namespace

int run_cases(const RunOptions& opt) {
  std::regex re;
  if (!opt.filter.empty()) re = std::regex(opt.filter, std::regex::ECMAScript);
  std::vector<const Case*> selected;
  for (const Case& c : cases())
    if (opt.filter.empty() || std::regex_search(c.group + "/" + c.name, re)) selected.push_back(&c);
  if (opt.list) {
    for (const Case* c : selected) std::printf("%s/%s\n", c->group.c_str(), c->name.c_str());
    return 0;
  }

  std::vector<Result> results;
  std::vector<std::string> order;
  std::map<std::string, Tally> groups;
  Tally total;
  const auto t0 = std::chrono::steady_clock::now();
  std::string current;
  auto close_group = [&] {
    if (current.empty()) return;
    const Tally& t = groups[current];
    std::printf("[%s] %d passed, %d failed, %d skipped\n", current.c_str(), t.passed, t.failed,
                t.skipped);
    std::fflush(stdout);
  };
  for (const Case* c : selected) {
    if (c->group != current) {
      close_group();
      current = c->group;
      std::printf("== %s\n", current.c_str());
      std::fflush(stdout);
    }
    Result r{c, "passed", "", {}};
    try {
      c->body(r.m);
    } catch (const Skip& e) {
      r.status = "skipped";
      r.message = e.what();
    } catch (const std::exception& e) {
      r.status = "failed";
      r.message = e.what();
    }
    Tally& g = groups[c->group];
    if (r.status[0] == 'p') ++g.passed, ++total.passed;
    else if (r.status[0] == 'f') ++g.failed, ++total.failed;
    else ++g.skipped, ++total.skipped;
    const std::string full = c->group + "/" + c->name;
    if (r.status[0] == 'f')
      std::printf("  FAIL %s: %s\n", full.c_str(), r.message.c_str());
    else if (r.status[0] == 's')
      std::printf("  skip %s: %s\n", full.c_str(), r.message.c_str());
    else if (opt.verbose)
      std::printf("  ok   %s (error %.3g, threshold %.3g)\n", full.c_str(), r.m.error, r.m.threshold);
    std::fflush(stdout);
    results.push_back(std::move(r));
  }
  close_group();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d passed, %d failed", total.passed, total.failed);
  if (total.skipped) std::printf(", %d skipped (not supported)", total.skipped);
  std::printf(" (%.1f s)\n", secs);

  if (!opt.json.empty()) {
    std::ofstream f(opt.json);
    const rvl_backend_api& api = *session().api;
    rvl_backend_info info{};
    info.struct_size = sizeof info;
    const ErrorInfo ie = take_error(api.get_info(&info));
    f << "{\n  \"plugin\": \"" << json_escape(opt.plugin_path) << "\",\n";
    f << "  \"backend\": \"" << json_escape(!ie.failed && info.name ? info.name : "") << "\",\n";
    f << "  \"device\": " << session().device << ",\n  \"device_name\": \""
      << json_escape(session().props.name) << "\",\n";
    f << "  \"abi\": {\"host_major\": " << RVL_ABI_MAJOR << ", \"host_minor\": " << RVL_ABI_MINOR
      << ", \"plugin_major\": " << api.abi_major << ", \"plugin_minor\": " << api.abi_minor << "},\n";
    f << "  \"summary\": {\"passed\": " << total.passed << ", \"failed\": " << total.failed
      << ", \"skipped\": " << total.skipped << ", \"seconds\": " << secs << "},\n";
    f << "  \"cases\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      f << "    {\"group\": \"" << json_escape(r.c->group) << "\", \"name\": \""
        << json_escape(r.c->name) << "\", \"status\": \"" << r.status << "\", \"error\": "
        << r.m.error << ", \"threshold\": " << r.m.threshold << ", \"message\": \""
        << json_escape(r.message) << "\"}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    f << "  ]\n}\n";
    if (!f) std::fprintf(stderr, "ravel-conformance: cannot write %s\n", opt.json.c_str());
  }
  return total.failed;
}

}  // namespace rvl::conformance
