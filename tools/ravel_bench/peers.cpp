// Running a peer (docs/bench.md, "Peers"): a program that times one workload at one size and
// prints one JSON object per result line. A peer that is not installed is "unavailable", which
// is not a failure: a run on a bare machine still gives Ravel's rows.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runner.hpp"
#include "workloads.hpp"

namespace ravel::bench {

namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string substitute(std::string s, const std::string& key, const std::string& value) {
  for (size_t p; (p = s.find(key)) != std::string::npos;) s.replace(p, key.size(), value);
  return s;
}

// Why the program cannot be started ("" when it can): checked up front so that a missing
// interpreter or script reads "peer unavailable", not a cryptic shell error.
std::string missing(const std::vector<std::string>& argv, const std::string& dir) {
  auto exists_here = [&](const std::string& p) { return fs::exists(fs::path(p).is_absolute() ? fs::path(p) : fs::path(dir) / p); };
  const std::string& prog = argv[0];
  if (prog.find('/') != std::string::npos) {
    if (!exists_here(prog)) return prog + " not found";
  } else {
    bool found = false;
    std::stringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
    for (std::string d; !found && std::getline(path, d, ':');) found = !d.empty() && access((fs::path(d) / prog).c_str(), X_OK) == 0;
    if (!found) return prog + " not found on PATH";
  }
  for (size_t i = 1; i < argv.size(); ++i)
    if (argv[i].ends_with(".py") && !exists_here(argv[i])) return argv[i] + " not found";
  return "";
}

// Stdout kept from a peer; the rest is read and dropped (a runaway peer cannot exhaust memory).
constexpr size_t kOutputCap = size_t{1} << 20;

}  // namespace

int peer_thread_count(const BenchConfig& config) {
  if (config.peer_threads > 0) return config.peer_threads;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

Row run_peer(const BenchConfig& config, const PeerSpec& peer, const std::string& workload, const Size& size,
             int warmup, int reps, const std::string& bin_dir) {
  Row row;
  row.workload = workload;
  row.size = size_str(size);
  row.runner = peer.name;
  row.device = row.policy = "-";
  std::vector<std::string> argv;
  for (const auto& a : peer.command)
    argv.push_back(substitute(substitute(a, "{bin}", bin_dir), "{config_dir}", config.config_dir));
  if (std::string why = missing(argv, config.config_dir); !why.empty()) {
    row.status = "unavailable";
    row.message = "peer unavailable: " + why;
    return row;
  }
  argv.insert(argv.end(), {"--workload", workload, "--size", row.size, "--warmup", std::to_string(warmup), "--reps",
                           std::to_string(reps)});
  // stderr goes to a file so that a failing peer's own message can be quoted.
  std::string err_file = (fs::temp_directory_path() / ("ravel-bench-peer-" + std::to_string(getpid()) + ".err")).string();
  // Every peer gets the same threads as Ravel (all cores) and passive waiting: an OpenMP pool
  // that spins between calls would steal the cores from whatever runs next in an interleaved
  // run. Settings the user exported win. The peer reports what it used ("threads").
  const std::string n = std::to_string(peer_thread_count(config));
  std::string env;
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAVEL_BENCH_THREADS"})
    if (!std::getenv(var)) env += std::string(" ") + var + "=" + n;
  if (!std::getenv("OMP_WAIT_POLICY")) env += " OMP_WAIT_POLICY=PASSIVE";
  // A time limit (coreutils timeout: TERM, then KILL 5 s later) so a hung peer cannot stop the run.
  std::string cmd = "cd " + shell_quote(config.config_dir) + " && exec env" + env;
  if (access("/usr/bin/timeout", X_OK) == 0)
    cmd += " /usr/bin/timeout -k 5 " + std::to_string(config.peer_timeout_s);
  for (const auto& a : argv) cmd += " " + shell_quote(a);
  cmd += " 2>" + shell_quote(err_file);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) {
    row.status = "failed";
    row.message = "cannot start peer: " + cmd;
    return row;
  }
  std::string out;
  std::array<char, 4096> buf;
  for (size_t got; (got = fread(buf.data(), 1, buf.size(), pipe)) > 0;)
    if (out.size() < kOutputCap) out.append(buf.data(), std::min(got, kOutputCap - out.size()));
  int status = pclose(pipe);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  std::string err;
  {
    // Only its last 400 bytes are shown, so only they are read: a peer that floods stderr until
    // its time limit must not make ravel-bench load gigabytes.
    std::ifstream in(err_file, std::ios::binary | std::ios::ate);
    const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : 0;
    const std::streamoff keep = std::min<std::streamoff>(size, 400);
    err.resize(static_cast<size_t>(keep));
    in.seekg(size - keep);
    in.read(err.data(), keep);
    if (size > keep) err = "..." + err;
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  }
  std::remove(err_file.c_str());
  if (code == 124 || code == 128 + 9) {
    row.status = "failed";
    row.message = "peer stopped after its time limit (bench.peer_timeout_s = " + std::to_string(config.peer_timeout_s) +
                  " s)" + (err.empty() ? "" : ": " + err);
    return row;
  }
  if (code == 126 || code == 127) {
    row.status = "unavailable";
    row.message = "peer unavailable: " + (err.empty() ? "exit status " + std::to_string(code) : err);
    return row;
  }
  std::stringstream lines(out);
  bool found = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;  // peers may print other lines; only JSON counts
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    if (j.contains("unavailable")) {
      row.status = "unavailable";
      row.message = "peer unavailable: " + (j["unavailable"].is_string() ? j["unavailable"].get<std::string>() : j.dump());
      return row;
    }
    if (j.value("workload", "") != workload || !j.contains("size") || !j["size"].is_array() ||
        j["size"].get<std::vector<int64_t>>() != size)
      continue;
    try {
      row.median_ms = j.at("median_ms").get<double>();
      row.min_ms = j.at("min_ms").get<double>();
      row.max_ms = j.at("max_ms").get<double>();
      row.mean_ms = j.value("mean_ms", row.median_ms);
      row.reps = j.at("reps").get<int>();
      row.checked = j.value("checked", false) ? "yes" : "no";
      if (j.contains("threads") && j["threads"].is_string()) row.threads = j["threads"].get<std::string>();
      found = true;
    } catch (const nlohmann::json::exception& e) {
      row.status = "failed";
      row.message = "peer printed a malformed result line (" + std::string(e.what()) + "): " + line;
      return row;
    }
  }
  if (code != 0) {
    row.status = "failed";
    row.message = "peer exited with status " + std::to_string(code) + (err.empty() ? "" : ": " + err);
  } else if (!found) {
    row.status = "failed";
    row.message = "peer printed no result for " + workload + " " + row.size + (err.empty() ? "" : ": " + err);
  }
  return row;
}

}  // namespace ravel::bench
