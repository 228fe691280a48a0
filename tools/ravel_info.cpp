// ravel-info: every plugin found (path, ABI version, status or why it was skipped) and every
// device with its properties; then the effective configuration and where each placement rule
// resolved to (so a config can be checked before a long run); the communicator plugins found
// and the launcher environment (docs/distributed.md).
//   ravel-info [--config FILE] [--no-isolate] [--examine-seconds S] [--examine-memory-mb M]
//
// Each plugin is first examined in a child process (loaded, probed, initialised, its devices
// listed): one that crashes, aborts or hangs there is reported with the signal and is not loaded
// again; the others are then loaded here for the report. A plugin that crashes inside a host
// application takes the host down (docs/abi.md §13) — the tool that examines plugins must not.
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <iostream>
#include <map>
#include <new>
#include <sstream>
#include <thread>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ravel/backend.h"
#include "ravel/collectives.h"
#include "ravel/distributed.hpp"
#include "ravel/ravel.hpp"

namespace {

// Limits of one plugin's examination (--examine-seconds, --examine-memory-mb): a plugin that
// takes longer to start, or maps more memory, is reported and not loaded. The time is enforced
// by the parent (SIGKILL at the deadline: a plugin may block or ignore SIGALRM), the memory by
// RLIMIT_DATA in the child (heap and private writable mappings; a GPU runtime's address-space
// reservations are PROT_NONE and do not count). Not under a sanitizer, whose shadow memory
// would count.
struct ExamineLimits {
  unsigned seconds = 120;
  uint64_t memory_mb = 16384;
};
constexpr int kOutOfMemoryStatus = 87;  // the child's exit status after a std::bad_alloc

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kLimitMemory = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kLimitMemory = false;
#else
constexpr bool kLimitMemory = true;
#endif
#else
constexpr bool kLimitMemory = true;
#endif

// Examines one plugin file in a child process. Returns "" if the child finished (whatever the
// plugin's own verdict, which the real load records again), else why it did not.
std::string examine_in_child(const ravel::RuntimeOptions& base, const std::string& path, const ExamineLimits& limits) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return "";  // cannot isolate: fall back to loading it here
  if (pid == 0) {
    if (kLimitMemory) {
      const rlim_t bytes = static_cast<rlim_t>(limits.memory_mb) << 20;
      const rlimit lim{bytes, bytes};
      setrlimit(RLIMIT_DATA, &lim);
    }
    try {
      ravel::RuntimeOptions o = base;
      o.load_plugins = false;
      ravel::Runtime rt(o);
      try {
        rt.load_plugin(path);
      } catch (const ravel::OutOfMemoryError&) {
        _exit(kOutOfMemoryStatus);
      } catch (const ravel::Error& e) {
        if (std::strstr(e.what(), "std::bad_alloc")) _exit(kOutOfMemoryStatus);  // thrown through the ABI
      }
      (void)rt.devices();
    } catch (const std::bad_alloc&) {
      _exit(kOutOfMemoryStatus);
    } catch (...) {
    }
    _exit(0);  // skip static destructors: the plugin's state is the child's to drop
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limits.seconds);
  bool timed_out = false;
  for (;;) {
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got < 0) return "";
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string memory = kLimitMemory ? " (the examination may use " + std::to_string(limits.memory_mb) + " MiB)" : "";
  if (timed_out)
    return "not loaded: examining it in a child process took longer than " + std::to_string(limits.seconds) +
           " s (--examine-seconds)";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFEXITED(status) && WEXITSTATUS(status) == kOutOfMemoryStatus)
    return "not loaded: it ran out of memory while being examined in a child process" + memory +
           " (--examine-memory-mb)";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return std::string("not loaded: it crashed while being examined in a child process (signal ") +
           std::to_string(sig) + ", " + strsignal(sig) + ")" + (kLimitMemory && (sig == SIGSEGV || sig == SIGABRT || sig == SIGBUS) ? memory : "");
  }
  return "not loaded: while being examined in a child process it ended the process with status " +
         std::to_string(WEXITSTATUS(status));
}

// The plugin files the runtime would load, each examined in a child; the ones that did not
// survive, with the reason.
std::map<std::string, std::string> examine_plugins(const ravel::RuntimeOptions& opts, const ExamineLimits& limits) {
  ravel::RuntimeOptions find_only = opts;
  find_only.load_plugins = false;
  ravel::Runtime finder(find_only);
  std::map<std::string, std::string> excluded;
  for (const auto& r : finder.plugins())
    if (std::string why = examine_in_child(opts, r.path, limits); !why.empty()) excluded[r.path] = why;
  return excluded;
}

}  // namespace

