// The tbb_cpu entry table (ABI 1.5): every member, the optional ones included.
#include "members.hpp"

#include <ravel/backend.hpp>

namespace tbbcpu {
namespace {

constexpr rvl_backend_api make_table() {
  rvl_backend_api t{};
  t.struct_size = sizeof(rvl_backend_api);
  t.abi_major = RVL_ABI_MAJOR;
  t.abi_minor = RVL_ABI_MINOR;
  t.error_code = rvl::error_code;
  t.error_message = rvl::error_message;
  t.error_destroy = rvl::error_destroy;
  t.probe = probe;
  t.initialize = initialize;
  t.shutdown = shutdown;
  t.get_info = get_info;
  t.device_count = device_count;
  t.device_properties = device_properties;
  t.buffer_allocate = buffer_allocate;
  t.buffer_free = buffer_free;
  t.buffer_size = buffer_size;
  t.buffer_write = buffer_write;
  t.buffer_read = buffer_read;
  t.buffer_copy = buffer_copy;
  t.stream_create = stream_create;
  t.stream_destroy = stream_destroy;
  t.stream_synchronize = stream_synchronize;
  t.event_record = event_record;
  t.event_wait = event_wait;
  t.event_synchronize = event_synchronize;
  t.event_destroy = event_destroy;
  t.execute_program = execute_program;
  t.execute_contraction = execute_contraction;
  t.synchronize = synchronize;
  t.buffer_address = buffer_address;
  t.buffer_wrap = buffer_wrap;
  t.buffer_copy_peer = buffer_copy_peer;
  return t;
}

constexpr rvl_backend_api kTable = make_table();

}  // namespace
}  // namespace tbbcpu

RVL_DEFINE_BACKEND_ENTRY(tbbcpu::kTable)
