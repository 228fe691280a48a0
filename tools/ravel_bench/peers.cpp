// Running a peer (docs/bench.md, "Peers"): a program that times one workload at one size and
// prints one JSON object per result line. A peer that is not installed is "unavailable", which
// is not a failure: a run on a bare machine still gives Ravel's rows.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <thread>
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

std::string cap(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

// A result line's fields, checked one by one into `row` (true), or false with `bad` naming the
// field, what it held and what was expected; false with `bad` empty for a well-formed line about
// another workload or size. Only the fields docs/bench.md lists are read; others are ignored.
bool parse_result_line(const nlohmann::json& j, Row& row, std::string& bad) {
  auto fail = [&](const char* field, const std::string& expected) {
    bad = std::string("field \"") + field + "\" is " + (j.contains(field) ? cap(j[field].dump(), 80) : "missing") +
          ", expected " + expected;
    return false;
  };
  if (!j.contains("workload") || !j["workload"].is_string()) return fail("workload", "the workload's name as a string");
  if (!j.contains("size") || !j["size"].is_array() || j["size"].empty() || j["size"].size() > 8)
    return fail("size", "an array of 1 to 8 non-negative integers");
  Size size;
  for (const auto& v : j["size"]) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return fail("size", "an array of 1 to 8 non-negative integers");
    size.push_back(v.get<int64_t>());
  }
  if (j["workload"].get<std::string>() != row.workload || size_str(size) != row.size) return false;
  double ms[4] = {0, 0, 0, 0};
  const char* names[4] = {"median_ms", "min_ms", "max_ms", "mean_ms"};
  for (int k = 0; k < 4; ++k) {
    if (k == 3 && !j.contains("mean_ms")) {
      ms[3] = ms[0];  // optional: the median stands in
      continue;
    }
    const char* f = names[k];
    if (!j.contains(f) || !j[f].is_number() || !std::isfinite(j[f].get<double>()) || j[f].get<double>() < 0)
      return fail(f, "a finite number of milliseconds >= 0");
    ms[k] = j[f].get<double>();
  }
  if (!(ms[1] <= ms[0] && ms[0] <= ms[2])) return fail("median_ms", "a time between min_ms and max_ms");
  if (!j.contains("reps") || !j["reps"].is_number_integer() || j["reps"].get<int64_t>() < 1 ||
      j["reps"].get<int64_t>() > 1000000000)
    return fail("reps", "a positive integer (the repetitions timed)");
  if (j.contains("checked") && !j["checked"].is_boolean()) return fail("checked", "true or false");
  if (j.contains("threads") && !j["threads"].is_string()) return fail("threads", "a string (the threads it used)");
  row.median_ms = ms[0], row.min_ms = ms[1], row.max_ms = ms[2], row.mean_ms = ms[3];
  row.reps = static_cast<int>(j["reps"].get<int64_t>());
  row.checked = j.value("checked", false) ? "yes" : "no";
  if (j.contains("threads")) row.threads = cap(j["threads"].get<std::string>(), 100);
  return true;
}

struct PeerOutput {
  bool started = false;
  std::string out;  // stdout, at most kOutputCap bytes
  int code = 0;     // exit status, or 128 + signal
};

// Runs `cmd` under /bin/sh in a session of its own and reads its stdout until the shell (the
// peer, after its execs) has exited, not until EOF: a background or setsid child of the peer
// may hold the pipe open forever. Once it exited, what is already in the pipe is read, and
// whatever it left in its session is killed. A deadline (the time limit plus 10 s, for a
// machine without coreutils' timeout) kills the session too.
PeerOutput run_command(const std::string& cmd, int timeout_s) {
  PeerOutput r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return r;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]), close(fds[1]);
    return r;
  }
  if (pid == 0) {
    setsid();  // its own session and process group (pgid = pid): killed as one below
    dup2(fds[1], STDOUT_FILENO);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  r.started = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s + 10);
  std::array<char, 4096> buf;
  auto drain = [&](int wait_ms) {  // reads what arrives within wait_ms; false at EOF
    pollfd p{fds[0], POLLIN, 0};
    while (poll(&p, 1, wait_ms) > 0) {
      const ssize_t got = read(fds[0], buf.data(), buf.size());
      if (got <= 0) return false;
      if (r.out.size() < kOutputCap) r.out.append(buf.data(), std::min(static_cast<size_t>(got), kOutputCap - r.out.size()));
      wait_ms = 0;
    }
    return true;
  };
  bool exited = false, open = true;
  while (!exited) {
    if (open) open = drain(100);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // WNOWAIT: seen, not reaped, so the pid (and the session's id) cannot be reused before the
    // kill below.
    siginfo_t info{};
    exited = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
    if (!exited && std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      exited = true;
    }
  }
  if (open) drain(50);  // what the peer wrote just before it exited
  kill(-pid, SIGKILL);  // background children left in its session (a setsid one has left it)
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

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
  const PeerOutput result = run_command(cmd, config.peer_timeout_s);
  if (!result.started) {
    row.status = "failed";
    row.message = "cannot start peer: " + cmd;
    return row;
  }
  const std::string& out = result.out;
  int code = result.code;
  std::string err;
  {
    // Only its last 400 bytes are shown, so only they are read: a peer that floods stderr until
    // its time limit must not make ravel-bench load gigabytes.
    std::ifstream in(err_file, std::ios::binary | std::ios::ate);
    const std::streamoff length = in ? static_cast<std::streamoff>(in.tellg()) : 0;
    const std::streamoff keep = std::min<std::streamoff>(length, 400);
    err.resize(static_cast<size_t>(keep));
    in.seekg(length - keep);
    in.read(err.data(), keep);
    if (length > keep) err = "..." + err;
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
    // Every field is checked for its type and range before it is used: a wrong type threw
    // nlohmann's type_error out of the whole run, a negative or NaN time went into the report.
    std::string bad;
    Row parsed = row;
    if (!parse_result_line(j, parsed, bad)) {
      if (bad.empty()) continue;  // a valid line for another workload or size
      row.status = "failed";
      row.message = "peer printed a malformed result line (" + bad + "): " + cap(line, 300);
      return row;
    }
    row = parsed;
    found = true;
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
