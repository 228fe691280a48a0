// ABI conformance suite for the tbb_cpu plugin: module setup (dlopen), helpers, and the tests of
// plain ABI behaviour (table, errors, buffers, streams, events, lifecycle).
#include "common.hpp"

#include <dlfcn.h>

#include <ravel/backend.hpp>
#include <ravel/validate.hpp>

#include <cstring>
#include <memory>

namespace abitest {
namespace {

const rvl_backend_api* g_api = nullptr;
void* g_handle = nullptr;

struct PluginFixture {
  PluginFixture() {
    g_handle = dlopen(RAVEL_TBB_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    BOOST_TEST_REQUIRE(g_handle != nullptr, "dlopen failed: " << dlerror());
    auto entry = reinterpret_cast<rvl_backend_entry_fn>(dlsym(g_handle, RVL_BACKEND_ENTRY_SYMBOL));
    BOOST_TEST_REQUIRE(entry != nullptr);
    g_api = entry();
    BOOST_TEST_REQUIRE(g_api != nullptr);
    // probe must work before initialize.
    rvl_probe_result pr{sizeof(rvl_probe_result), -1, -1, {}};
    ok(g_api->probe(&pr), "probe before initialize");
    BOOST_TEST_REQUIRE(pr.device_count == 1);
    ok(g_api->initialize(), "initialize");
  }
  ~PluginFixture() {
    if (g_api) g_api->shutdown();
    // Deliberately no dlclose: TBB worker threads may still be winding down.
  }
};

}  // namespace

const rvl_backend_api& api() { return *g_api; }

DevBuf::DevBuf(uint64_t bytes) : size_(bytes) { ok(api().buffer_allocate(0, bytes, &b_), "alloc"); }
DevBuf::DevBuf(const HostBuf& h) : DevBuf(h.bytes.size()) {
  ok(api().buffer_write(nullptr, b_, 0, h.bytes.data(), h.bytes.size()), "upload");
}
DevBuf::~DevBuf() {
  if (b_) {
    rvl_error* e = api().buffer_free(b_);
    if (e) api().error_destroy(e);
  }
}
HostBuf DevBuf::read(int32_t dtype) const {
  HostBuf h;
  h.dtype = dtype;
  h.bytes.resize(size_);
  ok(api().buffer_read(nullptr, b_, 0, h.bytes.data(), size_), "download");
  return h;
}

void ok(rvl_error* e, const std::string& ctx) {
  if (!e) return;
  const std::string msg = api().error_message(e);
  const int code = api().error_code(e);
  api().error_destroy(e);
  BOOST_FAIL(ctx << ": plugin error " << code << ": " << msg);
}

void expect_error(rvl_error* e, const std::string& keyword, rvl_status code) {
  BOOST_TEST_REQUIRE(e != nullptr, "expected an error containing '" << keyword << "'");
  const std::string msg = api().error_message(e);
  BOOST_TEST(api().error_code(e) == code, "status " << api().error_code(e) << ": " << msg);
  BOOST_TEST(msg.find(keyword) != std::string::npos, "message '" << msg << "' lacks '" << keyword << "'");
  api().error_destroy(e);
}

rvl_view contiguous(int rank, const int64_t* shape, int64_t offset) {
  rvl_view v{};
  v.struct_size = sizeof(rvl_view);
  v.offset = offset;
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    v.strides[d] = s;
    s *= shape[d];
    v.valid_lo[d] = 0;
    v.valid_hi[d] = shape[d];
  }
  return v;
}

rvl_view make_view(int rank, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                   int64_t offset) {
  rvl_view v = contiguous(rank, shape.data(), offset);
  for (int d = 0; d < rank; ++d) v.strides[d] = strides[d];
  return v;
}

rvl_operand operand(rvl_buffer* b, int32_t dtype, const rvl_view& v) {
  return rvl_operand{sizeof(rvl_operand), b, dtype, v};
}

rvl_instruction ins(int32_t op, int32_t dtype, int32_t s0, int32_t s1, int32_t s2, int32_t arg) {
  rvl_instruction i{};
  i.op = op;
  i.dtype = dtype;
  i.src[0] = s0; i.src[1] = s1; i.src[2] = s2;
  i.arg = arg;
  return i;
}
rvl_instruction load(int32_t dtype, int32_t arg) { return ins(RVL_OP_LOAD, dtype, -1, -1, -1, arg); }
rvl_instruction cnst_i(int32_t dtype, int64_t v) {
  rvl_instruction i = ins(RVL_OP_CONST, dtype);
  i.value.i = v;
  return i;
}
rvl_instruction cnst_f(int32_t dtype, double v) {
  rvl_instruction i = ins(RVL_OP_CONST, dtype);
  i.value.f = v;
  return i;
}

void ProgramCase::run(const std::string& ctx, double rel) const {
  std::vector<std::unique_ptr<DevBuf>> bufs;
  std::vector<rvl_operand> ops;
  std::vector<const HostBuf*> hosts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bufs.push_back(std::make_unique<DevBuf>(inputs[i]));
    ops.push_back(operand(bufs.back()->get(), inputs[i].dtype, views[i]));
    hosts.push_back(&inputs[i]);
  }
  DevBuf dout(out);
  rvl_program p{};
  p.struct_size = sizeof(rvl_program);
  p.rank = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) p.shape[d] = shape[d];
  p.n_inputs = static_cast<int32_t>(ops.size());
  p.inputs = ops.data();
  p.n_instructions = static_cast<int32_t>(code.size());
  p.instructions = code.data();
  p.reduce_op = reduce_op;
  p.reduce_axes = reduce_axes;
  p.output = operand(dout.get(), out.dtype, out_view);
  ok(api().execute_program(0, nullptr, &p), ctx);
  HostBuf want = out;
  rvl::ref::run_program(p, hosts, want);
  check_same(dout.read(out.dtype), want, ctx, rel);
}

}  // namespace abitest

