// ravel-bench: each workload's result is right under every fusion policy (so no timing is of a
// wrong answer); a tiny config run through the executable writes JSON, CSV and SVG that parse and
// hold the expected rows; a missing device or failing workload is reported with a non-zero exit
// while the rest still runs; a missing peer is "unavailable" and not a failure.
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench_config.hpp"
#include "ravel/ravel.hpp"

#include "test_support.hpp"
#include "runner.hpp"
#include "workloads.hpp"

namespace fs = std::filesystem;
using namespace ravel::bench;
using nlohmann::json;

namespace {
bool has(const std::string& s, const std::string& k) { return s.find(k) != std::string::npos; }
std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
fs::path scratch(const std::string& name) {
  auto d = scratch_dir() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
// Runs ravel-bench; its exit status.
int run_exe(const fs::path& cfg, const fs::path& out) {
  fs::create_directories(out);
  std::string cmd = std::string(RAVEL_BENCH_EXE) + " " + cfg.string() + " --out " + out.string() + " --quiet > " +
                    (out / "stdout.txt").string() + " 2>&1";
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
const char* kTinyWorkloads = R"([{"name": "matmul", "sizes": [[5, 7, 3]]}, {"name": "elementwise", "sizes": [[100]]},
    {"name": "softmax", "sizes": [[3, 5]]}, {"name": "sum_axis0", "sizes": [[3, 5]]}, {"name": "sum_axis1", "sizes": [[3, 5]]},
    {"name": "transpose", "sizes": [[3, 5]]}, {"name": "mlp", "sizes": [[2]]}, "makemore"])";
}  // namespace

BOOST_AUTO_TEST_CASE(every_workload_matches_the_naive_computation_under_every_policy) {
  ravel::Runtime::reset({.config_path = {}, .extra_paths = {}, .use_environment = false, .use_default_paths = true, .load_plugins = true, .excluded_plugins = {}});
  for (const auto& w : workload_catalog()) {
    if (!w.unavailable.empty() || w.name == "all_reduce") continue;  // all_reduce: below, on several devices
    for (auto p : {ravel::FusionPolicy::None, ravel::FusionPolicy::Elementwise, ravel::FusionPolicy::Reduce, ravel::FusionPolicy::Full}) {
      ravel::set_fusion_options({.policy = p});
      // The half rows (matmul_bf16, elementwise_f16, ...) take their f32 workload's size.
      const std::string base = w.name.substr(0, w.name.find("_bf16") != std::string::npos ? w.name.find("_bf16")
                                                                                         : w.name.find("_f16"));
      Size s = base == "matmul" ? Size{9, 17, 5} : base == "mlp" ? Size{3} : (base == "elementwise" || base == "muladd") ? Size{1000}
             : base == "conv2d" ? Size{2, 3, 4, 6, 3} : base == "max_pool2d" ? Size{2, 3, 8} : base == "cnn_step" ? Size{4}
             : Size{7, 13};
      BOOST_TEST_CONTEXT(w.name << " " << size_str(s) << " under " << p) {
        auto inst = make_instance(w.name, s, ravel::Device("tbb_cpu", 0));
        BOOST_TEST(inst->check() == "");
        inst->run();
        BOOST_TEST(inst->check() == "");  // after a run: a training step is replayed (makemore's Jit)
      }
    }
  }
  ravel::set_fusion_options({});
}

// all_reduce runs over every device of the row's plugin; with one device it is unavailable (a
// row reported as such, not a failure), never a run of nothing.
BOOST_AUTO_TEST_CASE(all_reduce_reduces_over_every_device_and_is_unavailable_on_one) {
  // The device count is fixed when the plugin initialises: each count is its own ravel-bench run.
  const fs::path dir = scratch("all_reduce");
  std::ofstream(dir / "ar.json") << R"({"placement": {"devices": ["tbb_cpu:0"]}, "bench": {"workloads": )"
                                 << R"([{"name": "all_reduce", "sizes": [[1001]]}], "warmup": 0, "repetitions": 2}})";
  for (const char* n : {"1", "2", "3"}) {
    BOOST_TEST_CONTEXT("RAVEL_TBB_DEVICES=" << n) {
      setenv("RAVEL_TBB_DEVICES", n, 1);
      const fs::path out = dir / n;
      const int status = run_exe(dir / "ar.json", out);
      unsetenv("RAVEL_TBB_DEVICES");
      BOOST_TEST(status == 0, slurp(out / "stdout.txt"));  // unavailable is not a failure
      const json rows = json::parse(slurp(out / "results.json"))["results"];
      BOOST_TEST_REQUIRE(rows.size() == 1u);
      if (std::string(n) == "1") {
        BOOST_TEST(rows[0]["status"] == "unavailable");
        BOOST_TEST(has(rows[0]["message"].get<std::string>(), "needs 2 or more devices of tbb_cpu, this process has 1"));
      } else {
        BOOST_TEST(rows[0]["status"] == "ok", rows[0]["message"].get<std::string>());
        BOOST_TEST(rows[0]["checked"] == "yes");  // the sum on every device against the host's
        BOOST_TEST(rows[0]["bytes"].get<double>() == 4 * 1001.0);
      }
    }
  }
}

