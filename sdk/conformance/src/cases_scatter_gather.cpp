// Reduce-scatter and all-gather across devices of one plugin (optional since ABI 1.12; backend.h
// has the contract, docs/abi.md §20): against the reference fold of each chunk in the order the
// ABI fixes (so every dtype compares bit for bit) and against a host concatenation, over the
// device under test and up to three others (n = 1 to 4), every dtype the devices run, every op,
// counts 0, 1, odd and past a few blocks; bytes past the elements untouched, inputs unmodified;
// ordered after and before kernels on every device without host synchronisation; explicit
// streams; bad arguments (aliasing included, by handle and by memory: neither has an in-place
// form) refused with nothing written. Every case is skipped, saying why, when the plugin lacks the member or has one device.
#include "collective_reference.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace rvl::conformance {
// Named, not anonymous: the runner is a unity build (cases_all_reduce.cpp has helpers of these names).
namespace scatter_gather_cases {

using all_reduce_cases::common_dtypes;
using all_reduce_cases::fold;
using all_reduce_cases::op_name;
using all_reduce_cases::with_tail;

const rvl_backend_api& api() { return *session().api; }

enum class Kind { ReduceScatter, AllGather };

const char* name(Kind k) { return k == Kind::ReduceScatter ? "reduce_scatter" : "all_gather"; }

// The devices of a call: the device under test first, then up to three others.
std::vector<int32_t> mesh(Kind kind) {
  const bool has = kind == Kind::ReduceScatter ? RVL_CONF_HAS(api(), reduce_scatter) : RVL_CONF_HAS(api(), all_gather);
  if (!has) throw Skip(std::string(name(kind)) + " is NULL or beyond the table (optional since ABI 1.12)");
  std::vector<int32_t> out{session().device};
  for (int32_t d : other_devices(3, std::string(kind == Kind::AllGather ? "an " : "a ") + name(kind))) out.push_back(d);
  return out;
}

rvl_error* call(Kind kind, int32_t n, rvl_stream* const* streams, const rvl_buffer* const* in, rvl_buffer* const* out,
                uint64_t count, int32_t dt, int32_t op) {
  return kind == Kind::ReduceScatter ? api().reduce_scatter(n, streams, in, out, count, dt, op)
                                     : api().all_gather(n, streams, in, out, count, dt);
}

// Elements [lo, lo + len) of b.
ref::HostBuffer slice(const ref::HostBuffer& b, int64_t lo, int64_t len) {
  const size_t size = ref::element_size(b.dtype);
  ref::HostBuffer out;
  out.dtype = b.dtype;
  out.bytes.assign(b.bytes.begin() + static_cast<std::ptrdiff_t>(lo * size),
                   b.bytes.begin() + static_cast<std::ptrdiff_t>((lo + len) * size));
  return out;
}

// What output k must hold: chunk k of every input folded (reduce_scatter) or every input in
// device order (all_gather).
std::vector<uint8_t> expected(Kind kind, int32_t op, const std::vector<ref::HostBuffer>& parts, size_t k, int64_t count) {
  if (kind == Kind::AllGather) {
    std::vector<uint8_t> all;
    for (const auto& p : parts) all.insert(all.end(), p.bytes.begin(), p.bytes.end());
    return all;
  }
  std::vector<ref::HostBuffer> chunks;
  for (const auto& p : parts) chunks.push_back(slice(p, static_cast<int64_t>(k) * count, count));
  return fold(op, chunks).bytes;
}

// One call over the first n devices, compared with the reference; throws Failure naming `what`.
void check_one(Kind kind, const std::vector<int32_t>& devices, size_t n, int32_t dt, int32_t op, int64_t count,
               uint64_t& seed) {
  const std::string what = std::string(name(kind)) + (kind == Kind::ReduceScatter ? std::string(" (") + op_name(op) + ")" : "") +
                           " of " + std::to_string(count) + " " + dtype_str(dt) + " per chunk over " + std::to_string(n) +
                           " devices";
  const size_t size = ref::element_size(dt);
  const int64_t in_count = kind == Kind::ReduceScatter ? count * static_cast<int64_t>(n) : count;
  const int64_t out_count = kind == Kind::AllGather ? count * static_cast<int64_t>(n) : count;
  const size_t in_bytes = static_cast<size_t>(in_count) * size, out_bytes = static_cast<size_t>(out_count) * size;
  std::vector<ref::HostBuffer> parts;
  std::vector<std::unique_ptr<DeviceBuffer>> in, out;
  std::vector<const rvl_buffer*> in_h;
  std::vector<rvl_buffer*> out_h;
  for (size_t k = 0; k < n; ++k) {
    // Small values: products of four stay in range for floats; ints wrap alike anyway.
    parts.push_back(make_data(dt, in_count, seed++, op == RVL_ALL_REDUCE_PROD ? Data::Small : Data::Mixed));
    in.push_back(std::make_unique<DeviceBuffer>(devices[k], in_bytes + 16));
    out.push_back(std::make_unique<DeviceBuffer>(devices[k], out_bytes + 16));
    in.back()->write(with_tail(parts.back().bytes, 16, 0xA5));
    out.back()->write(std::vector<uint8_t>(out_bytes + 16, 0x5A));
    in_h.push_back(in.back()->get());
    out_h.push_back(out.back()->get());
  }
  check_ok(call(kind, static_cast<int32_t>(n), nullptr, in_h.data(), out_h.data(), static_cast<uint64_t>(count), dt, op), what);
  for (size_t k = 0; k < n; ++k) {
    const std::vector<uint8_t> want = with_tail(expected(kind, op, parts, k, count), 16, 0x5A);
    const std::vector<uint8_t> got = out[k]->read();
    if (got != want) {
      size_t i = 0;
      while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
      throw Failure(what + ": device " + std::to_string(devices[k]) + "'s output differs at byte " + std::to_string(i) +
                    (i >= out_bytes ? " (past the elements: written beyond the output)" : ""));
    }
    expect(in[k]->read() == with_tail(parts[k].bytes, 16, 0xA5), what + ": an input was modified");
  }
}

// One dtype, every op and size over 1..n devices; a case per dtype so that a slow device
// compiler's CI can run one dtype per family (scripts/check-hip.sh) and the rest with --full.
void every_op_and_size(Kind kind, int32_t dt) {
  const std::vector<int32_t> devices = mesh(kind);
  if (!((common_dtypes(devices) >> dt) & 1u)) throw Skip("dtype " + dtype_str(dt) + " is not run by every device of the mesh");
  uint64_t seed = 100 + static_cast<uint64_t>(dt) * 1000;
  const int32_t last_op = kind == Kind::ReduceScatter ? RVL_ALL_REDUCE_MIN : RVL_ALL_REDUCE_SUM;
  for (size_t n = 1; n <= devices.size(); ++n)
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{3 * 4096 + 13}})
      for (int32_t op = RVL_ALL_REDUCE_SUM; op <= last_op; ++op) {
        if (count > 7 && n != devices.size() && dt != RVL_DTYPE_F32) continue;  // large: once per dtype
        check_one(kind, devices, n, dt, kind == Kind::ReduceScatter ? op : 0, count, seed);
      }
}

