// init / finalize, launcher detection and communicator discovery.
//
// Note [World of one]
// Without a launcher environment the program is a world of one: rank 0 of 1, no plugin is
// loaded, and every collective returns its input (the reduction, gathering or broadcast of one
// rank's data is that data). This is what lets `makemore` run unchanged without mpirun, and why
// a missing MPI installation costs a single-process user nothing.
#include "distributed/world.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "config/environment.hpp"
#include "config/settings.hpp"
#include "ravel/runtime.hpp"
#include "runtime/host_op.hpp"

namespace ravel::detail {

namespace {

struct State {
  distributed::World world;
  distributed::Options options;
  std::unique_ptr<Communicator> comm;
};

// Heap objects that are never freed: finalize() runs from a static destructor (AtExit), after
// function-local statics made later than it are gone.
std::recursive_mutex& mutex() {
  static auto* m = new std::recursive_mutex();
  return *m;
}
State*& state() {
  static State* s = nullptr;
  return s;
}
// Note [The world read without a lock]: once init has set the state it never changes (finalize
// shuts the communicator but keeps the state), so the per-call readers (world_communicator,
// world_options: three or four times per collective) read this pointer, published once, instead
// of taking the recursive mutex and building default Options in init() on every call.
std::atomic<State*>& ready() {
  static auto* r = new std::atomic<State*>(nullptr);  // never freed, as above
  return *r;
}

// Plugins stay loaded for the life of the process: an MPI library cannot be started twice, and
// one whose finalize was skipped must not lose its code under it.
void keep_loaded(std::shared_ptr<LoadedCommunicator> p) {
  static auto* kept = new std::vector<std::shared_ptr<LoadedCommunicator>>();  // never freed
  kept->push_back(std::move(p));
}

// The world is shut down when the process exits normally (a static's destructor runs after
// main returns), unless finalize() ran first.
struct AtExit {
  ~AtExit() { distributed::finalize(); }
} at_exit;

int parse_int(const std::string& v, const char* name) {
  size_t used = 0;
  int x = -1;
  try {
    x = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  RAVEL_CHECK(used == v.size() && x >= 0, ConfigError, name, "=", v, " is not a non-negative integer");
  return x;
}

// Options::timeout set explicitly, else RAVEL_DIST_TIMEOUT_S, else the config's
// distributed.timeout_s (checked when the config was read), else the default.
std::chrono::milliseconds timeout_from(const distributed::Options& o, const Environment& env) {
  if (o.timeout != distributed::Options{}.timeout) return o.timeout;
  if (env.dist_timeout.empty()) {
    const double config_s = Runtime::get().settings().config.distributed.timeout_s;
    return config_s > 0 ? std::chrono::milliseconds(static_cast<int64_t>(config_s * 1000 + 0.5)) : o.timeout;
  }
  size_t used = 0;
  double s = -1;
  try {
    s = std::stod(env.dist_timeout, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  RAVEL_CHECK(used == env.dist_timeout.size() && s > 0 && s < 1e7, ConfigError, "RAVEL_DIST_TIMEOUT_S=",
              env.dist_timeout, " is not a positive number of seconds");
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000 + 0.5));
}

std::unique_ptr<Communicator> start_communicator(const Launcher& l, const Environment& env, std::chrono::milliseconds t) {
  std::string tried;
  std::shared_ptr<LoadedCommunicator> best;
  int best_score = 0;
  for (const auto& r : distributed::find_communicators()) {
    tried += "\n  " + r.path + ": " + (r.name.empty() ? "" : r.name + ": ") + r.status;
    if (!r.loaded || !r.available) continue;
    if (!env.communicator.empty() && r.name != env.communicator) continue;
    auto p = LoadedCommunicator::open(r.path);
    const int score = p->probe().score;
    if (!best || score > best_score) best = p, best_score = score;
  }
  if (!best) {
    std::string paths;
    for (const auto& p : Runtime::get().search_paths()) paths += (paths.empty() ? "" : ", ") + p;
    throw PluginError("started by " + l.description + ", but no communicator plugin" +
                      (env.communicator.empty() ? std::string() : " named \"" + env.communicator + "\" (RAVEL_COMMUNICATOR)") +
                      " could be used (searched: " + paths + ")" + (tried.empty() ? ": none found" : ":" + tried));
  }
  keep_loaded(best);
  auto c = std::make_unique<Communicator>(best, t);
  if (c->size() != l.size || c->rank() != l.rank)
    throw distributed::CommunicationError(best->name() + " joined as rank " + std::to_string(c->rank()) + " of " +
                                              std::to_string(c->size()) + ", but " + l.description + " says rank " +
                                              std::to_string(l.rank) + " of " + std::to_string(l.size),
                                          c->rank(), -1);
  return c;
}

}  // namespace

Launcher detect_launcher() {
  const Environment env = read_environment();
  Launcher l;
  auto take = [&](const std::string& size, const std::string& rank, const char* size_name, const char* rank_name,
                  const char* who) {
    if (l.found || size.empty()) return;
    l.found = true;
    l.size = parse_int(size, size_name);
    l.rank = parse_int(rank, rank_name);
    RAVEL_CHECK(l.size >= 1 && l.rank < l.size, ConfigError, rank_name, "=", rank, " is not below ", size_name, "=", size);
    l.description = std::string(who) + " (" + size_name + "=" + size + ")";
  };
  take(env.ompi_size, env.ompi_rank, "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "mpirun");
  take(env.pmi_size, env.pmi_rank, "PMI_SIZE", "PMI_RANK", "a PMI launcher");
  return l;
}

Communicator* world_communicator() {
  if (const State* s = ready().load(std::memory_order_acquire)) return s->comm.get();
  distributed::init();
  return state()->comm.get();
}

const distributed::Options& world_options() {
  if (const State* s = ready().load(std::memory_order_acquire)) return s->options;
  distributed::init();
  return state()->options;
}

}  // namespace ravel::detail

namespace ravel::distributed {

using namespace ravel::detail;

const World& init(const Options& options) {
  std::lock_guard<std::recursive_mutex> lock(mutex());
  if (state()) return state()->world;
  const Environment env = read_environment();
  auto s = std::make_unique<State>();
  s->options = options;
  s->options.timeout = timeout_from(options, env);
  RAVEL_CHECK(s->options.timeout.count() > 0, ValueError, "distributed::init: the timeout must be positive");
  s->world.timeout = s->options.timeout;
  const Launcher l = detect_launcher();
  if (l.found) {  // otherwise Note [World of one]
    s->comm = start_communicator(l, env, s->options.timeout);
    s->world.rank = s->comm->rank();
    s->world.size = s->comm->size();
    s->world.communicator = s->comm->plugin().name();
    s->world.version = s->comm->plugin().version();
    s->world.launcher = l.description;
  }
  state() = s.release();
  ready().store(state(), std::memory_order_release);  // Note [The world read without a lock]
  return state()->world;
}

bool initialized() {
  std::lock_guard<std::recursive_mutex> lock(mutex());
  return state() != nullptr;
}

std::string launcher() { return detect_launcher().description; }

int rank() { return init().rank; }
int world_size() { return init().size; }

void finalize() {
  std::lock_guard<std::recursive_mutex> lock(mutex());
  State* s = state();
  if (!s) return;
  if (s->comm) {
    try {  // results never read (Note [Results ended at their first reader]): no request left behind
      detail::end_deferred_host_ops();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ravel: distributed: rank %d: %s\n", s->world.rank, e.what());
    }
    if (std::string e = s->comm->shut(); !e.empty())
      std::fprintf(stderr, "ravel: distributed: rank %d: %s\n", s->world.rank, e.c_str());
  }
  // The state stays (finalized worlds are not restarted: MPI cannot be initialised twice).
}

std::vector<CommunicatorRecord> find_communicators() {
  std::vector<CommunicatorRecord> out;
  for (const auto& dir : Runtime::get().search_paths()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) continue;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string f = entry.path().filename().string();
      if (f.rfind("libravel_comm_", 0) == 0 && entry.path().extension() == ".so") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      CommunicatorRecord r;
      r.path = std::filesystem::weakly_canonical(f, ec).string();
      if (std::any_of(out.begin(), out.end(), [&](const CommunicatorRecord& o) { return o.path == r.path; })) continue;
      try {
        auto p = LoadedCommunicator::open(r.path);
        r.name = p->name();
        r.version = p->version();
        r.abi_major = p->api().abi_major;
        r.abi_minor = p->api().abi_minor;
        r.loaded = true;
        const rvl_coll_probe_result probe = p->probe();
        r.available = probe.available != 0;
        r.status = r.available ? "ok: launcher found, rank " + std::to_string(probe.rank) + " of " +
                                     std::to_string(probe.world_size)
                               : std::string("not used: ") + (probe.reason[0] ? probe.reason : "no launcher environment");
        keep_loaded(p);
      } catch (const PluginError& e) {
        r.status = e.what();
      } catch (const std::exception& e) {  // a C++ exception let out through the C ABI
        r.status = std::string("a C++ exception escaped through the C ABI: ") + e.what();
      }
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace ravel::distributed
