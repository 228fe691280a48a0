// LoadedCommunicator — one communicator plugin (collectives.h), loaded with Boost.DLL and
// checked as LoadedPlugin checks backends (entry symbol, table size, major version, required
// members; Note [ABI members]); and Communicator, a started world over it that turns every
// rvl_coll_error into a typed ravel error and every wait into one with a deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/dll/shared_library.hpp>

#include "ravel/collectives.h"

namespace ravel::detail {

#define RAVEL_COLL_HAS(api, member)                                                     \
  ((api) != nullptr &&                                                                  \
   offsetof(rvl_collectives_api, member) + sizeof((api)->member) <= (api)->struct_size && \
   (api)->member != nullptr)

class LoadedCommunicator {
 public:
  // Opens and checks `path` and reads get_info; throws PluginError naming the path and why.
  static std::shared_ptr<LoadedCommunicator> open(const std::string& path);
  const rvl_collectives_api& api() const { return *api_; }
  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::string& path() const { return path_; }
  // The probe (environment only). Throws PluginError if it fails.
  rvl_coll_probe_result probe() const;
  // The message of `e` ("(no message)" if none); destroys it.
  std::string take_message(rvl_coll_error* e) const;

 private:
  boost::dll::shared_library lib_;
  const rvl_collectives_api* api_ = nullptr;
  std::string name_, version_, path_;
};

// A started world communicator.
class Communicator {
 public:
  // comm_create_world under `timeout`; throws a CommunicationError subclass on failure.
  Communicator(std::shared_ptr<LoadedCommunicator> plugin, std::chrono::milliseconds timeout);
  ~Communicator();  // shut() if not done
  int rank() const { return rank_; }
  int size() const { return size_; }
  const LoadedCommunicator& plugin() const { return *plugin_; }
  rvl_communicator* handle() const { return comm_; }
  std::chrono::milliseconds timeout;

  // Throws the typed error for `e` (CommunicationError, TimeoutError, PeerLostError, ValueError
  // for INVALID_ARGUMENT); destroys it. No-op for NULL.
  void check(rvl_coll_error* e, const std::string& what) const;
  // Starts an operation (start(&request)) and returns its request, or throws. A template, not a
  // std::function: a capturing lambda would otherwise be heap-allocated on every call (Note
  // [Fixed cost per call] in collective_op.cpp).
  template <class Start>
  rvl_coll_request* start(Start&& start, const std::string& what) {
    rvl_coll_request* r = nullptr;
    check(start(&r), what);
    return r;
  }
  // Waits for `r` with the deadline, frees it and throws on failure. On a time-out the request
  // is abandoned (the world is broken) and `keep_alive` — the buffers the operation may still
  // write — is parked for the rest of the process instead of being freed under it.
  void wait(rvl_coll_request* r, const std::string& what, std::shared_ptr<void> keep_alive);
  // One non-blocking test of `r` (Note [Progress between kernels] in runtime/host_op.cpp): lets
  // the library advance it; whether it has completed (then polling it again is wasted). A
  // failure counts as completed and is left for `wait` to report (the request stays valid).
  bool poll(rvl_coll_request* r) const noexcept;
  // Gives up on a request that has not been waited for (after another one failed): frees it,
  // which breaks the world, and parks `keep_alive`.
  void abandon(rvl_coll_request* r, std::shared_ptr<void> keep_alive);
  // Both at once.
  template <class Start>
  void run(Start&& start_fn, const std::string& what, std::shared_ptr<void> keep_alive) {
    wait(start(std::forward<Start>(start_fn), what), what, std::move(keep_alive));
  }
  // Note [Reused staging buffers]: host buffer number `slot`, resized to `bytes` (contents
  // undefined), the same memory from call to call while it is large enough.
  std::shared_ptr<std::vector<uint8_t>> staging(size_t slot, size_t bytes);
  // The argument headers' buffer (Note [Argument headers]): `bytes` bytes, reused from call to
  // call like a staging buffer, replaced when a timed-out exchange parked it.
  std::shared_ptr<std::vector<uint8_t>> header_staging(size_t bytes);
  // comm_destroy (MPI_Finalize when healthy); an error is returned as text ("" when fine).
  std::string shut();

 private:
  std::shared_ptr<LoadedCommunicator> plugin_;
  rvl_communicator* comm_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> staging_;
  std::shared_ptr<std::vector<uint8_t>> headers_;
};

}  // namespace ravel::detail