#ifdef RAVEL_BENCH_DATA_PARALLEL_EXE
// The data-parallel peer (configs/bench/data-parallel.json) speaks the protocol: a result line
// per workload it runs, "unavailable" for what it does not.
BOOST_AUTO_TEST_CASE(the_data_parallel_peer_speaks_the_protocol) {
  const fs::path dir = scratch("data_parallel_peer");
  BenchConfig c;
  c.config_dir = dir.string();
  c.peer_timeout_s = 120;
  const std::string exe = RAVEL_BENCH_DATA_PARALLEL_EXE;
  Row r = run_peer(c, PeerSpec{"2 devices", {exe, "--peer", "2"}}, "all_reduce", {1000}, 0, 2, dir.string());
  BOOST_TEST(r.status == "ok", r.message);
  BOOST_TEST(r.reps == 2);
  r = run_peer(c, PeerSpec{"2 devices", {exe, "--peer", "2"}}, "makemore", {8}, 0, 2, dir.string());
  BOOST_TEST(r.status == "ok", r.message);
  r = run_peer(c, PeerSpec{"memcpy", {exe, "--peer", "memcpy"}}, "all_reduce", {1000}, 0, 3, dir.string());
  BOOST_TEST(r.status == "ok", r.message);
  r = run_peer(c, PeerSpec{"memcpy", {exe, "--peer", "memcpy"}}, "mlp", {4}, 0, 1, dir.string());
  BOOST_TEST(r.status == "unavailable", r.message);
  r = run_peer(c, PeerSpec{"1 device", {exe, "--peer", "1"}}, "all_reduce", {1000}, 0, 1, dir.string());
  BOOST_TEST(r.status == "unavailable", r.message);
}
#endif

