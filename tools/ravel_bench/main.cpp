// ravel-bench: config-driven benchmark runs (docs/bench.md).
//   ravel-bench CONFIG.json [--out DIR] [--reps N] [--warmup N] [--no-peers | --peers-only] [--quiet]
//   ravel-bench --list
// Exit status: 0 all rows ran (peers that are not installed do not count), 1 something failed
// (a missing device, a failing or wrong workload, a failing peer), 2 a bad command line or config.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "bench_config.hpp"
#include "ravel/ravel.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "workloads.hpp"

namespace fs = std::filesystem;
using namespace ravel::bench;

namespace {

const char* kUsage =
    "usage: ravel-bench CONFIG.json [--out DIR] [--reps N] [--warmup N] [--no-peers | --peers-only] [--quiet]\n"
    "       ravel-bench --list\n"
    "Runs the workloads of CONFIG's \"bench\" section on its devices under its fusion policies (and its\n"
    "peers), prints a table and writes DIR/NAME.json, .csv and .svg (docs/bench.md).\n"
    "  --out DIR     output folder (default: the config's bench.output.dir, else ravel-bench-results)\n"
    "  --reps N      timed repetitions per row (overrides bench.repetitions and each workload's)\n"
    "  --warmup N    untimed runs before them (overrides bench.warmup and each workload's)\n"
    "  --no-peers    skip the config's peer commands\n"
    "  --peers-only  run only the peers (with --no-peers in another run: separate runs)\n"
    "  --quiet       no progress line\n"
    "  --list        list the workloads and exit\n"
    "Exit status: 0 everything ran, 1 something failed (the rest still ran), 2 bad arguments or config.";

int positive(const char* flag, const char* v, int lo) {
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (!*v || *end || n < lo || n > 1000000) {
    std::fprintf(stderr, "ravel-bench: %s expects an integer >= %d, got '%s'\n", flag, lo, v);
    std::exit(2);
  }
  return static_cast<int>(n);
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  if (!out) throw ravel::Error("cannot write " + p.string());
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, out_dir;
  RunOptions opts;
  int warmup = -1, reps = -1;  // --warmup / --reps (unset: the config's)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) std::fprintf(stderr, "ravel-bench: %s needs a value (try --help)\n", a.c_str()), std::exit(2);
      return argv[++i];
    };
    if (a == "--help" || a == "-h") return std::puts(kUsage), 0;
    if (a == "--list") {
      for (const auto& w : workload_catalog())
        std::printf("%-12s %s\n%-12s size: [%s], default sizes:%s%s\n", w.name.c_str(), w.description.c_str(), "",
                    w.size_meaning.c_str(), [&] { std::string s; for (auto& z : w.default_sizes) s += " " + size_str(z); return s; }().c_str(),
                    w.unavailable.empty() ? "" : ("\n             " + w.unavailable).c_str());
      return 0;
    }
    if (a == "--out") {
      // "--out --quiet" (a forgotten folder) must not write results into a folder named "--quiet".
      out_dir = value();
      if (out_dir.empty() || out_dir[0] == '-')
        return std::fprintf(stderr, "ravel-bench: --out needs a folder, got '%s' (try --help)\n", out_dir.c_str()), 2;
    }
    else if (a == "--reps") reps = positive("--reps", value(), 1);
    else if (a == "--warmup") warmup = positive("--warmup", value(), 0);
    else if (a == "--no-peers") opts.peers = false;
    else if (a == "--peers-only") opts.ravel = false;
    else if (a == "--quiet") opts.progress = false;
    else if (!a.empty() && a[0] == '-') return std::fprintf(stderr, "ravel-bench: unknown option '%s' (try --help)\n", a.c_str()), 2;
    else if (config_path.empty()) config_path = a;
    else return std::fprintf(stderr, "ravel-bench: one config file expected, got '%s' and '%s'\n", config_path.c_str(), a.c_str()), 2;
  }
  if (config_path.empty()) return std::fprintf(stderr, "%s\n", kUsage), 2;
  std::error_code ec;
  opts.bin_dir = fs::read_symlink("/proc/self/exe", ec).parent_path().string();

  BenchConfig cfg;
  try {
    cfg = load_bench_config(config_path);
    // The same file configures the runtime (plugins, placement, fusion limits, logging).
    ravel::RuntimeOptions ro;
    ro.config_path = config_path;
    ravel::Runtime::reset(ro);
  } catch (const ravel::Error& e) {
    std::fprintf(stderr, "ravel-bench: %s\n", e.what());
    return 2;
  }
  override_counts(cfg, warmup, reps);
  RunResult result = run_bench(cfg, opts);
  print_table(std::cout, cfg, result);

  fs::path dir = out_dir.empty() ? fs::path(cfg.output_dir) : fs::path(out_dir);
  try {
    fs::create_directories(dir);
    write_file(dir / (cfg.output_name + ".json"), results_json(cfg, result));
    write_file(dir / (cfg.output_name + ".csv"), results_csv(result));
    write_file(dir / (cfg.output_name + ".svg"), results_svg(cfg, result));
    std::cout << "wrote " << (dir / cfg.output_name).string() << ".{json,csv,svg}\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ravel-bench: %s\n", e.what());
    return 1;
  }
  return result.failures ? 1 : 0;
}