// Kernels write every input, the collective follows, kernels overwrite every input: every output
// holds what the first kernels wrote (8 MiB per output: a plugin's bulk path).
void ordered(Kind kind) {
  const std::vector<int32_t> devices = mesh(kind);
  const auto n = static_cast<int64_t>(devices.size());
  constexpr int64_t count = 1 << 21;
  const int64_t in_count = kind == Kind::ReduceScatter ? count * n : count;
  const int64_t out_count = kind == Kind::AllGather ? count * n : count;
  std::vector<std::unique_ptr<DeviceBuffer>> in, out;
  std::vector<const rvl_buffer*> in_h;
  std::vector<rvl_buffer*> out_h;
  for (int32_t d : devices) {
    in.push_back(std::make_unique<DeviceBuffer>(d, in_count * 4));
    out.push_back(std::make_unique<DeviceBuffer>(d, out_count * 4));
    in_h.push_back(in.back()->get());
    out_h.push_back(out.back()->get());
  }
  for (int round = 1; round <= 2; ++round) {
    float sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      fill_f32(devices[k], in[k]->get(), in_count, static_cast<float>(round + k));
      sum += static_cast<float>(round + k);
    }
    check_ok(call(kind, static_cast<int32_t>(n), nullptr, in_h.data(), out_h.data(), count, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM),
             name(kind));
    for (int64_t k = 0; k < n; ++k) fill_f32(devices[k], in[k]->get(), in_count, -1.0f);
    for (int64_t k = 0; k < n; ++k) {
      const std::vector<uint8_t> got = out[k]->read();
      for (int64_t j = 0; j < out_count / count; ++j) {
        const float want = kind == Kind::ReduceScatter ? sum : static_cast<float>(round + j);
        const float a = f32_at(got, j * count), b = f32_at(got, (j + 1) * count - 1);
        expect(a == want && b == want, std::string(name(kind)) + ": device " + std::to_string(devices[k]) + " read " +
                                           std::to_string(b) + ", expected " + std::to_string(want) +
                                           " (not ordered after the kernels, or a later kernel overwrote an input "
                                           "before it was read)");
      }
    }
  }
}

