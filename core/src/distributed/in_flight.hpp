// A collective's request in flight and the buffers it uses (collective_op.cpp's operations).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/staging.hpp"
#include "runtime/device_buffer.hpp"

namespace ravel::detail {

// What a request in flight uses: the staging buffers, or (Note [Host memory without staging]) the
// input's and the output's device buffers.
struct InFlightBuffers {
  std::shared_ptr<Bytes> send, recv, headers;
  std::vector<std::shared_ptr<DeviceBuffer>> direct;
};

// Shared by both kinds: the request in flight and the staging buffers it uses.
class InFlight {
 public:
  template <class Start>
  void start(Communicator& comm, Start&& fn, const std::string& what) {
    comm_ = &comm;
    completed_ = false;
    request_ = comm.start(std::forward<Start>(fn), what);
  }
  // Waits under the deadline; on any failure the buffers stay parked with the request.
  void wait(const std::string& what) {
    rvl_coll_request* r = std::exchange(request_, nullptr);
    if (r) comm_->wait(r, what, kept());
  }
  // Note [Progress between kernels]: polled until the library says it completed, then left alone.
  bool progress() noexcept {
    if (!request_ || completed_) return false;
    completed_ = comm_->poll(request_);
    return true;
  }
  void cancel() noexcept {
    if (rvl_coll_request* r = std::exchange(request_, nullptr)) {
      try {
        comm_->abandon(r, kept());
      } catch (...) {  // only an allocation can fail here; the world is broken anyway
      }
    }
    release();
  }
  void release() {
    send.reset(), recv.reset(), headers.reset();
    direct.clear();
    // A keep-alive parked with a timed-out or abandoned request keeps its buffers for the rest of
    // the process: only an unshared one is emptied (so the communicator's staging slots are free
    // for the next call), a parked one is let go.
    if (keep_ && keep_.use_count() == 1) keep_->send.reset(), keep_->recv.reset(), keep_->headers.reset(), keep_->direct.clear();
    else keep_.reset();
  }
  std::shared_ptr<Bytes> send, recv;
  std::shared_ptr<Bytes> headers;  // Note [Checked all-reduces in the core]: every rank's, written by the plugin
  std::vector<std::shared_ptr<DeviceBuffer>> direct;  // Note [Host memory without staging]

 private:
  // The buffers as one keep-alive for the communicator, the same object from call to call (Note
  // [Fixed cost per call]); a new one only after a time-out parked the last. The direct buffers
  // move into it (nothing reads them after the wait; release empties both), the staging ones
  // are shared (the result is still read from `recv` after the wait).
  std::shared_ptr<void> kept() {
    if (!keep_ || keep_.use_count() > 1) keep_ = std::make_shared<InFlightBuffers>();
    keep_->send = send, keep_->recv = recv, keep_->headers = headers;
    keep_->direct.clear();
    keep_->direct.swap(direct);
    return keep_;
  }
  Communicator* comm_ = nullptr;
  rvl_coll_request* request_ = nullptr;
  bool completed_ = false;  // a poll saw it complete (Note [Progress between kernels])
  std::shared_ptr<InFlightBuffers> keep_;
};

}  // namespace ravel::detail
