#include "report.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ravel/ravel.hpp"

namespace ravel::bench {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// 33.55 MFLOP, 1.05 MB: the nominal work each throughput is computed from.
std::string si(double v, const char* unit) {
  const char* prefix[] = {"", "k", "M", "G", "T"};
  int p = 0;
  while (v >= 1000 && p < 4) v /= 1000, ++p;
  return fmt("%.3g ", v) + prefix[p] + unit;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : c == '"' ? "&quot;" : std::string(1, c);
  return out;
}

std::string now_iso() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

void print_table(std::ostream& os, const BenchConfig& cfg, const RunResult& res) {
  const char* head[] = {"workload", "size", "runner", "median ms", "min ms", "max ms", "throughput", "work/rep",
                        "kernels", "moved", "vs base"};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : res.rows) {
    std::vector<std::string> c = {r.workload, r.size, r.label()};
    if (r.status != "ok") {
      c.push_back(r.status == "failed" ? "FAILED" : "unavailable");
    } else {
      c.insert(c.end(), {fmt("%.3f", r.median_ms), fmt("%.3f", r.min_ms), fmt("%.3f", r.max_ms),
                         fmt("%.2f ", r.throughput) + r.unit(), r.flop_bound ? si(r.flops, "FLOP") : si(r.bytes, "B"),
                         r.kernels >= 0 ? fmt("%.0f", r.kernels) : "-", r.bytes_moved >= 0 ? si(r.bytes_moved, "B") : "-",
                         r.is_baseline ? "base" : r.ratio > 0 ? fmt(r.ratio < 0.1 ? "%.3fx" : "%.2fx", r.ratio) : "-"});
    }
    cells.push_back(c);
  }
  std::vector<size_t> width(std::size(head));
  for (size_t i = 0; i < width.size(); ++i) width[i] = std::string(head[i]).size();
  for (const auto& c : cells)
    for (size_t i = 0; i < c.size() && c.size() > 4; ++i) width[i] = std::max(width[i], c[i].size());
  for (const auto& c : cells)  // failed rows: only the first three columns set the width
    for (size_t i = 0; i < 3; ++i) width[i] = std::max(width[i], c[i].size());
  auto line = [&](const std::vector<std::string>& c) {
    for (size_t i = 0; i < c.size(); ++i) {
      bool left = i < 3 || c.size() <= 4;
      std::string pad(width[i] > c[i].size() ? width[i] - c[i].size() : 0, ' ');
      os << (i ? "  " : "") << (left ? c[i] + (i + 1 < c.size() ? pad : "") : pad + c[i]);
    }
    os << "\n";
  };
  os << "ravel-bench " << cfg.source << ": " << cfg.warmup << " warm-up + " << cfg.repetitions
     << " timed repetitions per row";
  for (const auto& w : cfg.workloads)  // workloads with counts of their own
    if (w.warmup >= 0 || w.repetitions >= 1) os << "; " << w.name << ": " << warmup_of(cfg, w) << " + " << repetitions_of(cfg, w);
  os << "\n";
  line(std::vector<std::string>(std::begin(head), std::end(head)));
  for (const auto& c : cells) line(c);
  os << "throughput = nominal work (work/rep: flops for matmul and mlp, else the bytes the math must read and write) / "
        "median time;\nkernels and moved (bytes the kernels read + wrote) are per repetition; vs base = baseline "
        "median / row median (>1 is faster)";
  if (!cfg.baseline.runner.empty())
    os << "; baseline: " << cfg.baseline.runner << (cfg.baseline.device.empty() ? "" : " " + cfg.baseline.device)
       << (cfg.baseline.policy.empty() ? "" : " " + cfg.baseline.policy);
  os << "\n";
  // Each runner's thread settings (docs/bench.md, "Threads"): ratios only mean something when every
  // runner had the same cores and none spun while another ran.
  std::vector<std::string> seen;
  for (const auto& r : res.rows) {
    if (r.threads.empty()) continue;
    const std::string l = r.label() + ": " + r.threads;
    if (std::find(seen.begin(), seen.end(), l) != seen.end()) continue;
    if (seen.empty()) os << "threads:\n";
    seen.push_back(l);
    os << "  " << l << "\n";
  }
  bool any = false;
  for (const auto& r : res.rows)
    if (r.status != "ok") {
      if (!any) os << "\nnot run:\n";
      any = true;
      os << "  " << (r.status == "failed" ? "FAILED " : "unavailable ") << r.workload << " " << r.size << " " << r.label()
         << ": " << r.message << "\n";
    }
  os << (res.failures ? "\n" + std::to_string(res.failures) + " row(s) failed\n" : "");
}