BOOST_AUTO_TEST_CASE(tiny_config_writes_json_csv_and_svg_with_the_expected_rows) {
  fs::path dir = scratch("ok");
  // A fake peer (a shell script, so the test needs no NumPy): answers matmul, unavailable otherwise.
  std::ofstream(dir / "peer.sh") << "#!/bin/sh\n"
                                    "if [ \"$2\" = matmul ]; then echo 'some chatter'; echo '{\"workload\": \"matmul\", "
                                    "\"size\": [5, 7, 3], \"median_ms\": 2.0, \"min_ms\": 1.0, \"max_ms\": 3.0, \"reps\": 1}';\n"
                                    "else echo '{\"unavailable\": \"fake peer: matmul only\"}'; fi\n";
  fs::permissions(dir / "peer.sh", fs::perms::owner_all);
  std::ofstream(dir / "tiny.json") << R"({"placement": {"devices": ["tbb_cpu"]}, "bench": {"workloads": )" << kTinyWorkloads
                                   << R"(, "policies": ["none", "reduce"], "warmup": 0, "repetitions": 1,
      "peers": [{"name": "fake", "command": ["./peer.sh"]}, {"name": "gone", "command": ["./no-such-peer"]}],
      "baseline": {"runner": "fake"}, "output": {"name": "tiny"}}})";
  BOOST_TEST(run_exe(dir / "tiny.json", dir / "out") == 0, slurp(dir / "out" / "stdout.txt"));
  std::string table = slurp(dir / "out" / "stdout.txt");
  BOOST_TEST(has(table, "median ms"), table);
  BOOST_TEST(has(table, "peer unavailable: ./no-such-peer not found"), table);

  json j = json::parse(slurp(dir / "out" / "tiny.json"));
  BOOST_TEST(j["failures"].get<int>() == 0);
  int ravel_ok = 0, unavailable = 0;
  for (const auto& r : j["results"]) {
    if (r["runner"] == "ravel" && r["status"] == "ok") {
      ++ravel_ok;
      BOOST_TEST(r["checked"] == "yes");
      BOOST_TEST(r["kernels"].get<double>() >= 1);
      BOOST_TEST(r["median_ms"].get<double>() > 0);
    }
    unavailable += r["status"] == "unavailable";
    if (r["runner"] == "fake" && r["workload"] == "matmul") {
      BOOST_TEST(r["status"] == "ok");
      BOOST_TEST(r["is_baseline"] == true);
      BOOST_TEST(r["median_ms"].get<double>() == 2.0);
    }
    if (r["runner"] == "ravel" && r["workload"] == "matmul") BOOST_TEST(r["ratio_to_baseline"].get<double>() > 0);
  }
  BOOST_TEST(ravel_ok == 8 * 2);  // 8 workloads x 2 policies on one device
  BOOST_TEST(unavailable == 8 + 7);  // "gone" for each workload; "fake" for all but matmul

  std::stringstream csv(slurp(dir / "out" / "tiny.csv"));
  std::string header, line;
  std::getline(csv, header);
  BOOST_TEST(has(header, "workload,size,runner,device,policy,status"));
  int lines = 0, matmul_none = 0;
  while (std::getline(csv, line)) ++lines, matmul_none += line.rfind("matmul,5x7x3,ravel,tbb_cpu:0,none,ok,1,", 0) == 0;
  BOOST_TEST(lines == int(j["results"].size()));
  BOOST_TEST(matmul_none == 1);

  std::string svg = slurp(dir / "out" / "tiny.svg");
  BOOST_TEST(svg.rfind("<svg", 0) == 0);
  BOOST_TEST(has(svg, "</svg>"));
  BOOST_TEST(has(svg, "matmul 5x7x3"));
  BOOST_TEST(has(svg, "ravel tbb_cpu:0 reduce"));
}

// A workload's own warmup/repetitions override the bench's, for Ravel's rows and the peers' (a
// fake peer reports the counts it was given); --reps and --warmup override both.
BOOST_AUTO_TEST_CASE(workloads_may_set_their_own_repetitions) {
  fs::path dir = scratch("reps");
  // argv: --workload W --size AxB --warmup N --reps R; "reps" echoes R.
  std::ofstream(dir / "peer.sh") << R"(#!/bin/sh
echo "{\"workload\": \"$2\", \"size\": [$(echo $4 | tr x ,)], \"median_ms\": 1, \"min_ms\": 1, \"max_ms\": 1, \"reps\": $8}"
)";
  fs::permissions(dir / "peer.sh", fs::perms::owner_all);
  std::ofstream(dir / "reps.json") << R"({"placement": {"devices": ["tbb_cpu"]}, "bench": {
      "workloads": [{"name": "elementwise", "sizes": [[100]], "warmup": 2, "repetitions": 7},
                    {"name": "sum_axis1", "sizes": [[3, 5]]}],
      "policies": ["full"], "warmup": 0, "repetitions": 3, "check": false,
      "peers": [{"name": "echo", "command": ["./peer.sh"]}], "output": {"name": "r"}}})";
  auto reps_of = [&](const fs::path& results) {
    std::map<std::string, int> reps;  // "runner workload" -> repetitions reported
    const json j = json::parse(slurp(results));
    for (const auto& r : j["results"])
      reps[r["runner"].get<std::string>() + " " + r["workload"].get<std::string>()] = r["reps"].get<int>();
    return reps;
  };
  BOOST_TEST_REQUIRE(run_exe(dir / "reps.json", dir / "a") == 0, slurp(dir / "a" / "stdout.txt"));
  auto reps = reps_of(dir / "a" / "r.json");
  BOOST_TEST(reps["ravel elementwise"] == 7);
  BOOST_TEST(reps["echo elementwise"] == 7);
  BOOST_TEST(reps["ravel sum_axis1"] == 3);
  BOOST_TEST(reps["echo sum_axis1"] == 3);
  BOOST_TEST(has(slurp(dir / "a" / "stdout.txt"), "0 warm-up + 3 timed repetitions per row; elementwise: 2 + 7"));

  fs::create_directories(dir / "b");
  const std::string cmd = std::string(RAVEL_BENCH_EXE) + " " + (dir / "reps.json").string() + " --reps 2 --out " +
                          (dir / "b").string() + " --quiet > " + (dir / "b" / "stdout.txt").string() + " 2>&1";
  BOOST_TEST_REQUIRE(std::system(cmd.c_str()) == 0, slurp(dir / "b" / "stdout.txt"));
  reps = reps_of(dir / "b" / "r.json");
  BOOST_TEST(reps["ravel elementwise"] == 2);
  BOOST_TEST(reps["echo elementwise"] == 2);
  BOOST_TEST(reps["ravel sum_axis1"] == 2);
}

