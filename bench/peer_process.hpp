// A peer benchmark running in a child process (a python script), driven line by line so that its
// repetitions interleave with ours: it prints "ready <info>", then answers each "run" with
// "ms <milliseconds>" measured inside the peer. Header-only; POSIX.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// The python interpreter for peers: $RAVEL_PEER_PYTHON, else /usr/bin/python3 (Debian's, where
// python3-torch installs), else python3 from PATH.
inline std::string peer_python() {
  if (const char* p = std::getenv("RAVEL_PEER_PYTHON"); p && *p) return p;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

class PeerProcess {
 public:
  PeerProcess() = default;
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;
  ~PeerProcess() { stop(); }

  // Starts `program args...` and waits for its "ready" line.
  void start(const std::string& program, const std::vector<std::string>& args) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return fail("pipe failed");
    std::signal(SIGPIPE, SIG_IGN);  // a peer that dies must not kill the benchmark
    pid_ = fork();
    if (pid_ < 0) return fail("fork failed");
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      std::vector<char*> argv{const_cast<char*>(program.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_ = fdopen(to_child[1], "w");
    out_ = fdopen(from_child[0], "r");
    std::string line = read_line();
    if (line.rfind("ready", 0) != 0) return fail("no \"ready\" from " + program + " (is torch installed for it?)");
    info_ = line.size() > 6 ? line.substr(6) : "";
    ok_ = true;
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& info() const { return info_; }

  // One timed repetition inside the peer; seconds, or -1 if the peer failed.
  double run() {
    if (!ok_) return -1;
    std::fputs("run\n", in_);
    std::fflush(in_);
    std::string line = read_line();
    if (line.rfind("ms ", 0) != 0) {
      fail("peer stopped answering");
      return -1;
    }
    return std::atof(line.c_str() + 3) * 1e-3;
  }

  void stop() {
    if (in_) std::fputs("quit\n", in_), std::fclose(in_), in_ = nullptr;
    if (out_) std::fclose(out_), out_ = nullptr;
    if (pid_ > 0) waitpid(pid_, nullptr, 0), pid_ = -1;
    ok_ = false;
  }

 private:
  std::string read_line() {
    std::string s;
    int ch;
    while (out_ && (ch = std::fgetc(out_)) != EOF && ch != '\n') s.push_back(static_cast<char>(ch));
    return s;
  }
  void fail(const std::string& why) {
    error_ = why;
    stop();
  }

  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
  bool ok_ = false;
  std::string error_, info_;
};
