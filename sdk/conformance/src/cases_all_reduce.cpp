// All-reduce across devices of one plugin (all_reduce, optional since ABI 1.9; backend.h has the
// contract): against a fold on the reference interpreter in the order the ABI fixes (so every
// dtype compares bit for bit), over the device under test and up to three others, for every dtype
// the devices run, every op, sizes 0, 1, odd and past a few blocks; in place; ordered after and
// before kernels on every device without host synchronisation; bad arguments refused. Every case
// is skipped, saying why, when the plugin lacks the member or has a single device.
#include "collective_reference.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace rvl::conformance {
// Named, not anonymous: the runner is a unity build and cases_peer.cpp has helpers of these names.
namespace all_reduce_cases {

const rvl_backend_api& api() { return *session().api; }

// The devices of a call: the device under test first, then up to three others.
std::vector<int32_t> mesh() {
  if (!RVL_CONF_HAS(api(), all_reduce)) throw Skip("all_reduce is NULL or beyond the table (optional since ABI 1.9)");
  std::vector<int32_t> out{session().device};
  for (int32_t d : other_devices(3, "an all-reduce")) out.push_back(d);
  return out;
}

// The dtypes every device of `devices` runs.
uint32_t common_dtypes(const std::vector<int32_t>& devices) {
  uint32_t mask = RVL_DTYPES_ALL;
  for (int32_t d : devices) {
    rvl_device_properties p{};
    p.struct_size = sizeof p;
    check_ok(api().device_properties(d, &p), "device_properties");
    mask &= p.dtypes;
  }
  return mask;
}

const char* op_name(int32_t op) {
  switch (op) {
    case RVL_ALL_REDUCE_SUM: return "sum";
    case RVL_ALL_REDUCE_MAX: return "max";
    case RVL_ALL_REDUCE_PROD: return "prod";
    default: return "min";
  }
}

// a op b by the reference interpreter's instructions (MIN: -max(-a, -b) for floats, as the
// ABI's MAX propagates NaN; a compare for the others).
ref::Value combine(int32_t op, int32_t dt, ref::Value a, ref::Value b) {
  switch (op) {
    case RVL_ALL_REDUCE_SUM: return ref::apply(RVL_OP_ADD, dt, dt, a, b);
    case RVL_ALL_REDUCE_PROD: return ref::apply(RVL_OP_MUL, dt, dt, a, b);
    case RVL_ALL_REDUCE_MAX: return ref::apply(RVL_OP_MAX, dt, dt, a, b);
    default:
      if (ref::is_float(dt))
        return ref::apply(RVL_OP_NEG, dt, dt,
                          ref::apply(RVL_OP_MAX, dt, dt, ref::apply(RVL_OP_NEG, dt, dt, a), ref::apply(RVL_OP_NEG, dt, dt, b)));
      return ref::apply(RVL_OP_CMPLT, RVL_DTYPE_BOOL, dt, b, a).i ? b : a;
  }
}

// The fold of `parts` in order, element by element.
ref::HostBuffer fold(int32_t op, const std::vector<ref::HostBuffer>& parts) {
  ref::HostBuffer out = parts[0];
  for (size_t k = 1; k < parts.size(); ++k)
    for (int64_t i = 0; i < out.elements(); ++i) out.set(i, combine(op, out.dtype, out.get(i), parts[k].get(i)));
  return out;
}

std::vector<uint8_t> with_tail(const std::vector<uint8_t>& head, size_t tail, uint8_t fill) {
  std::vector<uint8_t> v = head;
  v.insert(v.end(), tail, fill);
  return v;
}

void register_cases() {
  add_case("all_reduce", "every_dtype_op_and_size", [](Measure&) {
    const std::vector<int32_t> devices = mesh();
    const uint32_t dtypes = common_dtypes(devices);
    uint64_t seed = 1;
    for (size_t n = 2; n <= devices.size(); ++n)
      for (int32_t dt = 0; dt < RVL_DTYPE_COUNT_; ++dt) {
        if (!((dtypes >> dt) & 1u)) continue;
        const size_t size = ref::element_size(dt);
        for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{3 * 4096 + 13}})
          for (int32_t op = RVL_ALL_REDUCE_SUM; op <= RVL_ALL_REDUCE_MIN; ++op) {
            if (count > 7 && n != devices.size() && dt != RVL_DTYPE_F32) continue;  // large: once per dtype
            const std::string what = std::string("all_reduce (") + op_name(op) + ") of " + std::to_string(count) + " " +
                                     dtype_str(dt) + " over " + std::to_string(n) + " devices";
            std::vector<ref::HostBuffer> parts;
            std::vector<std::unique_ptr<DeviceBuffer>> in, out;
            std::vector<const rvl_buffer*> in_h;
            std::vector<rvl_buffer*> out_h;
            const size_t bytes = static_cast<size_t>(count) * size;
            for (size_t k = 0; k < n; ++k) {
              // Small values: products of four stay in range for floats; ints wrap alike anyway.
              parts.push_back(make_data(dt, count, seed++, op == RVL_ALL_REDUCE_PROD ? Data::Small : Data::Mixed));
              in.push_back(std::make_unique<DeviceBuffer>(devices[k], bytes + 16));
              out.push_back(std::make_unique<DeviceBuffer>(devices[k], bytes + 16));
              in.back()->write(with_tail(parts.back().bytes, 16, 0xA5));
              out.back()->write(std::vector<uint8_t>(bytes + 16, 0x5A));
              in_h.push_back(in.back()->get());
              out_h.push_back(out.back()->get());
            }
            check_ok(api().all_reduce(static_cast<int32_t>(n), nullptr, in_h.data(), out_h.data(), static_cast<uint64_t>(count), dt, op),
                     what);
            const std::vector<uint8_t> want = with_tail(fold(op, parts).bytes, 16, 0x5A);
            for (size_t k = 0; k < n; ++k) {
              const std::vector<uint8_t> got = out[k]->read();
              if (got != want) {
                size_t i = 0;
                while (i < got.size() && got[i] == want[i]) ++i;
                throw Failure(what + ": device " + std::to_string(devices[k]) + "'s output differs at byte " +
                              std::to_string(i) + (i >= bytes ? " (past the elements: written beyond count)" : ""));
              }
              expect(in[k]->read() == with_tail(parts[k].bytes, 16, 0xA5), what + ": an input was modified");
            }
          }
      }
  });
  add_case("all_reduce", "in_place", [](Measure&) {
    const std::vector<int32_t> devices = mesh();
    const int64_t count = 2 * 4096 + 5;
    std::vector<ref::HostBuffer> parts;
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    std::vector<rvl_buffer*> h;
    for (size_t k = 0; k < devices.size(); ++k) {
      parts.push_back(make_data(RVL_DTYPE_F32, count, 40 + k));
      bufs.push_back(std::make_unique<DeviceBuffer>(devices[k], count * 4));
      bufs.back()->write(parts.back().bytes);
      h.push_back(bufs.back()->get());
    }
    std::vector<const rvl_buffer*> in(h.begin(), h.end());
    check_ok(api().all_reduce(static_cast<int32_t>(h.size()), nullptr, in.data(), h.data(), count, RVL_DTYPE_F32,
                              RVL_ALL_REDUCE_SUM),
             "all_reduce in place");
    const std::vector<uint8_t> want = fold(RVL_ALL_REDUCE_SUM, parts).bytes;
    for (size_t k = 0; k < h.size(); ++k)
      expect(bufs[k]->read() == want, "in place: device " + std::to_string(devices[k]) + "'s result differs");
    // n = 1: a copy to another buffer of the device.
    DeviceBuffer copy(devices[0], count * 4);
    rvl_buffer* to[1] = {copy.get()};
    check_ok(api().all_reduce(1, nullptr, in.data(), to, count, RVL_DTYPE_F32, RVL_ALL_REDUCE_MAX), "all_reduce of one");
    expect(copy.read() == want, "all_reduce over one device is not a copy of its input");
  });
  add_case("all_reduce", "ordered_without_host_synchronisation", [](Measure&) {
    // Kernels write every input, the all-reduce follows, kernels overwrite every input: every
    // output holds the sum of the first kernels' values.
    // 8 MiB per part: large enough for a plugin's bulk path (tbb_cpu streams its stores there).
    const std::vector<int32_t> devices = mesh();
    constexpr int64_t n = 1 << 21;
    std::vector<std::unique_ptr<DeviceBuffer>> in, out;
    std::vector<const rvl_buffer*> in_h;
    std::vector<rvl_buffer*> out_h;
    for (int32_t d : devices) {
      in.push_back(std::make_unique<DeviceBuffer>(d, n * 4));
      out.push_back(std::make_unique<DeviceBuffer>(d, n * 4));
      in_h.push_back(in.back()->get());
      out_h.push_back(out.back()->get());
    }
    for (int round = 1; round <= 2; ++round) {
      float want = 0;
      for (size_t k = 0; k < devices.size(); ++k) {
        fill_f32(devices[k], in[k]->get(), n, static_cast<float>(round + k));
        want += static_cast<float>(round + k);
      }
      check_ok(api().all_reduce(static_cast<int32_t>(devices.size()), nullptr, in_h.data(), out_h.data(), n, RVL_DTYPE_F32,
                                RVL_ALL_REDUCE_SUM),
               "all_reduce");
      for (size_t k = 0; k < devices.size(); ++k) fill_f32(devices[k], in[k]->get(), n, -1.0f);
      for (size_t k = 0; k < devices.size(); ++k) {
        const std::vector<uint8_t> got = out[k]->read();
        expect(f32_at(got, 0) == want && f32_at(got, n - 1) == want,
               "device " + std::to_string(devices[k]) + " read " + std::to_string(f32_at(got, n - 1)) + ", expected " +
                   std::to_string(want) + " (the all-reduce is not ordered after the kernels, or a later kernel "
                   "overwrote an input before it was read)");
      }
    }
  });
  add_case("all_reduce", "streams_of_each_device", [](Measure&) {
    const std::vector<int32_t> devices = mesh();
    std::vector<rvl_stream*> streams(2, nullptr);
    check_ok(api().stream_create(devices[0], &streams[0]), "stream_create");
    check_ok(api().stream_create(devices[1], &streams[1]), "stream_create");
    DeviceBuffer a(devices[0], 64), b(devices[1], 64), oa(devices[0], 64), ob(devices[1], 64);
    a.write(std::vector<uint8_t>(64, 1));
    b.write(std::vector<uint8_t>(64, 2));
    const rvl_buffer* in[2] = {a.get(), b.get()};
    rvl_buffer* out[2] = {oa.get(), ob.get()};
    check_ok(api().all_reduce(2, streams.data(), in, out, 64, RVL_DTYPE_U8, RVL_ALL_REDUCE_SUM), "on explicit streams");
    check_ok(api().stream_synchronize(streams[1]), "stream_synchronize");
    expect(ob.read() == std::vector<uint8_t>(64, 3), "all_reduce on explicit streams");
    std::swap(streams[0], streams[1]);
    check_error(api().all_reduce(2, streams.data(), in, out, 64, RVL_DTYPE_U8, RVL_ALL_REDUCE_SUM),
                RVL_STATUS_INVALID_ARGUMENT, "all_reduce with the streams swapped");
    for (rvl_stream* s : streams) check_ok(api().stream_destroy(s), "stream_destroy");
  });
  add_case("all_reduce", "bad_arguments", [](Measure&) {
    const std::vector<int32_t> devices = mesh();
    int32_t count = 0;
    check_ok(api().device_count(&count), "device_count");
    DeviceBuffer a(devices[0], 64), b(devices[1], 64), oa(devices[0], 64), ob(devices[1], 64), a2(devices[0], 64);
    oa.write(std::vector<uint8_t>(64, 0x77));
    ob.write(std::vector<uint8_t>(64, 0x77));
    const rvl_buffer* in[2] = {a.get(), b.get()};
    rvl_buffer* out[2] = {oa.get(), ob.get()};
    const auto bad = [&](int32_t n, const rvl_buffer* const* i, rvl_buffer* const* o, uint64_t c, int32_t dt, int32_t op,
                         const std::string& what) {
      check_error(api().all_reduce(n, nullptr, i, o, c, dt, op), RVL_STATUS_INVALID_ARGUMENT, what);
    };
    bad(0, in, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "n = 0");
    bad(-1, in, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "n = -1");
    bad(count + 1, in, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "more buffers than devices");
    bad(2, nullptr, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a NULL inputs array");
    bad(2, in, nullptr, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a NULL outputs array");
    bad(2, in, out, 16, RVL_DTYPE_F32, 0, "op 0");
    bad(2, in, out, 16, RVL_DTYPE_F32, 5, "op 5");
    bad(2, in, out, 16, -1, RVL_ALL_REDUCE_SUM, "dtype -1");
    bad(2, in, out, 16, RVL_DTYPE_COUNT_, RVL_ALL_REDUCE_SUM, "an unknown dtype");
    bad(2, in, out, 17, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "more elements than the buffers hold");
    bad(2, in, out, UINT64_MAX / 2, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a count whose bytes overflow");
    const rvl_buffer* with_null[2] = {a.get(), nullptr};
    bad(2, with_null, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a NULL input buffer");
    rvl_buffer* out_null[2] = {oa.get(), nullptr};
    bad(2, in, out_null, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a NULL output buffer");
    const rvl_buffer* twice[2] = {a.get(), a2.get()};
    rvl_buffer* twice_out[2] = {oa.get(), ob.get()};
    bad(2, twice, twice_out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "two inputs on one device");
    rvl_buffer* crossed[2] = {ob.get(), oa.get()};
    bad(2, in, crossed, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "an output on another device than its input");
    alignas(64) static unsigned char foreign[256];  // not a buffer of this plugin (another's, or none)
    const rvl_buffer* alien[2] = {a.get(), reinterpret_cast<const rvl_buffer*>(foreign)};
    bad(2, alien, out, 16, RVL_DTYPE_F32, RVL_ALL_REDUCE_SUM, "a buffer this plugin does not know");
    // No refused call wrote anything.
    expect(oa.read() == std::vector<uint8_t>(64, 0x77) && ob.read() == std::vector<uint8_t>(64, 0x77),
           "a refused all_reduce wrote an output");
  });
}

}  // namespace all_reduce_cases

void register_all_reduce_cases() { all_reduce_cases::register_cases(); }

}  // namespace rvl::conformance