BOOST_AUTO_TEST_CASE(missing_device_and_failing_workload_fail_the_run_but_the_rest_runs) {
  fs::path dir = scratch("fail");
  // failing:0 allocates buffers but every kernel fails; hip:7 exists on no machine (hip:0 does on
  // the GPU machine).
  std::ofstream(dir / "fail.json") << R"({"plugins": {"search_paths": [")" << KERNEL_FAILS_DIR
                                   << R"("]}, "placement": {"devices": ["tbb_cpu"]}, "bench": {
      "workloads": [{"name": "matmul", "sizes": [[4, 4, 4]]}, {"name": "softmax", "sizes": [[2, 3]]}],
      "devices": ["failing:0", "hip:7", "tbb_cpu:0"], "repetitions": 1, "warmup": 0, "output": {"name": "r"}}})";
  BOOST_TEST(run_exe(dir / "fail.json", dir / "out") == 1);
  std::string table = slurp(dir / "out" / "stdout.txt");
  BOOST_TEST(has(table, "FAILED matmul 4x4x4 ravel hip:7"), table);
  BOOST_TEST(has(table, "available devices:"), table);
  BOOST_TEST(has(table, "FAILED softmax 2x3 ravel failing:0"), table);
  json j = json::parse(slurp(dir / "out" / "r.json"));
  BOOST_TEST(j["failures"].get<int>() == 4);
  int ok = 0;
  for (const auto& r : j["results"]) ok += (r["status"] == "ok" && r["device"] == "tbb_cpu:0") ? 1 : 0;
  BOOST_TEST(ok == 2);

  // A bad config: exit status 2 and the JSON path on stderr.
  std::ofstream(dir / "bad.json") << R"({"bench": {"workloads": ["matmull"]}})";
  BOOST_TEST(run_exe(dir / "bad.json", dir) == 2);
  BOOST_TEST(has(slurp(dir / "stdout.txt"), "$.bench.workloads[0]"));
  BOOST_TEST(has(slurp(dir / "stdout.txt"), "did you mean \"matmul\""));
}

BOOST_AUTO_TEST_CASE(shipped_configs_parse) {
  for (const char* f : {"configs/bench/fusion-policies.json", "configs/bench/cpu-vs-peers.json", "configs/bench/data-parallel.json", "configs/bench/cpu-16core.json", "configs/bench/cpu-scaling.json", "configs/bench/gpu-vs-torch.json", "configs/default.json", "configs/cpu.json"}) {
    fs::path p = fs::path(RAVEL_SOURCE_DIR) / f;
    BOOST_TEST_CONTEXT(f) {
      ravel::RuntimeOptions o;
      o.config_path = p.string();
      o.use_environment = false;
      BOOST_CHECK_NO_THROW(ravel::Runtime tmp(o));
      if (has(f, "bench/")) BOOST_CHECK_NO_THROW(load_bench_config(p.string()));
    }
  }
}

// Hostile peers. Every result line is checked field by field; a bad one fails
// its row with a message naming the field (a wrong type threw nlohmann's type_error out of the
// whole run, a negative time went into the report).
namespace {
Row peer_row(const fs::path& dir, const std::string& script, int timeout_s = 60) {
  std::ofstream(dir / "peer.sh") << "#!/bin/sh\n" << script;
  fs::permissions(dir / "peer.sh", fs::perms::owner_all);
  BenchConfig c;
  c.config_dir = dir.string();
  c.peer_timeout_s = timeout_s;
  return run_peer(c, PeerSpec{"hostile", {"./peer.sh"}}, "matmul", {5, 7, 3}, 0, 1, dir.string());
}
std::string line_with(const std::string& fields) {
  return "echo '{\"workload\": \"matmul\", \"size\": [5, 7, 3], " + fields + "}'\n";
}
bool alive(pid_t pid) {  // a zombie waiting for init to reap it counts as gone
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}
}  // namespace

