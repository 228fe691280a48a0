// Edge values and layouts (folded in from the oneTBB plugin's own ABI tests, so that every
// backend gets them): every arithmetic op on all pairs of a dtype's edge values, every cast
// pair and CONST out of range, padded/flipped/broadcast/strided views with untouched gaps in
// the output, rank 0 and empty spaces, large kernels that span many blocks, and reductions
// whose inputs make every order of evaluation bitwise identical (so they are checked exactly).
#include "kernel_case.hpp"

#include <cmath>
#include <limits>

namespace rvl::conformance {
namespace {

using ref::fval;
using ref::ival;
using ref::Value;

// The 1.7 dtypes run wherever a device states them (skipped elsewhere); f16 and bf16 are
// compared with the reference's f32 arithmetic rounded once (docs/dtypes.md, "Tolerances").
const int32_t kDtypes[] = {RVL_DTYPE_BOOL, RVL_DTYPE_U8,  RVL_DTYPE_I32, RVL_DTYPE_I64, RVL_DTYPE_F32,
                           RVL_DTYPE_F64,  RVL_DTYPE_F16, RVL_DTYPE_BF16, RVL_DTYPE_I8, RVL_DTYPE_I16,
                           RVL_DTYPE_U16,  RVL_DTYPE_U32, RVL_DTYPE_U64};

// Interesting values per dtype: range edges, signs, zero, non-finite floats, and values out of
// range for the casts.
std::vector<Value> edge_values(int32_t dt) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (dt) {
    case RVL_DTYPE_BOOL: return {ival(0), ival(1)};
    case RVL_DTYPE_U8:
      return {ival(0), ival(1), ival(2), ival(7), ival(127), ival(128), ival(200), ival(255)};
    case RVL_DTYPE_I32:
      return {ival(0),   ival(1),     ival(-1),       ival(3),         ival(-3),    ival(1000),
              ival(-77), ival(65536), ival(INT32_MIN), ival(INT32_MAX), ival(INT32_MIN + 1)};
    case RVL_DTYPE_I64:
      return {ival(0),   ival(1),          ival(-1),        ival(3),         ival(-3),
              ival(1000), ival(-77),       ival(1LL << 40), ival(INT64_MIN), ival(INT64_MAX),
              ival(INT64_MIN + 1)};
    case RVL_DTYPE_I8: return {ival(0), ival(1), ival(-1), ival(3), ival(-3), ival(-77), ival(-128), ival(127), ival(-127)};
    case RVL_DTYPE_I16:
      return {ival(0), ival(1), ival(-1), ival(3), ival(-3), ival(1000), ival(-77), ival(-32768), ival(32767), ival(-32767)};
    case RVL_DTYPE_U16: return {ival(0), ival(1), ival(2), ival(7), ival(255), ival(256), ival(32768), ival(65535)};
    case RVL_DTYPE_U32:
      return {ival(0), ival(1), ival(2), ival(7), ival(65536), ival(2147483648LL), ival(4294967295LL)};
    case RVL_DTYPE_U64:  // held as int64 bits: -1 is 2^64 - 1, INT64_MIN is 2^63
      return {ival(0), ival(1), ival(2), ival(7), ival(1LL << 40), ival(INT64_MAX), ival(INT64_MIN), ival(-1)};
    default:
      return {fval(0),    fval(-0.0),  fval(1),     fval(-1),    fval(0.5),        fval(-2.5),
              fval(3.75), fval(7),     fval(-7),    fval(300),   fval(-5.5),       fval(3e9),
              fval(-1e20), fval(1e30), fval(inf),   fval(-inf),  fval(std::nan(""))};
  }
}

template <class Fn>
ref::HostBuffer filled(int32_t dt, int64_t n, Fn f) {
  ref::HostBuffer b(dt, n);
  for (int64_t i = 0; i < n; ++i) b.set(i, f(i));
  return b;
}
// Output buffers start with a marker distinct from any result, so untouched elements show.
ref::HostBuffer marker(int32_t dt, int64_t n) {
  return filled(dt, n, [&](int64_t i) { return ref::is_float(dt) ? fval(-1234.5 - i) : ival(1 + i % 3); });
}

ProgramCase program(std::vector<int64_t> shape, std::vector<Input> inputs,
                    std::vector<rvl_instruction> code, int32_t out_dtype, int64_t out_elements,
                    rvl_view out_view, double threshold) {
  ProgramCase c;
  c.shape = std::move(shape);
  c.inputs = std::move(inputs);
  c.code = std::move(code);
  c.out = marker(out_dtype, out_elements);
  c.out_view = out_view;
  c.threshold = threshold;
  return c;
}

void register_ops() {
  for (int32_t op = 0; op < RVL_OP_COUNT_; ++op) {
    if (!rvl::op_is_arithmetic(op) || op == RVL_OP_CAST) continue;  // CAST: below
    for (int32_t dt : kDtypes) {
      if (!rvl::op_accepts(op, dt)) continue;
      add_case("edges", op_str(op) + "/" + dtype_str(dt), [=](Measure& m) {
        const std::vector<Value> vals = edge_values(dt);
        const int64_t n = static_cast<int64_t>(vals.size());
        const int32_t rdt = rvl::op_result_dtype(op, dt);
        const double thr = threshold(accuracy_of(op), rdt);
        switch (rvl::op_info(op).arity) {
          case 1:
            program({n}, {{make_values(dt, vals), contiguous({n})}}, {load(dt, 0), ins(op, rdt, 0)},
                    rdt, n, contiguous({n}), thr).run(m);
            break;
          case 2:  // all pairs by broadcasting: a varies along axis 0, b along axis 1
            program({n, n},
                    {{make_values(dt, vals), view_of({n, n}, {1, 0})},
                     {make_values(dt, vals), view_of({n, n}, {0, 1})}},
                    {load(dt, 0), load(dt, 1), ins(op, rdt, 0, 1)}, rdt, n * n,
                    contiguous({n, n}), thr).run(m);
            break;
          default:  // SELECT: both conditions x all pairs
            program({2, n, n},
                    {{make_values(RVL_DTYPE_BOOL, {ival(0), ival(1)}), view_of({2, n, n}, {1, 0, 0})},
                     {make_values(dt, vals), view_of({2, n, n}, {0, 1, 0})},
                     {make_values(dt, vals), view_of({2, n, n}, {0, 0, 1})}},
                    {load(RVL_DTYPE_BOOL, 0), load(dt, 1), load(dt, 2), ins(op, rdt, 0, 1, 2)},
                    rdt, 2 * n * n, contiguous({2, n, n}), thr).run(m);
        }
      });
    }
  }
  for (int32_t from : kDtypes)
    for (int32_t to : kDtypes)
      add_case("edges", "CAST/" + dtype_str(from) + "->" + dtype_str(to), [=](Measure& m) {
        const std::vector<Value> vals = edge_values(from);
        const int64_t n = static_cast<int64_t>(vals.size());
        program({n}, {{make_values(from, vals), contiguous({n})}},
                {load(from, 0), ins(RVL_OP_CAST, to, 0)}, to, n, contiguous({n}),
                threshold(Accuracy::Exact, to)).run(m);
      });
  // CONST of every dtype, including values outside the dtype's range (converted like CAST).
  for (int32_t dt : kDtypes)
    for (int64_t v : {int64_t{0}, int64_t{2}, int64_t{300}, int64_t{-5}, int64_t{1} << 40})
      add_case("edges", "CONST/" + dtype_str(dt) + "/" + std::to_string(v), [=](Measure& m) {
        const rvl_instruction c = ref::is_float(dt) ? const_f(dt, double(v) + 0.25) : const_i(dt, v);
        program({3}, {}, {c}, dt, 3, contiguous({3}), threshold(Accuracy::Exact, dt)).run(m);
      });
}

void register_layouts() {
  const double f32 = threshold(Accuracy::Exact, RVL_DTYPE_F32);
  // Padding: a 4x7 buffer seen as the interior of a 6x9 space (the negative offset is fine:
  // invalid elements are never addressed).
  add_case("layouts", "padding_negative_offset", [=](Measure& m) {
    rvl_view v = view_of({6, 9}, {7, 1}, -8);
    v.valid_lo[0] = 1, v.valid_hi[0] = 5, v.valid_lo[1] = 1, v.valid_hi[1] = 8;
    program({6, 9}, {{filled(RVL_DTYPE_F32, 28, [](int64_t i) { return fval(i + 0.5); }), v}},
            {load(RVL_DTYPE_F32, 0), const_f(RVL_DTYPE_F32, 1.0), ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 1)},
            RVL_DTYPE_F32, 54, contiguous({6, 9}), f32).run(m);
  });
  // Both axes flipped, into a transposed (non-contiguous) output.
  for (int32_t dt : kDtypes)
    add_case("layouts", "flip_into_transposed/" + dtype_str(dt), [=](Measure& m) {
      auto value = [&](int64_t i) {
        return ref::is_float(dt) ? fval(i * 1.5) : ival(i % (dt == RVL_DTYPE_BOOL ? 2 : 97));
      };
      program({5, 6}, {{filled(dt, 30, value), view_of({5, 6}, {-6, -1}, 29)}}, {load(dt, 0)}, dt,
              30, view_of({5, 6}, {1, 5}), threshold(Accuracy::Exact, dt)).run(m);
    });
  // Stride-0 broadcast with an offset, and a strided output with an offset inside a larger
  // buffer: the elements in between must stay untouched.
  add_case("layouts", "broadcast_into_strided_output", [](Measure& m) {
    program({4, 5},
            {{filled(RVL_DTYPE_I32, 9, [](int64_t i) { return ival(10 * i); }), view_of({4, 5}, {0, 1}, 3)},
             {filled(RVL_DTYPE_I32, 4, [](int64_t i) { return ival(i - 2); }), view_of({4, 5}, {-1, 0}, 3)}},
            {load(RVL_DTYPE_I32, 0), load(RVL_DTYPE_I32, 1), ins(RVL_OP_MUL, RVL_DTYPE_I32, 0, 1)},
            RVL_DTYPE_I32, 4 * 12 + 3, view_of({4, 5}, {12, 2}, 3), 0).run(m);
  });
  // Rank 3 with an extent-1 axis, a view whose window on that axis is empty (reads all zeros),
  // and a validity window on a negative-stride axis.
  add_case("layouts", "rank3_windows", [](Measure& m) {
    const std::vector<int64_t> s{3, 1, 40};
    rvl_view v1 = view_of(s, {0, 0, 1});
    v1.valid_lo[1] = 1;
    rvl_view v2 = view_of(s, {0, 0, -1}, 45);
    v2.valid_lo[2] = 6, v2.valid_hi[2] = 30;  // addresses 39..16
    program(s,
            {{filled(RVL_DTYPE_F64, 120, [](int64_t i) { return fval(i * 0.25); }), view_of(s, {40, 7, 1})},
             {filled(RVL_DTYPE_F64, 10, [](int64_t i) { return fval(100 + i); }), v1},
             {filled(RVL_DTYPE_F64, 40, [](int64_t i) { return fval(-i); }), v2}},
            {load(RVL_DTYPE_F64, 0), load(RVL_DTYPE_F64, 1), load(RVL_DTYPE_F64, 2),
             ins(RVL_OP_ADD, RVL_DTYPE_F64, 0, 1), ins(RVL_OP_ADD, RVL_DTYPE_F64, 3, 2)},
            RVL_DTYPE_F64, 120, contiguous(s), threshold(Accuracy::Exact, RVL_DTYPE_F64)).run(m);
  });
  add_case("layouts", "rank0_with_offsets", [](Measure& m) {
    program({}, {{filled(RVL_DTYPE_I64, 3, [](int64_t i) { return ival(i + 40); }), view_of({}, {}, 2)}},
            {load(RVL_DTYPE_I64, 0), const_i(RVL_DTYPE_I64, 2), ins(RVL_OP_ADD, RVL_DTYPE_I64, 0, 1)},
            RVL_DTYPE_I64, 2, view_of({}, {}, 1), 0).run(m);
  });
  add_case("layouts", "empty_space_writes_nothing", [](Measure& m) {
    program({3, 0, 4}, {{filled(RVL_DTYPE_I64, 1, [](int64_t) { return ival(1); }), view_of({3, 0, 4}, {0, 0, 0})}},
            {load(RVL_DTYPE_I64, 0)}, RVL_DTYPE_I64, 4, view_of({3, 0, 4}, {0, 0, 1}), 0).run(m);
  });
  // ~1M elements (many blocks per thread / work-group), a padded broadcast input and a
  // transposed output.
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_I32, RVL_DTYPE_U8})
    add_case("layouts", "large_transposed_output/" + dtype_str(dt), [=](Measure& m) {
      const std::vector<int64_t> s{1024, 1027};
      const int64_t n = 1024 * 1027;
      const bool fp = ref::is_float(dt);
      rvl_view pad = view_of(s, {1, 0}, -3);
      pad.valid_lo[0] = 3, pad.valid_hi[0] = 1000;
      program(s,
              {{filled(dt, n, [&](int64_t i) { return fp ? fval((i % 37) * 0.125 - 2) : ival(i % 251 - (dt == RVL_DTYPE_U8 ? 0 : 100)); }), contiguous(s)},
               {filled(dt, 1027, [&](int64_t i) { return fp ? fval(i * 0.5) : ival(i % 13); }), pad}},
              {load(dt, 0), load(dt, 1), ins(RVL_OP_MUL, dt, 0, 1), ins(RVL_OP_ADD, dt, 2, 0),
               ins(RVL_OP_MAX, dt, 3, 1)},
              dt, n, view_of(s, {1, 1024}), threshold(Accuracy::Exact, dt)).run(m);
    });
}

