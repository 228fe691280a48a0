#include "distributed/communicator.hpp"

#include <cstdio>
#include <mutex>

#include "ravel/distributed.hpp"
#include "ravel/error.hpp"

namespace ravel::detail {

namespace {

std::string message_of(const rvl_collectives_api* api, rvl_coll_error* e) {
  std::string msg = "(no message)";
  if (const char* m = api->error_message(e); m && *m) msg = m;
  api->error_destroy(e);
  return msg;
}

// Buffers an abandoned operation may still write: kept until the process exits.
void park(std::shared_ptr<void> buffers) {
  static std::mutex mutex;
  static auto* parked = new std::vector<std::shared_ptr<void>>();  // never freed, by design
  std::lock_guard<std::mutex> lock(mutex);
  parked->push_back(std::move(buffers));
}

}  // namespace

std::shared_ptr<LoadedCommunicator> LoadedCommunicator::open(const std::string& path) {
  auto p = std::make_shared<LoadedCommunicator>();
  p->path_ = path;
  auto fail = [&](const std::string& why) { return PluginError("communicator plugin " + path + ": " + why); };
  try {
    p->lib_.load(path, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw fail(std::string("cannot load (not a shared object, or missing dependencies): ") + e.what());
  }
  if (!p->lib_.has(RVL_COLLECTIVES_ENTRY_SYMBOL)) throw fail("does not export " RVL_COLLECTIVES_ENTRY_SYMBOL);
  const rvl_collectives_api* api = p->lib_.get<const rvl_collectives_api*()>(RVL_COLLECTIVES_ENTRY_SYMBOL)();
  if (api == nullptr) throw fail("entry symbol returned NULL");
  constexpr size_t kHeader = offsetof(rvl_collectives_api, abi_minor) + sizeof(uint32_t);
  if (api->struct_size < kHeader) throw fail("function table too small (struct_size " + std::to_string(api->struct_size) + ")");
  if (api->abi_major != RVL_COLL_ABI_MAJOR)
    throw fail("communicator ABI major version " + std::to_string(api->abi_major) + ", the core's is " +
               std::to_string(RVL_COLL_ABI_MAJOR));
  std::string missing;
#define RAVEL_COLL_REQUIRED_(m) \
  if (!RAVEL_COLL_HAS(api, m)) missing += missing.empty() ? #m : ", " #m;
  RVL_COLL_REQUIRED_MEMBERS(RAVEL_COLL_REQUIRED_)
#undef RAVEL_COLL_REQUIRED_
  if (!missing.empty()) throw fail("function table lacks the required member(s) " + missing);
  p->api_ = api;
  rvl_collectives_info info{};
  info.struct_size = sizeof info;
  if (rvl_coll_error* e = api->get_info(&info)) throw fail("get_info failed: " + message_of(api, e));
  if (!info.name || !*info.name) throw fail("get_info returned no name");
  p->name_ = info.name;
  p->version_ = info.version ? info.version : "";
  return p;
}

rvl_coll_probe_result LoadedCommunicator::probe() const {
  rvl_coll_probe_result r{};
  r.struct_size = sizeof r;
  if (rvl_coll_error* e = api_->probe(&r))
    throw PluginError("communicator plugin " + path_ + " (" + name_ + "): probe failed: " + message_of(api_, e));
  r.reason[sizeof r.reason - 1] = '\0';
  return r;
}

std::string LoadedCommunicator::take_message(rvl_coll_error* e) const { return message_of(api_, e); }

Communicator::Communicator(std::shared_ptr<LoadedCommunicator> plugin, std::chrono::milliseconds t)
    : timeout(t), plugin_(std::move(plugin)) {
  const rvl_collectives_api& api = plugin_->api();
  check(api.comm_create_world(nullptr, timeout.count(), &comm_), "joining the world (comm_create_world)");
  int32_t r = 0, s = 1;
  check(api.comm_rank(comm_, &r), "comm_rank");
  check(api.comm_size(comm_, &s), "comm_size");
  rank_ = r;
  size_ = s;
}

Communicator::~Communicator() {
  if (std::string e = shut(); !e.empty()) std::fprintf(stderr, "ravel: distributed: %s\n", e.c_str());
}

void Communicator::check(rvl_coll_error* e, const std::string& what) const {
  if (e == nullptr) return;
  const rvl_collectives_api& api = plugin_->api();
  const rvl_coll_status code = api.error_code(e);
  const int peer = api.error_rank(e);
  const std::string msg = "rank " + std::to_string(rank_) + ": " + what + ": " + plugin_->name() + ": " +
                          message_of(&api, e);
  using namespace ravel::distributed;
  switch (code) {
    case RVL_COLL_STATUS_TIMEOUT: throw TimeoutError(msg, rank_, peer);
    case RVL_COLL_STATUS_PEER_LOST: throw PeerLostError(msg, rank_, peer);
    case RVL_COLL_STATUS_INVALID_ARGUMENT: throw ValueError(msg);
    case RVL_COLL_STATUS_OUT_OF_MEMORY: throw OutOfMemoryError(msg);
    default: throw CommunicationError(msg, rank_, peer);
  }
}

void Communicator::wait(rvl_coll_request* r, const std::string& what, std::shared_ptr<void> keep_alive) {
  const rvl_collectives_api& api = plugin_->api();
  rvl_coll_error* e = api.request_wait(r, timeout.count());
  if (e && api.error_code(e) == RVL_COLL_STATUS_TIMEOUT) {
    // The operation may still complete into its buffers: they outlive the error. Abandoning the
    // request breaks the world (collectives.h): nothing after this can be matched again.
    park(std::move(keep_alive));
  }
  api.request_free(r);
  check(e, what);
}

bool Communicator::poll(rvl_coll_request* r) const noexcept {
  const rvl_collectives_api& api = plugin_->api();
  int32_t done = 0;
  if (rvl_coll_error* e = api.request_test(r, &done)) {
    api.error_destroy(e);  // wait reports it again
    return true;
  }
  return done != 0;
}

void Communicator::abandon(rvl_coll_request* r, std::shared_ptr<void> keep_alive) {
  park(std::move(keep_alive));
  plugin_->api().request_free(r);
}

// Note [Reused staging buffers]
// Open MPI moves large messages between processes of one host through its shared-memory
// transport, whose setup for a buffer it has not seen costs far more than the copy: a plain C
// program calling MPI_Iallreduce on freshly malloc'd 1 MiB buffers took 31 ms per call where the
// same program reusing its buffers took 0.25 ms (bench/distributed, 2 ranks; a fresh large
// malloc is a fresh mmap). So the tensor collectives stage through buffers the communicator keeps
// and reuses (one per slot: send, receive, each DataParallel bucket), never freeing them. A
// buffer handed to an operation that timed out is parked with it and replaced here.
std::shared_ptr<std::vector<uint8_t>> Communicator::staging(size_t slot, size_t bytes) {
  if (staging_.size() <= slot) staging_.resize(slot + 1);
  auto& b = staging_[slot];
  if (!b || b.use_count() > 1) b = std::make_shared<std::vector<uint8_t>>();  // parked or in use: a new one
  b->resize(bytes);
  return b;
}

std::shared_ptr<std::vector<uint8_t>> Communicator::header_staging(size_t bytes) {
  if (!headers_ || headers_.use_count() > 1) headers_ = std::make_shared<std::vector<uint8_t>>();
  headers_->resize(bytes);
  return headers_;
}

std::string Communicator::shut() {
  if (!comm_) return "";
  rvl_communicator* c = comm_;
  comm_ = nullptr;
  if (rvl_coll_error* e = plugin_->api().comm_destroy(c)) return "shut-down: " + message_of(&plugin_->api(), e);
  return "";
}

}  // namespace ravel::detail
