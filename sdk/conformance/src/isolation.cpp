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

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <poll.h>
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

namespace {

// One piece of the run: cases [next, end) of one group, in one child process at a time. When the
// child dies inside a case, that case fails and the piece goes on from the case after it in a
// new child. Pieces are independent, so up to opt.jobs of them run at once; their outcomes are
// handed to the report in case order, so the output does not depend on the number of jobs.
struct Piece {
  size_t next = 0, end = 0;
  pid_t pid = -1;
  int fd = -1;
  std::string pending;  // a partial line read from the pipe
  long begun = -1;      // index of a case that began and has no outcome yet
  size_t done_until = 0;
  int setup_status = 0;
  std::string setup_message;
  std::vector<Outcome> outcomes;
  bool finished = false;
};

// Cuts the selection into pieces: whole groups, the large ones split so that jobs balance.
std::vector<Piece> cut_pieces(const std::vector<const Case*>& selected, int jobs) {
  const size_t max_piece = jobs > 1 ? 64 : selected.size();
  std::vector<Piece> pieces;
  for (size_t next = 0; next < selected.size();) {
    size_t end = next;
    while (end < selected.size() && end - next < max_piece &&
           selected[end]->group == selected[next]->group)
      ++end;
    Piece p;
    p.next = p.done_until = next;
    p.end = end;
    pieces.push_back(std::move(p));
    next = end;
  }
  return pieces;
}

bool start_child(const RunOptions& opt, const std::vector<const Case*>& selected, Piece& p) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("ravel-conformance: pipe");
    return false;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("ravel-conformance: fork");
    return false;
  }
  if (pid == 0) {
    close(fds[0]);
    child(opt, selected, p.next, p.end, fds[1]);
  }
  close(fds[1]);
  p.pid = pid;
  p.fd = fds[0];
  p.begun = -1;
  p.done_until = p.next;
  return true;
}

// Handles one line from a piece's child.
void take_line(const std::string& line, const RunOptions& opt,
               const std::vector<const Case*>& selected, Piece& p, PluginIdentity& id,
               bool& announced) {
  const std::vector<std::string> f = split_tabs(line);
  if (f[0] == "I" && f.size() >= 6) {
    id = {unescape(f[1]), unescape(f[2]), unescape(f[3]),
          static_cast<uint32_t>(std::stoul(f[4])), static_cast<uint32_t>(std::stoul(f[5]))};
    if (!announced)
      std::printf("ravel-conformance: %s %s (ABI %u.%u), device %d: %s (case groups in child "
                  "processes, %d at a time)\n",
                  id.name.c_str(), id.version.c_str(), id.abi_major, id.abi_minor, opt.device,
                  id.device_name.c_str(), opt.jobs);
    announced = true;
  } else if (f[0] == "S" && f.size() >= 3) {
    p.setup_status = std::stoi(f[1]);
    p.setup_message = unescape(f[2]);
  } else if (f[0] == "B" && f.size() >= 2) {
    p.begun = std::stol(f[1]);
  } else if (f[0] == "R" && f.size() >= 6) {
    Outcome o;
    const size_t i = std::stoul(f[1]);
    o.c = selected.at(i);
    o.status = f[2];
    o.m.error = std::stod(f[3]);
    o.m.threshold = std::stod(f[4]);
    o.message = unescape(f[5]);
    p.outcomes.push_back(std::move(o));
    p.begun = -1;
    p.done_until = i + 1;
  }
}

// The piece's child closed its pipe: reap it, record a death, and say where the piece goes on.
void child_ended(const RunOptions& opt, const std::vector<const Case*>& selected, Piece& p) {
  close(p.fd);
  p.fd = -1;
  int status = 0;
  waitpid(p.pid, &status, 0);
  p.pid = -1;
  if (p.setup_status != 0) return;
  const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (p.begun >= 0) {  // died inside a case: it fails; the piece goes on after it
    Outcome o;
    o.c = selected.at(static_cast<size_t>(p.begun));
    o.status = "failed";
    o.message = describe_death(status, opt.case_timeout_s);
    p.outcomes.push_back(std::move(o));
    p.next = static_cast<size_t>(p.begun) + 1;
  } else if (!clean && p.done_until < p.end) {  // died before its next case began
    Outcome o;
    o.c = selected.at(p.done_until);
    o.status = "failed";
    o.message = describe_death(status, opt.case_timeout_s) + " before the case began";
    p.outcomes.push_back(std::move(o));
    p.next = p.done_until + 1;
  } else {
    if (!clean) {
      Outcome note;  // not a case: printed when the piece is reported
      note.message = "after the group's last case, " + describe_death(status, opt.case_timeout_s) +
                     " (during shutdown)";
      p.outcomes.push_back(std::move(note));
    }
    p.next = p.end;
  }
  p.finished = p.next >= p.end;
}

}  // namespace

int run_isolated(const RunOptions& opt) {
  const std::vector<const Case*> selected = select_cases(opt);
  std::vector<Piece> pieces = cut_pieces(selected, opt.jobs);
  Report report(opt);
  PluginIdentity id;
  bool announced = false;
  size_t reported = 0;  // pieces handed to the report, in order
  size_t to_start = 0;  // pieces not started yet begin here
  auto kill_all = [&] {
    for (Piece& p : pieces) {
      if (p.pid <= 0) continue;
      kill(p.pid, SIGKILL);
      waitpid(p.pid, nullptr, 0);
      close(p.fd);
      p.pid = -1;
    }
  };
  std::vector<char> buf(1 << 16);
  while (reported < pieces.size()) {
    // Keep opt.jobs children running: restarts of interrupted pieces first, then new pieces.
    int running = 0;
    for (const Piece& p : pieces) running += p.pid > 0;
    for (size_t i = 0; i < to_start && running < opt.jobs; ++i) {
      Piece& p = pieces[i];
      if (p.finished || p.pid > 0) continue;
      if (!start_child(opt, selected, p)) return kill_all(), 2;
      ++running;
    }
    while (running < opt.jobs && to_start < pieces.size()) {
      if (!start_child(opt, selected, pieces[to_start++])) return kill_all(), 2;
      ++running;
    }
    std::vector<pollfd> fds;
    std::vector<Piece*> owners;
    for (Piece& p : pieces)
      if (p.pid > 0) fds.push_back({p.fd, POLLIN, 0}), owners.push_back(&p);
    if (!fds.empty() && poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      std::perror("ravel-conformance: poll");
      return kill_all(), 2;
    }
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Piece& p = *owners[k];
      const ssize_t n = read(p.fd, buf.data(), buf.size());
      if (n > 0) {
        p.pending.append(buf.data(), static_cast<size_t>(n));
        for (size_t nl; (nl = p.pending.find('\n')) != std::string::npos;) {
          take_line(p.pending.substr(0, nl), opt, selected, p, id, announced);
          p.pending.erase(0, nl + 1);
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      child_ended(opt, selected, p);
      if (p.setup_status != 0) {
        kill_all();
        std::fprintf(stderr, "ravel-conformance: %s\n", p.setup_message.c_str());
        if (p.setup_status == 1) std::printf("0 passed, 1 failed\n");
        return p.setup_status;
      }
    }
    for (; reported < pieces.size() && pieces[reported].finished; ++reported)
      for (Outcome& o : pieces[reported].outcomes) {
        if (o.c == nullptr) std::printf("  warning: %s\n", o.message.c_str());
        else report.add(std::move(o));
      }
  }
  return report.finish(id) > 0 ? 1 : 0;
}

}  // namespace rvl::conformance