std::string results_json(const BenchConfig& cfg, const RunResult& res) {
  nlohmann::json j;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  j["config"] = cfg.source;
  j["date"] = now_iso();
  j["host"] = host;
  j["warmup"] = cfg.warmup;
  j["repetitions"] = cfg.repetitions;
  j["devices"] = nlohmann::json::array();
  for (const auto& d : Runtime::get().devices())
    j["devices"].push_back({{"device", d.device.str()}, {"name", d.name}, {"kind", d.kind}});
  j["baseline"] = {{"runner", cfg.baseline.runner}, {"device", cfg.baseline.device}, {"policy", cfg.baseline.policy}};
  j["failures"] = res.failures;
  j["results"] = nlohmann::json::array();
  for (const auto& r : res.rows) {
    nlohmann::json o = {{"workload", r.workload}, {"size", r.size},       {"runner", r.runner},
                        {"device", r.device},     {"policy", r.policy},   {"status", r.status},
                        {"message", r.message},   {"reps", r.reps},       {"median_ms", r.median_ms},
                        {"min_ms", r.min_ms},     {"max_ms", r.max_ms},   {"mean_ms", r.mean_ms},
                        {"flops", r.flops},       {"bytes", r.bytes},     {"throughput", r.throughput},
                        {"unit", r.unit()},       {"checked", r.checked}, {"ratio_to_baseline", r.ratio},
                        {"is_baseline", r.is_baseline}, {"threads", r.threads}};
    o["kernels"] = r.kernels >= 0 ? nlohmann::json(r.kernels) : nlohmann::json();
    o["bytes_moved"] = r.bytes_moved >= 0 ? nlohmann::json(r.bytes_moved) : nlohmann::json();
    j["results"].push_back(o);
  }
  return j.dump(2) + "\n";
}

std::string results_csv(const RunResult& res) {
  auto q = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) o += c == '"' ? "\"\"" : std::string(1, c);
    return o + "\"";
  };
  std::ostringstream os;
  os << "workload,size,runner,device,policy,status,reps,median_ms,min_ms,max_ms,mean_ms,flops,bytes,throughput,unit,"
        "kernels,bytes_moved,checked,ratio_to_baseline,message,threads\n";
  for (const auto& r : res.rows)
    os << q(r.workload) << "," << q(r.size) << "," << q(r.runner) << "," << q(r.device) << "," << q(r.policy) << ","
       << r.status << "," << r.reps << "," << fmt("%.6f", r.median_ms) << "," << fmt("%.6f", r.min_ms) << ","
       << fmt("%.6f", r.max_ms) << "," << fmt("%.6f", r.mean_ms) << "," << fmt("%.0f", r.flops) << ","
       << fmt("%.0f", r.bytes) << "," << fmt("%.4f", r.throughput) << "," << r.unit() << ","
       << (r.kernels >= 0 ? fmt("%.0f", r.kernels) : "") << "," << (r.bytes_moved >= 0 ? fmt("%.0f", r.bytes_moved) : "")
       << "," << r.checked << "," << fmt("%.4f", r.ratio) << "," << q(r.message) << "," << q(r.threads) << "\n";
  return os.str();
}

