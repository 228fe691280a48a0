#include "device_buffers.hpp"

#include <cstring>

namespace rvl::conformance {

void expect(bool cond, const std::string& what) {
  if (!cond) throw Failure(what);
}

DeviceBuffer::DeviceBuffer(int32_t device, uint64_t bytes) : bytes_(bytes) {
  // A 0-byte request allocates one byte: some plugins refuse size 0, and the cases pass empty
  // buffers to members that must accept them.
  check_ok(session().api->buffer_allocate(device, bytes ? bytes : 1, &b_),
           "buffer_allocate on device " + std::to_string(device));
}

DeviceBuffer::~DeviceBuffer() { take_error(session().api->buffer_free(b_)); }

void DeviceBuffer::write(const std::vector<uint8_t>& bytes) {
  if (!bytes.empty()) check_ok(session().api->buffer_write(nullptr, b_, 0, bytes.data(), bytes.size()), "buffer_write");
}

std::vector<uint8_t> DeviceBuffer::read() const {
  std::vector<uint8_t> out(bytes_);
  if (bytes_) check_ok(session().api->buffer_read(nullptr, b_, 0, out.data(), out.size()), "buffer_read");
  return out;
}

std::vector<int32_t> other_devices(size_t max, const std::string& needs) {
  int32_t n = 0;
  check_ok(session().api->device_count(&n), "device_count");
  std::vector<int32_t> out;
  for (int32_t d = 0; d < n && out.size() < max; ++d)
    if (d != session().device) out.push_back(d);
  if (out.empty())
    throw Skip("the plugin has one device; " + needs + " needs two (RAVEL_TBB_DEVICES, RAVEL_HIP_EMU_DEVICES, "
               "ZECL_DEVICES give test devices)");
  return out;
}

void fill_f32(int32_t device, rvl_buffer* b, int64_t n, float value) {
  std::vector<rvl_instruction> code{const_f(RVL_DTYPE_F32, value)};
  rvl_program p{};
  p.struct_size = sizeof p;
  p.rank = 1;
  p.shape[0] = n;
  p.n_instructions = 1;
  p.instructions = code.data();
  p.output.struct_size = sizeof p.output;
  p.output.buffer = b;
  p.output.dtype = RVL_DTYPE_F32;
  p.output.view = contiguous({n});
  check_ok(session().api->execute_program(device, nullptr, &p), "execute_program on device " + std::to_string(device));
}

float f32_at(const std::vector<uint8_t>& bytes, size_t at) {
  float f;
  std::memcpy(&f, bytes.data() + at * 4, 4);
  return f;
}

}  // namespace rvl::conformance
