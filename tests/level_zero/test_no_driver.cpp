// Without a Level Zero driver the plugin loads, reports 0 devices with a reason, refuses to
// initialise with a typed error, and answers every other call with an error instead of crashing.
#include <boost/test/unit_test.hpp>

#include <ravel/backend.h>

#include <dlfcn.h>

#include <string>

namespace {
const rvl_backend_api* load() {
  void* lib = dlopen(L0_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  BOOST_REQUIRE_MESSAGE(lib, dlerror());
  auto entry = reinterpret_cast<rvl_backend_entry_fn>(dlsym(lib, RVL_BACKEND_ENTRY_SYMBOL));
  BOOST_REQUIRE(entry);
  return entry();
}

// Destroys the error and returns its status and message.
std::pair<rvl_status, std::string> take(const rvl_backend_api* api, rvl_error* e) {
  if (!e) return {RVL_STATUS_OK, ""};
  std::pair<rvl_status, std::string> r{api->error_code(e), api->error_message(e)};
  api->error_destroy(e);
  return r;
}
}  // namespace

BOOST_AUTO_TEST_CASE(zero_devices_with_a_reason) {
  const rvl_backend_api* api = load();
  rvl_probe_result probe{};
  probe.struct_size = sizeof probe;
  BOOST_REQUIRE(take(api, api->probe(&probe)).first == RVL_STATUS_OK);
  BOOST_TEST(probe.device_count == 0);
#if RVL_ABI_MINOR >= 1
  const std::string reason = probe.reason;
  BOOST_TEST(!reason.empty());
  BOOST_TEST_MESSAGE("reason: " << reason);
#endif
  int32_t n = -1;
  BOOST_TEST(take(api, api->device_count(&n)).first == RVL_STATUS_OK);
  BOOST_TEST(n == 0);

  rvl_device_properties props{};
  props.struct_size = sizeof props;
  BOOST_TEST(take(api, api->device_properties(0, &props)).first == RVL_STATUS_INVALID_ARGUMENT);

  auto [status, message] = take(api, api->initialize());
  BOOST_TEST(status == RVL_STATUS_UNSUPPORTED);
  BOOST_TEST(!message.empty());

  rvl_buffer* b = nullptr;
  BOOST_TEST(take(api, api->buffer_allocate(0, 16, &b)).first == RVL_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(take(api, api->synchronize(0)).first == RVL_STATUS_INVALID_ARGUMENT);
  api->shutdown();  // harmless without initialize
}
