// ABI behaviour: the table (sizes, versions, required/optional members), info and devices,
// error objects, buffer lifetime (double free reported, not crashed on), streams and events,
// forward-compatible struct sizes, concurrent use from several host threads.
#include "kernel_case.hpp"
#include "device_buffers.hpp"

#include <atomic>
#include <cstring>
#include <thread>

namespace rvl::conformance {
namespace {

const rvl_backend_api& api() { return *session().api; }
int32_t dev() { return session().device; }

void table_cases() {
  add_case("abi", "table/version", [](Measure&) {
    expect(api().abi_major == RVL_ABI_MAJOR, "abi_major is " + std::to_string(api().abi_major) +
                                                 ", expected " + std::to_string(RVL_ABI_MAJOR));
    expect(api().struct_size >= RVL_BACKEND_API_STRUCT_SIZE_1_0,
           "struct_size " + std::to_string(api().struct_size) + " is smaller than the v1.0 table");
    expect(api().abi_minor <= RVL_ABI_MINOR || api().struct_size >= sizeof(rvl_backend_api),
           "a newer minor version must not shrink the table");
  });
  add_case("abi", "table/required_members", [](Measure&) {
    std::string missing;
#define RVL_CONF_CHECK_(m) if (!RVL_CONF_HAS(api(), m)) missing += " " #m;
    RVL_REQUIRED_MEMBERS(RVL_CONF_CHECK_)
#undef RVL_CONF_CHECK_
    expect(missing.empty(), "required members missing or NULL:" + missing);
  });
  add_case("abi", "table/optional_members", [](Measure&) {
    // A NULL (or absent) optional member is legal: the host must not call it; cases that need
    // it are reported as skipped.
    if (!session().has_contraction()) throw Skip("execute_contraction is NULL (optional, allowed)");
  });
  add_case("abi", "info", [](Measure&) {
    rvl_backend_info info{};
    info.struct_size = sizeof info;
    check_ok(api().get_info(&info), "get_info");
    expect(info.name && *info.name, "get_info: name is NULL or empty");
    for (const char* c = info.name; *c; ++c)
      expect((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_',
             std::string("get_info: name \"") + info.name + "\" must be lower case [a-z0-9_]");
    expect(info.version != nullptr, "get_info: version is NULL");
    expect(info.description != nullptr, "get_info: description is NULL");
  });
  add_case("abi", "probe", [](Measure&) {
    rvl_probe_result r{};
    r.struct_size = sizeof r;
    check_ok(api().probe(&r), "probe");
    expect(r.device_count >= 0, "probe: negative device_count");
  });
  add_case("abi", "devices", [](Measure&) {
    int32_t n = -1;
    check_ok(api().device_count(&n), "device_count");
    expect(n >= 1, "device_count is " + std::to_string(n));
    for (int32_t d = 0; d < n; ++d) {
      rvl_device_properties p{};
      p.struct_size = sizeof p;
      check_ok(api().device_properties(d, &p), "device_properties");
      expect(std::memchr(p.name, 0, sizeof p.name) != nullptr, "device name is not NUL-terminated");
      expect(p.max_rank >= 1 && p.max_rank <= RVL_MAX_RANK, "max_rank out of 1..RVL_MAX_RANK");
      expect(p.dtypes != 0 && (p.dtypes >> RVL_DTYPE_COUNT_) == 0, "dtypes mask empty or unknown bits");
      expect(p.kind >= RVL_DEVICE_CPU && p.kind <= RVL_DEVICE_OTHER, "unknown device kind");
    }
    rvl_device_properties p{};
    p.struct_size = sizeof p;
    check_error(api().device_properties(n, &p), RVL_STATUS_INVALID_ARGUMENT, "device_properties(count)");
    check_error(api().device_properties(-1, &p), RVL_STATUS_INVALID_ARGUMENT, "device_properties(-1)");
    check_error(api().device_count(nullptr), RVL_STATUS_INVALID_ARGUMENT, "device_count(NULL)");
  });
}

void error_and_buffer_cases() {
  add_case("abi", "errors/owned_by_creator", [](Measure&) {
    rvl_error* e = api().buffer_free(nullptr);
    expect(e != nullptr, "buffer_free(NULL) succeeded");
    expect(api().error_code(e) == RVL_STATUS_INVALID_ARGUMENT, "buffer_free(NULL): wrong status");
    const char* m1 = api().error_message(e);
    const char* m2 = api().error_message(e);
    expect(m1 && m2 && std::strcmp(m1, m2) == 0, "error_message is not stable until error_destroy");
    api().error_destroy(e);  // handed back to the plugin that made it
    // Many errors alive at once, destroyed in reverse order.
    std::vector<rvl_error*> errs;
    for (int i = 0; i < 16; ++i) errs.push_back(api().buffer_free(nullptr));
    for (size_t i = errs.size(); i-- > 0;) {
      expect(errs[i] != nullptr, "buffer_free(NULL) succeeded");
      api().error_destroy(errs[i]);
    }
  });
  add_case("abi", "buffers/double_free_reported", [](Measure&) {
    rvl_buffer* b = nullptr;
    check_ok(api().buffer_allocate(dev(), 64, &b), "buffer_allocate");
    check_ok(api().buffer_free(b), "buffer_free");
    check_error(api().buffer_free(b), RVL_STATUS_INVALID_ARGUMENT, "second buffer_free");
    uint64_t size = 0;
    check_error(api().buffer_size(b, &size), RVL_STATUS_INVALID_ARGUMENT, "buffer_size after free");
  });
  add_case("abi", "buffers/foreign_pointer_reported", [](Measure&) {
    alignas(64) static unsigned char not_a_buffer[256] = {};
    check_error(api().buffer_free(reinterpret_cast<rvl_buffer*>(not_a_buffer)),
                RVL_STATUS_INVALID_ARGUMENT, "buffer_free of a pointer the plugin never returned");
  });
  add_case("abi", "buffers/roundtrip", [](Measure&) {
    RawBuffer b(1000), c(1000);
    uint64_t size = 0;
    check_ok(api().buffer_size(b.get(), &size), "buffer_size");
    expect(size == 1000, "buffer_size is " + std::to_string(size) + ", expected 1000");
    std::vector<uint8_t> src(1000), back(1000, 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 3);
    check_ok(api().buffer_write(nullptr, b.get(), 0, src.data(), 1000), "buffer_write");
    check_ok(api().buffer_write(nullptr, b.get(), 13, src.data(), 100), "buffer_write at offset");
    check_ok(api().buffer_copy(nullptr, b.get(), 10, c.get(), 990, 10), "buffer_copy");
    check_ok(api().buffer_read(nullptr, c.get(), 990, back.data(), 10), "buffer_read");
    for (int i = 0; i < 10; ++i)
      expect(back[i] == (i < 3 ? src[10 + i] : src[i - 3]), "buffer_copy/write moved wrong bytes");
    check_ok(api().buffer_read(nullptr, b.get(), 500, back.data(), 500), "buffer_read at offset");
    expect(std::memcmp(back.data(), src.data() + 500, 500) == 0, "buffer_read returned wrong bytes");
  });
  add_case("abi", "buffers/out_of_range", [](Measure&) {
    RawBuffer b(64);
    uint8_t tmp[128] = {};
    check_error(api().buffer_write(nullptr, b.get(), 60, tmp, 5), RVL_STATUS_INVALID_ARGUMENT, "write past end");
    check_error(api().buffer_read(nullptr, b.get(), 65, tmp, 0), RVL_STATUS_INVALID_ARGUMENT, "read at offset > size");
    check_error(api().buffer_read(nullptr, b.get(), UINT64_MAX, tmp, 2), RVL_STATUS_INVALID_ARGUMENT, "offset overflow");
    check_error(api().buffer_copy(nullptr, b.get(), 0, b.get(), 1, 64), RVL_STATUS_INVALID_ARGUMENT, "copy past end");
    check_error(api().buffer_write(nullptr, b.get(), 0, nullptr, 4), RVL_STATUS_INVALID_ARGUMENT, "write from NULL");
    check_error(api().buffer_allocate(dev(), 16, nullptr), RVL_STATUS_INVALID_ARGUMENT, "allocate into NULL");
  });
  add_case("abi", "buffers/zero_bytes", [](Measure&) {
    RawBuffer b(0);
    uint64_t size = 1;
    check_ok(api().buffer_size(b.get(), &size), "buffer_size");
    expect(size == 0, "zero-byte buffer reports a size");
  });
  // ABI 1.2's optional sharing members (DLPack in the core): a stable address, which on a CPU
  // device holds the buffer's bytes; a wrapped buffer that reads the memory it was given and
  // gives it back through release exactly once, never on error.
  add_case("abi", "buffers/address", [](Measure&) {
    if (!RVL_CONF_HAS(api(), buffer_address)) throw Skip("buffer_address is NULL (optional, since 1.2)");
    RawBuffer b(256);
    std::vector<uint8_t> src(256);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 5 + 1);
    check_ok(api().buffer_write(nullptr, b.get(), 0, src.data(), src.size()), "buffer_write");
    void *a1 = nullptr, *a2 = nullptr;
    check_ok(api().buffer_address(b.get(), &a1), "buffer_address");
    check_ok(api().buffer_address(b.get(), &a2), "buffer_address again");
    expect(a1 != nullptr && a1 == a2, "buffer_address is NULL or not stable");
    rvl_device_properties p{};
    p.struct_size = sizeof p;
    check_ok(api().device_properties(dev(), &p), "device_properties");
    if (p.kind == RVL_DEVICE_CPU) {
      check_ok(api().synchronize(dev()), "synchronize");
      expect(std::memcmp(a1, src.data(), src.size()) == 0, "a CPU buffer's address does not hold its bytes");
    }
    check_error(api().buffer_address(b.get(), nullptr), RVL_STATUS_INVALID_ARGUMENT, "buffer_address into NULL");
    check_error(api().buffer_address(nullptr, &a1), RVL_STATUS_INVALID_ARGUMENT, "buffer_address(NULL)");
  });
  add_case("abi", "buffers/wrap", [](Measure&) {
    if (!RVL_CONF_HAS(api(), buffer_wrap)) throw Skip("buffer_wrap is NULL (optional, since 1.2)");
    rvl_device_properties p{};
    p.struct_size = sizeof p;
    check_ok(api().device_properties(dev(), &p), "device_properties");
    if (p.kind != RVL_DEVICE_CPU) throw Skip("buffer_wrap of device memory is not exercised here");
    alignas(64) static uint8_t host[128];
    for (size_t i = 0; i < sizeof host; ++i) host[i] = uint8_t(i * 3 + 7);
    static int released = 0;
    released = 0;
    void (*release)(void*) = [](void* counter) { ++*static_cast<int*>(counter); };
    rvl_buffer* b = nullptr;
    check_ok(api().buffer_wrap(dev(), host, sizeof host, release, &released, &b), "buffer_wrap");
    uint64_t size = 0;
    check_ok(api().buffer_size(b, &size), "buffer_size");
    expect(size == sizeof host, "a wrapped buffer reports " + std::to_string(size) + " bytes");
    uint8_t back[64] = {};
    check_ok(api().buffer_read(nullptr, b, 32, back, sizeof back), "buffer_read");
    expect(std::memcmp(back, host + 32, sizeof back) == 0, "a wrapped buffer reads other bytes");
    expect(released == 0, "release called before the buffer was freed");
    check_ok(api().buffer_free(b), "buffer_free");
    expect(released == 1, "release called " + std::to_string(released) + " times, expected once");
    check_error(api().buffer_wrap(dev(), nullptr, 16, release, &released, &b), RVL_STATUS_INVALID_ARGUMENT,
                "buffer_wrap(NULL address)");
    check_error(api().buffer_wrap(dev(), host, 0, release, &released, &b), RVL_STATUS_INVALID_ARGUMENT,
                "buffer_wrap of 0 bytes");
    check_error(api().buffer_wrap(-1, host, 16, release, &released, &b), RVL_STATUS_INVALID_ARGUMENT,
                "buffer_wrap on device -1");
    check_error(api().buffer_wrap(dev(), host, 16, release, &released, nullptr), RVL_STATUS_INVALID_ARGUMENT,
                "buffer_wrap into NULL");
    expect(released == 1, "release called for a buffer_wrap that failed");
  });
}

void stream_and_struct_cases() {
  add_case("abi", "streams/events", [](Measure&) {
    rvl_stream *s1 = nullptr, *s2 = nullptr;
    check_ok(api().stream_create(dev(), &s1), "stream_create");
    check_ok(api().stream_create(dev(), &s2), "stream_create");
    RawBuffer b(256);
    std::vector<uint8_t> src(256, 0x3C), back(256, 0);
    check_ok(api().buffer_write(s1, b.get(), 0, src.data(), 256), "buffer_write on a stream");
    rvl_event* ev = nullptr;
    check_ok(api().event_record(s1, &ev), "event_record");
    check_ok(api().event_wait(s2, ev), "event_wait");
    check_ok(api().buffer_read(s2, b.get(), 0, back.data(), 256), "buffer_read on a stream");
    expect(back == src, "stream-ordered write/read returned wrong bytes");
    check_ok(api().event_synchronize(ev), "event_synchronize");
    check_ok(api().stream_synchronize(s1), "stream_synchronize");
    check_ok(api().event_destroy(ev), "event_destroy");
    check_error(api().event_destroy(ev), RVL_STATUS_INVALID_ARGUMENT, "second event_destroy");
    check_ok(api().stream_destroy(s1), "stream_destroy");
    check_ok(api().stream_destroy(s2), "stream_destroy");
    check_error(api().stream_destroy(s1), RVL_STATUS_INVALID_ARGUMENT, "second stream_destroy");
    check_ok(api().synchronize(dev()), "synchronize");
  });
  add_case("abi", "structs/larger_program_accepted", [](Measure& m) {
    // A newer host (minor bump) passes a larger rvl_program with appended members zeroed; a
    // v1.0 plugin reads only what it knows.
    struct Bigger {
      rvl_program p;
      uint64_t future[8];
    };
    const std::vector<int64_t> s{3, 5};
    ref::HostBuffer in = make_data(RVL_DTYPE_F32, 15, 1);
    GuardedBuffer gi(in), go(ref::HostBuffer(RVL_DTYPE_F32, 15));
    rvl_operand op{};
    op.struct_size = sizeof op;
    op.buffer = gi.get();
    op.dtype = RVL_DTYPE_F32;
    op.view = contiguous(s, gi.payload_offset());
    const rvl_instruction code[] = {load(RVL_DTYPE_F32, 0)};
    Bigger big{};
    big.p.struct_size = sizeof big;
    big.p.rank = 2;
    big.p.shape[0] = 3, big.p.shape[1] = 5;
    big.p.n_inputs = 1, big.p.inputs = &op;
    big.p.n_instructions = 1, big.p.instructions = code;
    big.p.output = op;
    big.p.output.buffer = go.get();
    big.p.output.view = contiguous(s, go.payload_offset());
    check_ok(api().execute_program(dev(), nullptr, &big.p), "execute_program with a larger struct");
    check_ok(api().synchronize(dev()), "synchronize");
    m.error = compare(go.read_checked("output"), in, 0, "output");
  });
  add_case("abi", "threads/concurrent_streams", [](Measure&) {
    // Several host threads, each with its own stream, run programs concurrently.
    std::atomic<int> bad{0};
    std::string first;
    std::mutex mu;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([t, &bad, &first, &mu] {
        try {
          rvl_stream* s = nullptr;
          check_ok(api().stream_create(dev(), &s), "stream_create");
          const int64_t n = 4096;
          RawBuffer in(n * 4), out(n * 4);
          std::vector<int32_t> src(n), back(n);
          for (int64_t i = 0; i < n; ++i) src[i] = int32_t(i * (t + 1));
          check_ok(api().buffer_write(s, in.get(), 0, src.data(), n * 4), "buffer_write");
          for (int rep = 0; rep < 10; ++rep) {
            rvl_operand oi{}, oo{};
            oi.struct_size = oo.struct_size = sizeof oi;
            oi.buffer = in.get(), oo.buffer = out.get();
            oi.dtype = oo.dtype = RVL_DTYPE_I32;
            oi.view = oo.view = contiguous({n});
            const rvl_instruction code[] = {load(RVL_DTYPE_I32, 0), const_i(RVL_DTYPE_I32, rep),
                                            ins(RVL_OP_ADD, RVL_DTYPE_I32, 0, 1)};
            rvl_program p{};
            p.struct_size = sizeof p;
            p.rank = 1, p.shape[0] = n;
            p.n_inputs = 1, p.inputs = &oi, p.n_instructions = 3, p.instructions = code;
            p.output = oo;
            check_ok(api().execute_program(dev(), s, &p), "execute_program");
            check_ok(api().buffer_read(s, out.get(), 0, back.data(), n * 4), "buffer_read");
            for (int64_t i = 0; i < n; ++i)
              if (back[i] != src[i] + rep) throw Failure("wrong result from a concurrent stream");
          }
          check_ok(api().stream_destroy(s), "stream_destroy");
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mu);
          if (bad++ == 0) first = e.what();
        }
      });
    for (std::thread& th : threads) th.join();
    if (bad) throw Failure(std::to_string(bad.load()) + " thread(s) failed: " + first);
  });
}

}  // namespace

void register_abi_cases() {
  table_cases();
  error_and_buffer_cases();
  stream_and_struct_cases();
}

}  // namespace rvl::conformance