BOOST_AUTO_TEST_CASE(peer_result_lines_are_validated_field_by_field) {
  const fs::path dir = scratch("hostile_lines");
  const std::string good = R"("median_ms": 2.0, "min_ms": 1.0, "max_ms": 3.0, "reps": 1)";
  struct Case { std::string script, field; };
  const Case cases[] = {
      {"echo '{\"workload\": \"matmul\", \"size\": \"5x7x3\", \"median_ms\": 1}'\n", "field \"size\" is \"5x7x3\""},
      {"echo '{\"workload\": 7, \"size\": [5, 7, 3]}'\n", "field \"workload\" is 7"},
      {"echo '{\"workload\": \"matmul\", \"size\": [5, \"7\", 3]}'\n", "field \"size\""},
      {line_with(R"("median_ms": -2.0, "min_ms": 1.0, "max_ms": 3.0, "reps": 1)"), "field \"median_ms\" is -2.0"},
      {line_with(R"("median_ms": "2", "min_ms": 1.0, "max_ms": 3.0, "reps": 1)"), "field \"median_ms\" is \"2\""},
      {line_with(R"("median_ms": 2.0, "min_ms": 1.0, "max_ms": 3.0, "reps": 0)"), "field \"reps\" is 0"},
      {line_with(R"("median_ms": 2.0, "min_ms": 1.0, "max_ms": 3.0, "reps": 1.5)"), "field \"reps\" is 1.5"},
      {line_with(R"("median_ms": 5.0, "min_ms": 1.0, "max_ms": 3.0, "reps": 1)"), "field \"median_ms\" is 5.0, expected a time between min_ms and max_ms"},
      {line_with(R"("median_ms": 2.0, "min_ms": 1.0, "reps": 1)"), "field \"max_ms\" is missing"},
      {line_with(good + R"(, "mean_ms": -1)"), "field \"mean_ms\" is -1"},
      {line_with(good + R"(, "checked": "yes")"), "field \"checked\" is \"yes\""},
      {line_with(good + R"(, "threads": 4)"), "field \"threads\" is 4"},
  };
  for (const Case& c : cases) {
    Row r = peer_row(dir, c.script);
    BOOST_TEST(r.status == "failed", c.script);
    BOOST_TEST(has(r.message, "malformed result line (" + c.field), r.message);
  }
  Row ok = peer_row(dir, line_with(good + R"(, "checked": true, "threads": "4")"));
  BOOST_TEST(ok.status == "ok", ok.message);
  BOOST_TEST((ok.median_ms == 2.0 && ok.checked == "yes" && ok.threads == "4"));
  // A valid line for another size is not this row's result.
  Row other = peer_row(dir, "echo '{\"workload\": \"matmul\", \"size\": [1, 1, 1], " + good + "}'\n");
  BOOST_TEST(has(other.message, "peer printed no result"), other.message);
}

// A peer that exits but leaves a child holding its stdout: the run stopped at the pipe's EOF,
// which never came. Now it stops when the peer has exited; a child left in the peer's session
// is killed, one that left it (setsid) is only no longer waited for.
BOOST_AUTO_TEST_CASE(a_peer_that_leaves_children_behind_does_not_hang_the_run) {
  const fs::path dir = scratch("hostile_children");
  const std::string result = line_with(R"("median_ms": 2.0, "min_ms": 1.0, "max_ms": 3.0, "reps": 1)");
  const auto t0 = std::chrono::steady_clock::now();
  Row r = peer_row(dir, result + "sleep 300 &\necho $! > bg.pid\n");
  BOOST_TEST(r.status == "ok", r.message);
  Row s = peer_row(dir, result + "setsid sleep 300 &\nsleep 0.2\npgrep -n -f 'sleep 300' > setsid.pid || true\n");
  BOOST_TEST(s.status == "ok", s.message);
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)));
  const pid_t bg = std::stoi("0" + slurp(dir / "bg.pid"));
  BOOST_TEST_REQUIRE(bg > 0);
  for (int i = 0; i < 100 && alive(bg); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  BOOST_TEST(!alive(bg), "the background child " << bg << " of the peer was left running");
  if (const pid_t escaped = std::atoi(slurp(dir / "setsid.pid").c_str()); escaped > 0) kill(escaped, SIGKILL);
}
