// Isolated runs: each case group runs in a child process, so that a plugin that crashes, aborts,
// corrupts its heap (under ASan) or hangs in one case fails *that case*, and the run goes on in
// a fresh process with the rest of the group. The parent never loads the plugin: device
// runtimes (CUDA, Level Zero) do not survive fork(), and a parent with a broken plugin in its
// address space could not be trusted to finish the report.
//
// Protocol, one line per message on a pipe from child to parent (fields tab-separated, the
// message with \, tab and newline escaped):
//   I <name> <version> <device name> <abi major> <abi minor>   after a successful set-up
//   S <exit status> <message>                                  set-up failed; the child exits
//   B <case index>                                             a case begins
//   R <case index> <status> <error> <threshold> <message>      its outcome
// A child that dies between B and R crashed in that case.
#include "runner.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace rvl::conformance {
namespace {

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\') o += "\\\\";
    else if (c == '\t') o += "\\t";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}
std::string unescape(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) { o += s[i]; continue; }
    const char n = s[++i];
    o += n == 't' ? '\t' : n == 'n' ? '\n' : n;
  }
  return o;
}
std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> f;
  size_t start = 0;
  for (size_t i = 0; i <= line.size(); ++i)
    if (i == line.size() || line[i] == '\t') f.push_back(line.substr(start, i - start)), start = i + 1;
  return f;
}

void send(FILE* out, const std::string& line) {
  std::fputs(line.c_str(), out);
  std::fputc('\n', out);
  std::fflush(out);  // the parent must see B before a crash
}

// The child: set up, run cases [first, end) of `selected`, exit. Never returns.
[[noreturn]] void child(const RunOptions& opt, const std::vector<const Case*>& selected,
                        size_t first, size_t end, int fd) {
  FILE* out = fdopen(fd, "w");
  if (out == nullptr) _exit(4);
  std::unique_ptr<Plugin> plugin;
  alarm(static_cast<unsigned>(opt.case_timeout_s));  // set-up may hang too
  try {
    const PluginIdentity id = set_up_session(opt.plugin_path, opt.device, plugin);
    send(out, "I\t" + escape(id.name) + "\t" + escape(id.version) + "\t" + escape(id.device_name) +
                  "\t" + std::to_string(id.abi_major) + "\t" + std::to_string(id.abi_minor));
  } catch (const SetupError& e) {
    send(out, "S\t" + std::to_string(e.status) + "\t" + escape(e.what()));
    _exit(3);
  }
  for (size_t i = first; i < end; ++i) {
    send(out, "B\t" + std::to_string(i));
    alarm(static_cast<unsigned>(opt.case_timeout_s));
    const Outcome o = run_case(*selected[i]);
    alarm(0);
    char nums[64];
    std::snprintf(nums, sizeof nums, "%.17g\t%.17g", o.m.error, o.m.threshold);
    send(out, "R\t" + std::to_string(i) + "\t" + o.status + "\t" + nums + "\t" + escape(o.message));
  }
  plugin->api().shutdown();
  std::fclose(out);
  _exit(0);  // no static destructors: the plugin's library state is the child's to drop
}

std::string describe_death(int status, int timeout_s) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGALRM)
      return "the case did not finish within " + std::to_string(timeout_s) + " s (killed)";
    return std::string("the plugin crashed: killed by signal ") + std::to_string(sig) + " (" +
           strsignal(sig) + ")";
  }
  if (WIFEXITED(status))
    return "the plugin ended the process with exit status " + std::to_string(WEXITSTATUS(status));
  return "the process ended abnormally";
}

}  // namespace

int run_isolated(const RunOptions& opt) {
  const std::vector<const Case*> selected = select_cases(opt);
  Report report(opt);
  PluginIdentity id;
  bool announced = false;
  size_t next = 0;
  while (next < selected.size()) {
    // The rest of this group runs in one child.
    size_t end = next;
    while (end < selected.size() && selected[end]->group == selected[next]->group) ++end;
    int fds[2];
    if (pipe(fds) != 0) {
      std::perror("ravel-conformance: pipe");
      return 2;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("ravel-conformance: fork");
      return 2;
    }
    if (pid == 0) {
      close(fds[0]);
      child(opt, selected, next, end, fds[1]);
    }
    close(fds[1]);
    FILE* in = fdopen(fds[0], "r");
    long begun = -1;  // index of a case that began and has no outcome yet
    size_t done_until = next;
    char* buf = nullptr;
    size_t cap = 0;
    ssize_t len;
    int setup_status = 0;
    std::string setup_message;
    while ((len = getline(&buf, &cap, in)) > 0) {
      std::string line(buf, static_cast<size_t>(len));
      if (!line.empty() && line.back() == '\n') line.pop_back();
      const std::vector<std::string> f = split_tabs(line);
      if (f[0] == "I" && f.size() >= 6) {
        id = {unescape(f[1]), unescape(f[2]), unescape(f[3]),
              static_cast<uint32_t>(std::stoul(f[4])), static_cast<uint32_t>(std::stoul(f[5]))};
        if (!announced)
          std::printf("ravel-conformance: %s %s (ABI %u.%u), device %d: %s (each case group in its own process)\n",
                      id.name.c_str(), id.version.c_str(), id.abi_major, id.abi_minor, opt.device,
                      id.device_name.c_str());
        announced = true;
      } else if (f[0] == "S" && f.size() >= 3) {
        setup_status = std::stoi(f[1]);
        setup_message = unescape(f[2]);
      } else if (f[0] == "B" && f.size() >= 2) {
        begun = std::stol(f[1]);
      } else if (f[0] == "R" && f.size() >= 6) {
        Outcome o;
        const size_t i = std::stoul(f[1]);
        o.c = selected.at(i);
        o.status = f[2];
        o.m.error = std::stod(f[3]);
        o.m.threshold = std::stod(f[4]);
        o.message = unescape(f[5]);
        report.add(std::move(o));
        begun = -1;
        done_until = i + 1;
      }
    }
    std::free(buf);
    std::fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    if (setup_status != 0) {
      std::fprintf(stderr, "ravel-conformance: %s\n", setup_message.c_str());
      if (setup_status == 1) std::printf("0 passed, 1 failed\n");
      return setup_status;
    }
    const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (begun >= 0) {
      // Died inside a case: that case fails; the group goes on after it in a new child.
      Outcome o;
      o.c = selected.at(static_cast<size_t>(begun));
      o.status = "failed";
      o.message = describe_death(status, opt.case_timeout_s);
      report.add(std::move(o));
      next = static_cast<size_t>(begun) + 1;
    } else if (!clean && done_until < end) {
      // Died outside any case (before the first): report it against the next case.
      Outcome o;
      o.c = selected.at(done_until);
      o.status = "failed";
      o.message = describe_death(status, opt.case_timeout_s) + " before the case began";
      report.add(std::move(o));
      next = done_until + 1;
    } else {
      if (!clean)
        std::printf("  warning: after the group's last case, %s (during shutdown)\n",
                    describe_death(status, opt.case_timeout_s).c_str());
      next = end;
    }
  }
  return report.finish(id) > 0 ? 1 : 0;
}

}  // namespace rvl::conformance