using namespace abitest;

BOOST_TEST_GLOBAL_FIXTURE(PluginFixture);

BOOST_AUTO_TEST_SUITE(abi_behaviour)

BOOST_AUTO_TEST_CASE(table_versions_and_members) {
  const rvl_backend_api& a = api();
  BOOST_TEST(a.struct_size == sizeof(rvl_backend_api));
  BOOST_TEST(a.abi_major == RVL_ABI_MAJOR);
  BOOST_TEST(a.abi_minor <= RVL_ABI_MINOR);
  const void* members[] = {
      (void*)a.error_code, (void*)a.error_message, (void*)a.error_destroy, (void*)a.probe,
      (void*)a.initialize, (void*)a.shutdown, (void*)a.get_info, (void*)a.device_count,
      (void*)a.device_properties, (void*)a.buffer_allocate, (void*)a.buffer_free,
      (void*)a.buffer_size, (void*)a.buffer_write, (void*)a.buffer_read, (void*)a.buffer_copy,
      (void*)a.stream_create, (void*)a.stream_destroy, (void*)a.stream_synchronize,
      (void*)a.event_record, (void*)a.event_wait, (void*)a.event_synchronize,
      (void*)a.event_destroy, (void*)a.execute_program, (void*)a.execute_contraction,
      (void*)a.synchronize, (void*)a.buffer_address, (void*)a.buffer_wrap,
      (void*)a.buffer_copy_peer, (void*)a.all_reduce, (void*)a.reduce_scatter,
      (void*)a.all_gather};  // the optional members of 1.0, 1.2, 1.5, 1.9 and 1.12 too
  for (const void* m : members) BOOST_TEST(m != nullptr);
  BOOST_TEST(a.struct_size >= RVL_BACKEND_API_STRUCT_SIZE_1_12);
  BOOST_TEST(a.abi_minor == 12u);  // built against 1.12: reduce_scatter and all_gather came after the chains
}

