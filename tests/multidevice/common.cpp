// Plugin loading and helpers of the multi-device tests (common.hpp).
#include "common.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace mdtest {
namespace {

const rvl_backend_api* g_api = nullptr;

struct PluginFixture {
  PluginFixture() {
    // Each case starts its own Session; nothing from the developer's environment leaks in.
    unsetenv("RAVEL_TBB_DEVICES");
    unsetenv("RAVEL_TBB_ASYNC");
    unsetenv("RAVEL_TBB_TEST_FAULT");
    void* handle = dlopen(RAVEL_TBB_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    BOOST_TEST_REQUIRE(handle != nullptr, "dlopen failed: " << dlerror());
    auto entry = reinterpret_cast<rvl_backend_entry_fn>(dlsym(handle, RVL_BACKEND_ENTRY_SYMBOL));
    BOOST_TEST_REQUIRE(entry != nullptr);
    g_api = entry();
    BOOST_TEST_REQUIRE(g_api->abi_minor >= 5u);
    BOOST_TEST_REQUIRE(g_api->struct_size >= RVL_BACKEND_API_STRUCT_SIZE_1_5);
    // Deliberately no dlclose: oneTBB's workers may still be winding down.
  }
};
BOOST_TEST_GLOBAL_FIXTURE(PluginFixture);

}  // namespace

const rvl_backend_api& api() { return *g_api; }

EnvVar::EnvVar(const char* name, const std::string& value) : name_(name) {
  if (const char* old = std::getenv(name)) {
    had_ = true;
    old_ = old;
  }
  if (value.empty()) unsetenv(name);
  else setenv(name, value.c_str(), 1);
}
EnvVar::~EnvVar() {
  if (had_) setenv(name_.c_str(), old_.c_str(), 1);
  else unsetenv(name_.c_str());
}

Session::Session(int32_t devices, const std::string& async, const std::string& fault)
    // Several devices default to queues only on machines with two cores per device (Note
    // [Devices]); these tests are about the queues, so they ask for them unless told otherwise.
    : devices_("RAVEL_TBB_DEVICES", std::to_string(devices)),
      async_("RAVEL_TBB_ASYNC", async.empty() && devices > 1 ? std::string("1") : async),
      fault_("RAVEL_TBB_TEST_FAULT", fault), n_(devices) {
  ok(api().initialize(), "initialize with " + std::to_string(devices) + " devices");
  int32_t count = -1;
  ok(api().device_count(&count), "device_count");
  BOOST_TEST_REQUIRE(count == devices);
}
Session::~Session() { api().shutdown(); }

void ok(rvl_error* e, const std::string& ctx) {
  if (!e) return;
  const std::string msg = api().error_message(e);
  api().error_destroy(e);
  BOOST_FAIL(ctx << ": unexpected error: " << msg);
}

std::string expect_error(rvl_error* e, const std::string& keyword, rvl_status code) {
  BOOST_TEST_REQUIRE(e != nullptr, "expected an error containing '" << keyword << "'");
  const std::string msg = api().error_message(e);
  const rvl_status got = api().error_code(e);
  api().error_destroy(e);
  BOOST_TEST(got == code, "status " << got << ", expected " << code << " (" << msg << ")");
  BOOST_TEST(msg.find(keyword) != std::string::npos, "message '" << msg << "' lacks '" << keyword << "'");
  return msg;
}

Buf::Buf(int32_t device, uint64_t bytes) : bytes_(bytes) {
  ok(api().buffer_allocate(device, bytes ? bytes : 1, &b_), "buffer_allocate on device " + std::to_string(device));
}
Buf::~Buf() {
  if (rvl_error* e = api().buffer_free(b_)) api().error_destroy(e);
}
void Buf::write(const void* src, uint64_t bytes, uint64_t offset) {
  ok(api().buffer_write(nullptr, b_, offset, src, bytes), "buffer_write");
}
std::vector<unsigned char> Buf::read(uint64_t bytes, uint64_t offset) const {
  std::vector<unsigned char> out(bytes);
  ok(api().buffer_read(nullptr, b_, offset, out.data(), bytes), "buffer_read");
  return out;
}

rvl_operand vector_operand(rvl_buffer* b, int32_t dtype, int64_t n) {
  rvl_operand o{};
  o.struct_size = sizeof o;
  o.buffer = b;
  o.dtype = dtype;
  o.view.struct_size = sizeof o.view;
  o.view.strides[0] = 1;
  o.view.valid_hi[0] = n;
  return o;
}

namespace {

rvl_instruction ins(int32_t op, int32_t dtype, int32_t s0 = -1, int32_t s1 = -1, int32_t arg = 0) {
  rvl_instruction i{};
  i.op = op;
  i.dtype = dtype;
  i.src[0] = s0;
  i.src[1] = s1;
  i.src[2] = -1;
  i.arg = arg;
  return i;
}

void launch(int32_t device, const std::vector<rvl_operand>& inputs, const std::vector<rvl_instruction>& code,
            rvl_buffer* out, int64_t n) {
  rvl_program p{};
  p.struct_size = sizeof p;
  p.rank = 1;
  p.shape[0] = n;
  p.n_inputs = static_cast<int32_t>(inputs.size());
  p.inputs = inputs.data();
  p.n_instructions = static_cast<int32_t>(code.size());
  p.instructions = code.data();
  p.output = vector_operand(out, code.back().dtype, n);
  ok(api().execute_program(device, nullptr, &p), "execute_program on device " + std::to_string(device));
}

}  // namespace

void launch_fma(int32_t device, rvl_buffer* a, rvl_buffer* b, float c, rvl_buffer* out, int64_t n) {
  std::vector<rvl_instruction> code = {ins(RVL_OP_LOAD, RVL_DTYPE_F32, -1, -1, 0),
                                       ins(RVL_OP_LOAD, RVL_DTYPE_F32, -1, -1, 1), ins(RVL_OP_MUL, RVL_DTYPE_F32, 0, 1),
                                       ins(RVL_OP_CONST, RVL_DTYPE_F32), ins(RVL_OP_ADD, RVL_DTYPE_F32, 2, 3)};
  code[3].value.f = c;
  launch(device, {vector_operand(a, RVL_DTYPE_F32, n), vector_operand(b, RVL_DTYPE_F32, n)}, code, out, n);
}

void launch_fill(int32_t device, rvl_buffer* out, int64_t n, float value, int heavy) {
  std::vector<rvl_instruction> code = {ins(RVL_OP_CONST, RVL_DTYPE_F32), ins(RVL_OP_CONST, RVL_DTYPE_F32)};
  code[0].value.f = 0;
  code[1].value.f = value;
  // value + 0 + 0 + ... : a long chain the plugin cannot skip (it does not simplify programs)
  for (int i = 0; i < heavy; ++i) code.push_back(ins(RVL_OP_ADD, RVL_DTYPE_F32, static_cast<int32_t>(code.size()) - 1, 0));
  launch(device, {}, code, out, n);
}

void launch_matmul(int32_t device, rvl_buffer* a, rvl_buffer* b, rvl_buffer* c, int64_t m, int64_t n, int64_t k) {
  auto operand = [](rvl_buffer* buf, int64_t rows, int64_t cols) {
    rvl_operand o{};
    o.struct_size = sizeof o;
    o.buffer = buf;
    o.dtype = RVL_DTYPE_F64;
    o.view.struct_size = sizeof o.view;
    o.view.strides[0] = cols;
    o.view.strides[1] = 1;
    o.view.valid_hi[0] = rows;
    o.view.valid_hi[1] = cols;
    return o;
  };
  rvl_contraction ct{};
  ct.struct_size = sizeof ct;
  ct.dtype = RVL_DTYPE_F64;
  ct.m = m;
  ct.n = n;
  ct.k = k;
  ct.a = operand(a, m, k);
  ct.b = operand(b, k, n);
  ct.c = operand(c, m, n);
  ok(api().execute_contraction(device, nullptr, &ct), "execute_contraction on device " + std::to_string(device));
}

int64_t detail(int32_t device, const std::string& key) {
  rvl_device_properties p{};
  p.struct_size = sizeof p;
  ok(api().device_properties(device, &p), "device_properties");
  const std::string d = p.details, k = key + "=";
  const size_t at = d.find(k);
  if (at == std::string::npos || (at > 0 && d[at - 1] != ' ')) return -1;
  return std::strtoll(d.c_str() + at + k.size(), nullptr, 10);
}

}  // namespace mdtest