int main(int argc, char** argv) {
  bool isolate = true;
  ExamineLimits limits;
  ravel::RuntimeOptions opts;
  // A positive integer argument in [1, hi], or a usage error naming the option.
  auto positive = [&](int& i, const char* option, uint64_t hi) -> uint64_t {
    const char* v = i + 1 < argc ? argv[++i] : "";
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v, &end, 10);
    if (!*v || *end || *v == '-' || x < 1 || x > hi) {
      std::fprintf(stderr, "ravel-info: %s takes an integer from 1 to %llu, got '%s'\n", option,
                   static_cast<unsigned long long>(hi), v);
      std::exit(2);
    }
    return x;
  };
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      opts.config_path = argv[++i];
    } else if (std::strcmp(argv[i], "--examine-seconds") == 0) {
      limits.seconds = static_cast<unsigned>(positive(i, "--examine-seconds", 86400));
    } else if (std::strcmp(argv[i], "--examine-memory-mb") == 0) {
      limits.memory_mb = positive(i, "--examine-memory-mb", uint64_t{1} << 30);
    } else if (std::strcmp(argv[i], "--no-isolate") == 0) {
      isolate = false;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::puts("usage: ravel-info [--config FILE] [--no-isolate] [--examine-seconds S] [--examine-memory-mb M]\n"
                "Lists the backend plugins Ravel finds and the devices they offer. Each plugin is\n"
                "first examined in a child process (--no-isolate: not), so one that crashes, hangs\n"
                "past S seconds (default 120) or needs more than M MiB (default 16384) is reported\n"
                "instead of taking ravel-info down.\n"
                "Environment: RAVEL_CONFIG (a config file), RAVEL_PLUGIN_PATH (':'-separated folders).");
      return 0;
    } else {
      std::fprintf(stderr, "ravel-info: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  try {
    if (isolate) opts.excluded_plugins = examine_plugins(opts, limits);
    ravel::Runtime& rt = ravel::Runtime::reset(opts);
    std::cout << "Ravel " << "core, plugin ABI " << RVL_ABI_MAJOR << "." << RVL_ABI_MINOR << "\n\nsearch paths:\n";
    for (const auto& p : rt.search_paths()) std::cout << "  " << p << "\n";
    std::cout << "\nplugins:\n";
    if (rt.plugins().empty()) std::cout << "  (none found)\n";
    for (const auto& r : rt.plugins()) {
      std::cout << "  " << (r.loaded ? "[ok]     " : "[skipped]") << " " << (r.name.empty() ? "?" : r.name);
      if (r.abi_major) std::cout << "  ABI " << r.abi_major << "." << r.abi_minor << "  version " << r.version;
      std::cout << "\n            path: " << r.path << "\n";
      if (!r.loaded) std::cout << "            reason: " << r.status << "\n";
    }
    // Communicator plugins (collectives.h): loaded and probed, never started here.
    std::cout << "\ncommunicators (communicator ABI " << RVL_COLL_ABI_MAJOR << "." << RVL_COLL_ABI_MINOR << "):\n";
    const auto comms = ravel::distributed::find_communicators();
    if (comms.empty()) std::cout << "  (none found)\n";
    for (const auto& c : comms) {
      std::cout << "  " << (c.available ? "[ok]     " : c.loaded ? "[unused] " : "[skipped]") << " "
                << (c.name.empty() ? "?" : c.name);
      if (c.abi_major) std::cout << "  ABI " << c.abi_major << "." << c.abi_minor << "  version " << c.version;
      std::cout << "\n            path: " << c.path << "\n            " << (c.loaded ? "status: " : "reason: ")
                << c.status << "\n";
    }
    const std::string launcher = ravel::distributed::launcher();
    std::cout << "  launcher: " << (launcher.empty() ? "none (a world of one: no communicator needed)" : launcher) << "\n";
    std::cout << "\ndevices:\n";
    auto devices = rt.devices();
    if (devices.empty()) std::cout << "  (none)\n";
    for (const auto& d : devices) {
      std::cout << "  " << d.device.str() << "  " << d.name << "\n            kind " << d.kind << ", "
                << d.compute_units << " compute units, " << (d.memory_bytes >> 20) << " MiB, max rank " << d.max_rank
                << "\n            arch " << (d.arch.empty() ? "-" : d.arch) << ", warp size "
                << (d.warp_size ? std::to_string(d.warp_size) : std::string("-"));
      if (!d.details.empty()) std::cout << "\n            " << d.details;
      std::cout << "\n            dtypes:";
      for (const auto& t : d.dtypes) std::cout << " " << t;
      std::cout << "\n";
    }
    std::cout << "\nconfig: " << rt.config_source() << "\neffective configuration:\n";
    std::istringstream cfg(rt.effective_config());
    for (std::string line; std::getline(cfg, line);) std::cout << "  " << line << "\n";
    if (const std::string& env = rt.fusion_from_environment(); !env.empty())
      std::cout << "  (RAVEL_FUSION=" << env << " overrides fusion.policy: " << ravel::fusion_options().policy << ")\n";
    std::cout << "\nplacement:\n";
    bool chosen = false;
    for (const auto& r : rt.placement_rules()) {
      std::cout << "  " << r.rule << "  ->  ";
      if (r.available && !chosen) std::cout << "available: new tensors go here\n";
      else if (r.available) std::cout << "available (an earlier rule wins)\n";
      else std::cout << "not available (" << r.reason << ")\n";
      chosen = chosen || r.available;
    }
    if (rt.on_mixed_devices() == ravel::MixedDevices::Copy)
      std::cout << "  on mixed devices: copy (operands on other devices are moved by Transfer nodes)\n";
    else
      std::cout << "  on mixed devices: error\n";
    if (!devices.empty()) {
      try {
        std::cout << "\ndefault device: " << rt.default_device().str() << "\n";
      } catch (const ravel::DeviceError& e) {
        std::cout << "\ndefault device: none: " << e.what() << "\n";
        return 1;
      }
    }
    return devices.empty() ? 1 : 0;
  } catch (const ravel::Error& e) {
    std::fprintf(stderr, "ravel-info: %s\n", e.what());
    return 1;
  }
}