// Reduction inputs for which every order of evaluation is exact: small integers for float
// sums, rare powers of two for float products; integers wrap, which is order independent.
Value exact_reduction_value(int32_t dt, int32_t rop, int64_t i) {
  const uint64_t h = uint64_t(i) * 0x9E3779B97F4A7C15ull >> 40;
  if (dt == RVL_DTYPE_BOOL) return ival(rop == RVL_REDUCE_PROD ? (h % 5000 != 0) : (h % 3000 == 0));
  if (!ref::is_float(dt)) return ival(int64_t(h % 1000) - (dt == RVL_DTYPE_U8 ? 0 : 500));
  if (rop == RVL_REDUCE_PROD)
    return fval(i % 65536 == 7 ? 2.0 : i % 65536 == 99 ? 0.5 : i % 100003 == 5 ? -1.0 : 1.0);
  return fval(double(h % 4) - (rop == RVL_REDUCE_MAX ? 1.5 : 0));
}

void register_exact_reductions() {
  struct Space { std::vector<int64_t> shape; std::vector<uint32_t> axes; };
  const Space spaces[] = {
      {{16, 128, 128}, {7u, 6u, 1u}},          // 256k elements: all axes, few outputs, many outputs
      {{8, 9, 10}, {0u, 1u, 2u, 4u, 5u, 3u}},  // small: none and assorted subsets
      {{5, 0, 3}, {2u, 5u}},                   // empty reduced extent: the identity
  };
  const char* rop_names[] = {"", "SUM", "MAX", "PROD"};
  for (int32_t dt : kDtypes)
    for (int32_t rop : {RVL_REDUCE_SUM, RVL_REDUCE_MAX, RVL_REDUCE_PROD})
      for (const Space& s : spaces)
        for (uint32_t axes : s.axes) {
          std::string shape_str;
          for (int64_t e : s.shape) shape_str += (shape_str.empty() ? "" : "x") + std::to_string(e);
          add_case("exact_reductions",
                   std::string(rop_names[rop]) + "/" + dtype_str(dt) + "/" + shape_str + "/axes" +
                       std::to_string(axes),
                   [=](Measure& m) {
                     // Kept axes get doubled strides (the gaps stay untouched), reduced ones 0.
                     std::vector<int64_t> strides(s.shape.size());
                     int64_t st = 2;
                     for (int d = int(s.shape.size()) - 1; d >= 0; --d) {
                       if ((axes >> d) & 1) continue;
                       strides[d] = st;
                       st *= s.shape[d];
                     }
                     ProgramCase c = program(
                         s.shape,
                         {{filled(dt, count(s.shape), [&](int64_t i) { return exact_reduction_value(dt, rop, i); }),
                           contiguous(s.shape)}},
                         {load(dt, 0)}, dt, st + 1, view_of(s.shape, strides, 1), 0);
                     c.reduce_op = rop;
                     c.reduce_axes = axes;
                     c.run(m);
                   });
        }
  // NaN propagates through a MAX reduction of 100k elements per row.
  add_case("exact_reductions", "MAX/f32/nan_in_long_row", [](Measure& m) {
    const std::vector<int64_t> s{4, 100000};
    ProgramCase c = program(
        s, {{filled(RVL_DTYPE_F32, 400000, [](int64_t i) { return fval(i == 150000 ? std::nan("") : double(i % 7)); }), contiguous(s)}},
        {load(RVL_DTYPE_F32, 0)}, RVL_DTYPE_F32, 4, view_of(s, {1, 0}), 0);
    c.reduce_op = RVL_REDUCE_MAX;
    c.reduce_axes = 2;
    c.run(m);
  });
  // Long dot products with a broadcast operand (exact: small integers).
  add_case("exact_reductions", "SUM/f64/dot_products", [](Measure& m) {
    const std::vector<int64_t> s{3, 1 << 18};
    ProgramCase c = program(
        s, {{filled(RVL_DTYPE_F64, 3 << 18, [](int64_t i) { return fval(double(i % 5)); }), contiguous(s)},
            {filled(RVL_DTYPE_F64, 1 << 18, [](int64_t i) { return fval(double(i % 3) - 1); }), view_of(s, {0, 1})}},
        {load(RVL_DTYPE_F64, 0), load(RVL_DTYPE_F64, 1), ins(RVL_OP_MUL, RVL_DTYPE_F64, 0, 1)},
        RVL_DTYPE_F64, 3, view_of(s, {1, 0}), 0);
    c.reduce_op = RVL_REDUCE_SUM;
    c.reduce_axes = 2;
    c.run(m);
  });
}

}  // namespace

void register_edge_cases() {
  register_ops();
  register_layouts();
  register_exact_reductions();
}

}  // namespace rvl::conformance