void on_streams(Kind kind) {
  const std::vector<int32_t> devices = mesh(kind);
  std::vector<rvl_stream*> streams(2, nullptr);
  check_ok(api().stream_create(devices[0], &streams[0]), "stream_create");
  check_ok(api().stream_create(devices[1], &streams[1]), "stream_create");
  const uint64_t in_bytes = kind == Kind::ReduceScatter ? 128 : 64, out_bytes = kind == Kind::AllGather ? 128 : 64;
  DeviceBuffer a(devices[0], in_bytes), b(devices[1], in_bytes), oa(devices[0], out_bytes), ob(devices[1], out_bytes);
  a.write(std::vector<uint8_t>(in_bytes, 1));
  b.write(std::vector<uint8_t>(in_bytes, 2));
  const rvl_buffer* in[2] = {a.get(), b.get()};
  rvl_buffer* out[2] = {oa.get(), ob.get()};
  check_ok(call(kind, 2, streams.data(), in, out, 64, RVL_DTYPE_U8, RVL_ALL_REDUCE_SUM), "on explicit streams");
  check_ok(api().stream_synchronize(streams[1]), "stream_synchronize");
  std::vector<uint8_t> want(64, 3);
  if (kind == Kind::AllGather) {
    want.assign(64, 1);
    want.insert(want.end(), 64, 2);
  }
  expect(ob.read() == want, std::string(name(kind)) + " on explicit streams");
  std::swap(streams[0], streams[1]);
  check_error(call(kind, 2, streams.data(), in, out, 64, RVL_DTYPE_U8, RVL_ALL_REDUCE_SUM), RVL_STATUS_INVALID_ARGUMENT,
              std::string(name(kind)) + " with the streams swapped");
  for (rvl_stream* s : streams) check_ok(api().stream_destroy(s), "stream_destroy");
}