BOOST_AUTO_TEST_CASE(info_and_devices) {
  rvl_backend_info info{sizeof(rvl_backend_info), nullptr, nullptr, nullptr};
  ok(api().get_info(&info));
  BOOST_TEST(std::string(info.name) == "tbb_cpu");
  BOOST_TEST(info.version != nullptr);
  int32_t n = 0;
  ok(api().device_count(&n));
  BOOST_TEST(n == 1);
  rvl_device_properties p{};
  p.struct_size = sizeof(p);
  ok(api().device_properties(0, &p));
  BOOST_TEST(std::string(p.name).find("CPU") != std::string::npos);
  BOOST_TEST(p.kind == RVL_DEVICE_CPU);
  BOOST_TEST(p.compute_units >= 1);
  BOOST_TEST(p.memory_bytes > 0u);
  BOOST_TEST(p.dtypes == 0x1FFFu);  // every dtype of ABI 1.7 (bits 0..12)
  BOOST_TEST(p.max_rank == RVL_MAX_RANK);
  expect_error(api().device_properties(1, &p), "device 1");
  p.struct_size = 8;
  expect_error(api().device_properties(0, &p), "struct_size");
  rvl_probe_result pr{4, 0, 0, {}};
  expect_error(api().probe(&pr), "struct_size");
}

// A host built against ABI 1.0 passes the 1.0 struct sizes: the 1.1 plugin must accept them and
// write nothing past them (guard bytes behind the 1.0 part stay as they were).
BOOST_AUTO_TEST_CASE(host_built_against_1_0_is_served) {
  constexpr unsigned char kGuard = 0xA5;
  {
    rvl_device_properties p;
    std::memset(&p, kGuard, sizeof p);
    p.struct_size = RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_0;
    ok(api().device_properties(0, &p));
    BOOST_TEST(std::string(p.name).find("CPU") != std::string::npos);
    BOOST_TEST(p.max_rank == RVL_MAX_RANK);
    const auto* bytes = reinterpret_cast<const unsigned char*>(&p);
    for (size_t i = RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_0; i < sizeof p; ++i)
      BOOST_TEST_REQUIRE(int(bytes[i]) == int(kGuard), "byte " << i << " past the 1.0 struct was written");
  }
  {
    rvl_probe_result r;
    std::memset(&r, kGuard, sizeof r);
    r.struct_size = RVL_PROBE_RESULT_STRUCT_SIZE_1_0;
    ok(api().probe(&r));
    BOOST_TEST(r.device_count == 1);
    const auto* bytes = reinterpret_cast<const unsigned char*>(&r);
    for (size_t i = RVL_PROBE_RESULT_STRUCT_SIZE_1_0; i < sizeof r; ++i)
      BOOST_TEST_REQUIRE(int(bytes[i]) == int(kGuard), "byte " << i << " past the 1.0 struct was written");
  }
  // And with the 1.1 sizes the 1.1 members are filled.
  rvl_device_properties p{};
  p.struct_size = sizeof p;
  ok(api().device_properties(0, &p));
  BOOST_TEST(std::string(p.arch) == "x86-64");
  BOOST_TEST(p.warp_size == 1);
}

