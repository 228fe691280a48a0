// The communicator conformance runner's view of a plugin under test: loaded with dlopen (the
// runner never links the core), its table checked as the core's loader checks it, and each
// rvl_coll_error turned into a Status the cases compare against.
#pragma once

#include <cstdint>
#include <string>

#include "ravel/collectives.h"

namespace ravel::comm_conformance {

struct Status {
  rvl_coll_status code = RVL_COLL_STATUS_OK;
  std::string message;
  int32_t rank = -1;
  bool ok() const { return code == RVL_COLL_STATUS_OK; }
};

class CommPlugin {
 public:
  // Loads `path`; on failure error() says why and api() is NULL.
  explicit CommPlugin(const std::string& path);
  const rvl_collectives_api* api() const { return api_; }
  const std::string& error() const { return error_; }
  // Reads and destroys `e`.
  Status take(rvl_coll_error* e) const;
  // Starts an operation through `start` and waits for it with `timeout_ms`; frees the request
  // unless it timed out (then *left, if given, receives it).
  template <class Start>
  Status run(Start start, int64_t timeout_ms, rvl_coll_request** left = nullptr) const {
    rvl_coll_request* r = nullptr;
    Status s = take(start(&r));
    if (!s.ok()) return s;
    s = take(api_->request_wait(r, timeout_ms));
    if (s.code == RVL_COLL_STATUS_TIMEOUT && left) *left = r;
    else api_->request_free(r);
    return s;
  }

 private:
  void* handle_ = nullptr;
  const rvl_collectives_api* api_ = nullptr;
  std::string error_;
};

const char* status_name(rvl_coll_status s);

}  // namespace ravel::comm_conformance
