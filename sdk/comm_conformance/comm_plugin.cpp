#include "comm_plugin.hpp"

#include <dlfcn.h>

#include <cstddef>

namespace ravel::comm_conformance {

const char* status_name(rvl_coll_status s) {
  switch (s) {
    case RVL_COLL_STATUS_OK: return "OK";
    case RVL_COLL_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case RVL_COLL_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case RVL_COLL_STATUS_UNSUPPORTED: return "UNSUPPORTED";
    case RVL_COLL_STATUS_TIMEOUT: return "TIMEOUT";
    case RVL_COLL_STATUS_PEER_LOST: return "PEER_LOST";
    case RVL_COLL_STATUS_COMM_ERROR: return "COMM_ERROR";
    case RVL_COLL_STATUS_INTERNAL: return "INTERNAL";
  }
  return "(unknown status)";
}

CommPlugin::CommPlugin(const std::string& path) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* e = dlerror();
    error_ = "cannot load " + path + ": " + (e ? e : "?");
    return;
  }
  auto entry = reinterpret_cast<rvl_collectives_entry_fn>(dlsym(handle_, RVL_COLLECTIVES_ENTRY_SYMBOL));
  if (!entry) {
    error_ = path + " does not export " RVL_COLLECTIVES_ENTRY_SYMBOL;
    return;
  }
  const rvl_collectives_api* api = entry();
  if (!api) {
    error_ = "the entry point returned NULL";
    return;
  }
  if (api->struct_size < offsetof(rvl_collectives_api, abi_minor) + sizeof(uint32_t) ||
      api->abi_major != RVL_COLL_ABI_MAJOR) {
    error_ = "ABI major version " + std::to_string(api->abi_major) + " (expected " +
             std::to_string(RVL_COLL_ABI_MAJOR) + ") or a truncated table";
    return;
  }
  std::string missing;
#define CHECK_MEMBER_(m)                                                                          \
  if (offsetof(rvl_collectives_api, m) + sizeof(api->m) > api->struct_size || api->m == nullptr) \
    missing += missing.empty() ? #m : ", " #m;
  RVL_COLL_REQUIRED_MEMBERS(CHECK_MEMBER_)
#undef CHECK_MEMBER_
  if (!missing.empty()) {
    error_ = "the table lacks required member(s): " + missing;
    return;
  }
  api_ = api;
}

Status CommPlugin::take(rvl_coll_error* e) const {
  Status s;
  if (!e) return s;
  s.code = api_->error_code(e);
  const char* m = api_->error_message(e);
  s.message = m ? m : "";
  s.rank = api_->error_rank(e);
  api_->error_destroy(e);
  if (s.code == RVL_COLL_STATUS_OK) {  // an error object must carry a failure
    s.code = RVL_COLL_STATUS_INTERNAL;
    s.message = "the plugin returned an error object with status OK: " + s.message;
  }
  return s;
}

}  // namespace ravel::comm_conformance