std::string results_svg(const BenchConfig& cfg, const RunResult& res) {
  // Groups in order of appearance; a colour per label (runner/device/policy) across groups.
  std::vector<std::string> groups, labels;
  std::map<std::string, std::vector<const Row*>> by_group;
  for (const auto& r : res.rows) {
    std::string g = r.workload + " " + r.size;
    if (!by_group.count(g)) groups.push_back(g);
    by_group[g].push_back(&r);
    if (std::find(labels.begin(), labels.end(), r.label()) == labels.end()) labels.push_back(r.label());
  }
  const char* palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  const bool vs_base = !cfg.baseline.runner.empty();
  const double bar = 18, gap = 28, plot_h = 260, top = 40, left = 60;
  double width = left + 20;
  for (const auto& g : groups) width += bar * double(by_group[g].size()) + gap;
  width = std::max(width, 520.0);
  const double legend_y = top + plot_h + 90, height = legend_y + 18 * double(labels.size()) + 20;
  // Heights relative to the baseline (or the group's best), on one scale for all groups.
  std::map<const Row*, double> rel;
  double max_rel = 1;
  for (const auto& g : groups) {
    double best = 0;
    for (const Row* r : by_group[g]) best = std::max(best, r->throughput);
    for (const Row* r : by_group[g])
      if (r->status == "ok") max_rel = std::max(max_rel, rel[r] = vs_base ? r->ratio : (best > 0 ? r->throughput / best : 0));
  }
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\">" << xml_escape("ravel-bench " + cfg.source) << "</text>\n";
  s << "<text x=\"12\" y=\"" << top + plot_h / 2 << "\" transform=\"rotate(-90 12 " << top + plot_h / 2
    << ")\" text-anchor=\"middle\">" << (vs_base ? "speed vs baseline (x)" : "throughput / best in group") << "</text>\n";
  for (int t = 0; t <= 4; ++t) {
    double v = max_rel * t / 4, y = top + plot_h - plot_h * t / 4;
    s << "<line x1=\"" << left << "\" x2=\"" << width - 10 << "\" y1=\"" << y << "\" y2=\"" << y << "\" stroke=\"#ddd\"/>"
      << "<text x=\"" << left - 4 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">" << fmt("%.2f", v) << "</text>\n";
  }
  double x = left + gap / 2;
  for (const auto& g : groups) {
    double gx = x;
    for (const Row* r : by_group[g]) {
      size_t li = size_t(std::find(labels.begin(), labels.end(), r->label()) - labels.begin());
      double h = r->status == "ok" ? plot_h * rel[r] / max_rel : 0;
      std::string tip = r->label() + ": " + (r->status == "ok" ? fmt("%.3f ms, ", r->median_ms) + fmt("%.2f ", r->throughput) + r->unit() : r->status + " " + r->message);
      s << "<rect x=\"" << x << "\" y=\"" << top + plot_h - h << "\" width=\"" << bar - 2 << "\" height=\"" << h
        << "\" fill=\"" << palette[li % std::size(palette)] << "\"><title>" << xml_escape(tip) << "</title></rect>\n";
      if (r->status != "ok")
        s << "<text x=\"" << x + bar / 2 << "\" y=\"" << top + plot_h - 4 << "\" text-anchor=\"middle\" fill=\"#c00\">"
          << (r->status == "failed" ? "x" : "-") << "</text>\n";
      x += bar;
    }
    s << "<text x=\"" << (gx + x) / 2 << "\" y=\"" << top + plot_h + 14 << "\" text-anchor=\"end\" transform=\"rotate(-30 "
      << (gx + x) / 2 << " " << top + plot_h + 14 << ")\">" << xml_escape(g) << "</text>\n";
    x += gap;
  }
  for (size_t i = 0; i < labels.size(); ++i)
    s << "<rect x=\"" << left << "\" y=\"" << legend_y + 18 * double(i) - 10 << "\" width=\"12\" height=\"12\" fill=\""
      << palette[i % std::size(palette)] << "\"/><text x=\"" << left + 18 << "\" y=\"" << legend_y + 18 * double(i)
      << "\">" << xml_escape(labels[i]) << "</text>\n";
  s << "</svg>\n";
  return s.str();
}

}  // namespace ravel::bench