BOOST_AUTO_TEST_CASE(errors_carry_code_and_message) {
  rvl_error* e = api().buffer_free(nullptr);
  BOOST_TEST_REQUIRE(e != nullptr);
  BOOST_TEST(api().error_code(e) == RVL_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(std::strlen(api().error_message(e)) > 0u);
  api().error_destroy(e);
}

// ABI 1.7: tbb_cpu states every dtype, f16 and bf16 computed in f32 (Note [Halves in f32] in
// half_kernels.cpp): 1.5 + 1.5 in f16 is 3 (binary16 0x3E00 + 0x3E00 = 0x4200). A plugin that
// does not state a dtype answers UNSUPPORTED "dtype ..." for it: the validator with the 1.0-1.6
// mask (what a plugin that passes none gets) says so for the same, well-formed, kernel, and
// INVALID_ARGUMENT still comes first for a malformed one.
BOOST_AUTO_TEST_CASE(f16_kernels_and_the_validators_dtype_mask) {
  rvl_device_properties props{};
  props.struct_size = sizeof props;
  ok(api().device_properties(0, &props), "device_properties");
  BOOST_TEST(props.dtypes == RVL_DTYPES_ALL);
  const int64_t shape[1] = {4};
  HostBuf h;
  h.dtype = RVL_DTYPE_F16;
  h.bytes.resize(8);
  for (int i = 0; i < 4; ++i) h.bytes[2 * i] = 0x00, h.bytes[2 * i + 1] = 0x3E;  // 1.5, little-endian
  DevBuf in(h), out(8);
  rvl_instruction code[2] = {load(RVL_DTYPE_F16, 0), ins(RVL_OP_ADD, RVL_DTYPE_F16, 0, 0)};
  rvl_operand src = operand(in.get(), RVL_DTYPE_F16, contiguous(1, shape));
  rvl_program p{};
  p.struct_size = sizeof(rvl_program);
  p.rank = 1;
  p.shape[0] = 4;
  p.n_inputs = 1;
  p.inputs = &src;
  p.n_instructions = 2;
  p.instructions = code;
  p.output = operand(out.get(), RVL_DTYPE_F16, contiguous(1, shape));
  ok(api().execute_program(0, nullptr, &p), "f16 add");
  const HostBuf r = out.read(RVL_DTYPE_F16);
  for (int i = 0; i < 4; ++i) BOOST_TEST((r.bytes[2 * i] == 0x00 && r.bytes[2 * i + 1] == 0x42));
  std::byte mem[8] = {};
  const rvl::validate::BufferLookup lookup = [&](const rvl_buffer*, const char*) {
    return rvl::validate::BufferRef{mem, sizeof mem};
  };
  try {
    (void)rvl::validate::validate_program(&p, lookup);
    BOOST_ERROR("the 1.0-1.6 mask accepted an f16 kernel");
  } catch (const std::exception& ex) {
    const auto* e = dynamic_cast<const rvl::Error*>(&ex);
    BOOST_TEST_REQUIRE(e != nullptr);
    BOOST_TEST(e->code() == RVL_STATUS_UNSUPPORTED);
    BOOST_TEST(std::string(e->what()).rfind("dtype f16", 0) == 0u, e->what());
  }
  p.shape[0] = 5;  // now the output view leaves its buffer: malformed before unsupported
  try {
    (void)rvl::validate::validate_program(&p, lookup);
    BOOST_ERROR("a malformed kernel was accepted");
  } catch (const std::exception& ex) {
    const auto* e = dynamic_cast<const rvl::Error*>(&ex);
    BOOST_TEST_REQUIRE(e != nullptr);
    BOOST_TEST(e->code() == RVL_STATUS_INVALID_ARGUMENT);
  }
}

BOOST_AUTO_TEST_CASE(buffers) {
  rvl_buffer* b = nullptr;
  ok(api().buffer_allocate(0, 64, &b));
  uint64_t size = 0;
  ok(api().buffer_size(b, &size));
  BOOST_TEST(size == 64u);
  uint8_t data[64], back[64];
  for (int i = 0; i < 64; ++i) data[i] = static_cast<uint8_t>(i * 3);
  ok(api().buffer_write(nullptr, b, 0, data, 64));
  ok(api().buffer_copy(nullptr, b, 0, b, 8, 32));  // overlapping copy inside one buffer
  ok(api().buffer_read(nullptr, b, 0, back, 64));
  for (int i = 0; i < 64; ++i) BOOST_TEST(back[i] == (i >= 8 && i < 40 ? data[i - 8] : data[i]));
  expect_error(api().buffer_write(nullptr, b, 60, data, 8), "outside");
  expect_error(api().buffer_read(nullptr, b, 65, back, 0), "outside");
  expect_error(api().buffer_read(nullptr, b, UINT64_MAX, back, 2), "outside");
  expect_error(api().buffer_read(nullptr, b, 1, back, UINT64_MAX), "outside");
  expect_error(api().buffer_copy(nullptr, b, 0, b, 40, 32), "outside");
  expect_error(api().buffer_copy(nullptr, b, 33, b, 0, 32), "outside");
  ok(api().buffer_read(nullptr, b, 64, back, 0));  // empty range at the end is fine
  rvl_buffer* z = nullptr;
  ok(api().buffer_allocate(0, 0, &z));
  ok(api().buffer_free(z));
  ok(api().buffer_free(b));
  expect_error(api().buffer_free(b), "not a live buffer");  // double free: error, no crash
  expect_error(api().buffer_size(b, &size), "not a live buffer");
  expect_error(api().buffer_read(nullptr, b, 0, back, 1), "not a live buffer");
  int dummy = 0;
  expect_error(api().buffer_free(reinterpret_cast<rvl_buffer*>(&dummy)), "not a live buffer");
  expect_error(api().buffer_allocate(1, 8, &b), "device");
}

BOOST_AUTO_TEST_CASE(streams_and_events) {
  rvl_stream* s = nullptr;
  ok(api().stream_create(0, &s));
  DevBuf buf(16);
  uint32_t v[4] = {1, 2, 3, 4}, w[4] = {};
  ok(api().buffer_write(s, buf.get(), 0, v, 16));
  rvl_event* e = nullptr;
  ok(api().event_record(s, &e));
  ok(api().event_wait(nullptr, e));
  ok(api().event_synchronize(e));
  ok(api().stream_synchronize(s));
  ok(api().buffer_read(s, buf.get(), 0, w, 16));
  BOOST_TEST(w[3] == 4u);
  ok(api().synchronize(0));
  ok(api().event_destroy(e));
  expect_error(api().event_destroy(e), "not a live event");
  expect_error(api().event_synchronize(e), "not a live event");
  ok(api().stream_destroy(s));
  expect_error(api().stream_destroy(s), "not a live stream");
  expect_error(api().buffer_write(s, buf.get(), 0, v, 16), "stream");
  expect_error(api().stream_synchronize(s), "stream");
}

BOOST_AUTO_TEST_CASE(shutdown_frees_and_reinitialize) {
  rvl_buffer* b = nullptr;
  rvl_stream* s = nullptr;
  ok(api().buffer_allocate(0, 1024, &b));
  ok(api().stream_create(0, &s));
  api().shutdown();  // frees b and s (ASan would report a leak otherwise)
  rvl_probe_result pr{sizeof(pr), 0, 0, {}};
  ok(api().probe(&pr));
  BOOST_TEST(pr.device_count == 1);
  rvl_buffer* b2 = nullptr;
  expect_error(api().buffer_allocate(0, 8, &b2), "not initialized");
  ok(api().initialize());
  expect_error(api().buffer_free(b), "not a live buffer");
  expect_error(api().stream_destroy(s), "not a live stream");
}

BOOST_AUTO_TEST_SUITE_END()

// ABI 1.6 rvl_device_properties.ops: a host built against 1.4/1.5 passes the 1.4 size (1.5 added
// no member to the struct) and gets nothing written past it; a 1.6 host gets every row.
BOOST_AUTO_TEST_CASE(op_mask_respects_the_hosts_struct_size) {
  constexpr unsigned char kGuard = 0x5A;
  rvl_device_properties p;
  std::memset(&p, kGuard, sizeof p);
  p.struct_size = RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_4;
  ok(api().device_properties(0, &p));
  BOOST_TEST(p.reduce_ops != 0u);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&p);
  for (size_t i = RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_4; i < sizeof p; ++i)
    BOOST_TEST_REQUIRE(int(bytes[i]) == int(kGuard), "byte " << i << " past the 1.4 struct was written");
  rvl_device_properties q{};
  q.struct_size = sizeof q;
  ok(api().device_properties(0, &q));
  BOOST_TEST(q.ops == RVL_OPS_ALL);
  BOOST_TEST((q.ops & RVL_OPS_1_0) == RVL_OPS_1_0);
}

// ABI 1.8 (im2col block) rvl_device_properties.contraction_axes: a 1.6 host passes the 1.6 size
// and gets nothing written past it; a 1.8 host learns that tbb_cpu takes groups of up to
// RVL_MAX_RANK axes (gemm_pack_window.cpp).
BOOST_AUTO_TEST_CASE(contraction_axes_respects_the_hosts_struct_size) {
  constexpr unsigned char kGuard = 0x5A;
  rvl_device_properties p;
  std::memset(&p, kGuard, sizeof p);
  p.struct_size = RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_6;
  ok(api().device_properties(0, &p));
  const auto* bytes = reinterpret_cast<const unsigned char*>(&p);
  for (size_t i = RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_6; i < sizeof p; ++i)
    BOOST_TEST_REQUIRE(int(bytes[i]) == int(kGuard), "byte " << i << " past the 1.6 struct was written");
  rvl_device_properties q{};
  q.struct_size = sizeof q;
  ok(api().device_properties(0, &q));
  BOOST_TEST(q.contraction_axes == RVL_MAX_RANK);
}