void bad_arguments(Kind kind) {
  const std::vector<int32_t> devices = mesh(kind);
  int32_t count = 0;
  check_ok(api().device_count(&count), "device_count");
  // 16 f32 per chunk, two devices: inputs of 32 (reduce_scatter) or 16, outputs of 16 or 32.
  const uint64_t in_bytes = kind == Kind::ReduceScatter ? 128 : 64, out_bytes = kind == Kind::AllGather ? 128 : 64;
  const uint64_t big = 128;  // room for either side, for the aliasing cases
  DeviceBuffer a(devices[0], in_bytes), b(devices[1], in_bytes), oa(devices[0], out_bytes), ob(devices[1], out_bytes),
      a2(devices[0], in_bytes), wa(devices[0], big), wb(devices[1], big);
  for (DeviceBuffer* o : {&oa, &ob}) o->write(std::vector<uint8_t>(out_bytes, 0x77));
  for (DeviceBuffer* w : {&wa, &wb}) w->write(std::vector<uint8_t>(big, 0x66));
  const rvl_buffer* in[2] = {a.get(), b.get()};
  rvl_buffer* out[2] = {oa.get(), ob.get()};
  const auto bad = [&](int32_t n, const rvl_buffer* const* i, rvl_buffer* const* o, uint64_t c, int32_t dt, int32_t op,
                       const std::string& what) {
    check_error(call(kind, n, nullptr, i, o, c, dt, op), RVL_STATUS_INVALID_ARGUMENT, std::string(name(kind)) + ": " + what);
  };
  bad(0, in, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "n = 0");
  bad(-1, in, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "n = -1");
  bad(count + 1, in, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "more buffers than devices");
  bad(2, nullptr, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a NULL inputs array");
  bad(2, in, nullptr, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a NULL outputs array");
  if (kind == Kind::ReduceScatter) {
    bad(2, in, out, 16, RVL_DTYPE_F32, 0, "op 0");
    bad(2, in, out, 16, RVL_DTYPE_F32, 5, "op 5");
  }
  bad(2, in, out, 16, -1, RVL_ALL_REDUCE_SUM, "dtype -1");
  bad(2, in, out, 16, RVL_DTYPE_COUNT_, RVL_ALL_REDUCE_SUM, "an unknown dtype");
  bad(2, in, out, 17, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "more elements than the buffers hold");
  // The n-fold side too small while the other side fits: 16 elements per chunk in a buffer of 16.
  {
    DeviceBuffer s0(devices[0], 64), s1(devices[1], 64);
    const rvl_buffer* small_in[2] = {s0.get(), s1.get()};
    rvl_buffer* small_out[2] = {s0.get(), s1.get()};
    if (kind == Kind::ReduceScatter) bad(2, small_in, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "inputs of count, not n * count");
    else bad(2, in, small_out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "outputs of count, not n * count");
  }
  bad(2, in, out, UINT64_MAX / 4, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a count whose bytes overflow");
  const rvl_buffer* with_null[2] = {a.get(), nullptr};
  bad(2, with_null, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a NULL input buffer");
  rvl_buffer* out_null[2] = {oa.get(), nullptr};
  bad(2, in, out_null, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a NULL output buffer");
  const rvl_buffer* twice[2] = {a.get(), a2.get()};
  bad(2, twice, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "two inputs on one device");
  rvl_buffer* crossed[2] = {ob.get(), oa.get()};
  bad(2, in, crossed, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "an output on another device than its input");
  alignas(64) static unsigned char foreign[256];  // not a buffer of this plugin (another's, or none)
  const rvl_buffer* alien[2] = {a.get(), reinterpret_cast<const rvl_buffer*>(foreign)};
  bad(2, alien, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a buffer this plugin does not know");
  // No in-place form: output k == input k (buffers large enough for both roles) is refused.
  const rvl_buffer* w_in[2] = {wa.get(), wb.get()};
  rvl_buffer* w_out[2] = {wa.get(), wb.get()};
  bad(2, w_in, w_out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "outputs that are the inputs (no in-place form)");
  rvl_buffer* half_in_place[2] = {oa.get(), wb.get()};
  bad(2, w_in, half_in_place, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "one output that is its input");
  // No refused call wrote anything.
  expect(oa.read() == std::vector<uint8_t>(out_bytes, 0x77) && ob.read() == std::vector<uint8_t>(out_bytes, 0x77),
         std::string("a refused ") + name(kind) + " wrote an output");
  expect(wa.read() == std::vector<uint8_t>(big, 0x66) && wb.read() == std::vector<uint8_t>(big, 0x66),
         std::string("a refused ") + name(kind) + " wrote into a buffer");
}

// Two buffers over the same bytes (buffer_wrap of one host block on two devices): an output that
// overlaps an input by memory, not by handle, is refused too (the ABI forbids sharing a byte).
void overlapping_wrapped_buffers(Kind kind) {
  const std::vector<int32_t> devices = mesh(kind);
  if (!RVL_CONF_HAS(api(), buffer_wrap)) throw Skip("buffer_wrap is NULL (optional since ABI 1.2)");
  // One host block wrapped on two devices is what only host devices can do (a GPU plugin wraps
  // its own device's pointers); the validator's byte check is the same code on every plugin.
  rvl_device_properties p{};
  p.struct_size = sizeof p;
  check_ok(api().device_properties(devices[0], &p), "device_properties");
  if (p.kind != RVL_DEVICE_CPU) throw Skip("buffer_wrap of one host block on two devices is not exercised here (not a CPU device)");
  alignas(64) static unsigned char block[512];
  std::fill(block, block + sizeof block, static_cast<unsigned char>(0x33));
  rvl_buffer* shared0 = nullptr;
  rvl_buffer* shared1 = nullptr;
  void (*release)(void*) = [](void*) {};  // the block is static: nothing to release
  check_ok(api().buffer_wrap(devices[0], block, sizeof block, release, nullptr, &shared0), "buffer_wrap on the first device");
  check_ok(api().buffer_wrap(devices[1], block + 32, 256, release, nullptr, &shared1), "buffer_wrap on the second device");
  DeviceBuffer out0(devices[0], 256);
  // Input 0 is the block, output 1 starts 32 bytes into it, inside the 64 or 128 bytes the call
  // reads of input 0 (another device, another handle).
  const rvl_buffer* in[2] = {shared0, nullptr};
  DeviceBuffer in1(devices[1], 256);
  in[1] = in1.get();
  rvl_buffer* out[2] = {out0.get(), shared1};
  check_error(call(kind, 2, nullptr, in, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM), RVL_STATUS_INVALID_ARGUMENT,
              std::string(name(kind)) + ": an output sharing bytes with another device's input");
  bool untouched = true;
  for (unsigned char c : block) untouched = untouched && c == 0x33;
  expect(untouched, std::string("a refused ") + name(kind) + " wrote into a wrapped buffer");
  check_ok(api().buffer_free(shared1), "buffer_free");
  check_ok(api().buffer_free(shared0), "buffer_free");
}

void register_cases() {
  for (Kind kind : {Kind::ReduceScatter, Kind::AllGather}) {
    for (int32_t dt = 0; dt < RVL_DTYPE_COUNT_; ++dt)
      add_case(name(kind), (kind == Kind::ReduceScatter ? "every_op_and_size/" : "every_size/") + dtype_str(dt),
               [kind, dt](Measure&) { every_op_and_size(kind, dt); });
    add_case(name(kind), "ordered_without_host_synchronisation", [kind](Measure&) { ordered(kind); });
    add_case(name(kind), "streams_of_each_device", [kind](Measure&) { on_streams(kind); });
    add_case(name(kind), "bad_arguments", [kind](Measure&) { bad_arguments(kind); });
    add_case(name(kind), "overlapping_wrapped_buffers", [kind](Measure&) { overlapping_wrapped_buffers(kind); });
  }
}

}  // namespace scatter_gather_cases

void register_scatter_gather_cases() { scatter_gather_cases::register_cases(); }

}  // namespace rvl::conformance
