// Programs: every instruction x dtype against the reference, views (broadcast, flips, offsets,
// padding, strided outputs), reductions, large parallel kernels.
#include "common.hpp"

#include <ravel/op_table.hpp>

#include <cmath>
#include <limits>

using namespace abitest;

namespace {

const int32_t kDtypes[] = {RVL_DTYPE_BOOL, RVL_DTYPE_U8,  RVL_DTYPE_I32,
                           RVL_DTYPE_I64,  RVL_DTYPE_F32, RVL_DTYPE_F64};
const char* kDtypeNames[] = {"bool", "u8", "i32", "i64", "f32", "f64"};

// Interesting values per dtype: edges, signs, zero, non-finite floats, out-of-range for casts.
std::vector<Val> edge_values(int32_t dt) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (dt) {
    case RVL_DTYPE_BOOL: return {I(0), I(1)};
    case RVL_DTYPE_U8: return {I(0), I(1), I(2), I(7), I(127), I(128), I(200), I(255)};
    case RVL_DTYPE_I32:
      return {I(0), I(1), I(-1), I(2), I(-2), I(7), I(-7), I(100), I(12345), I(INT32_MIN),
              I(INT32_MAX), I(INT32_MIN + 1)};
    case RVL_DTYPE_I64:
      return {I(0), I(1), I(-1), I(3), I(-3), I(1000), I(-77), I(1LL << 40), I(INT64_MIN),
              I(INT64_MAX), I(INT64_MIN + 1)};
    default:
      return {F(0), F(-0.0), F(1), F(-1), F(0.5), F(-2.5), F(3.75), F(7), F(-7), F(300),
              F(-5.5), F(3e9), F(-1e20), F(1e30), F(inf), F(-inf), F(std::nan(""))};
  }
}

std::string op_name(int op) { return rvl::op_info(op).name; }

rvl_view full(const std::vector<int64_t>& shape) {
  return contiguous(static_cast<int>(shape.size()), shape.data());
}

HostBuf sentinel_buf(int32_t dt, int64_t n) {
  return filled(dt, n, [&](int64_t i) { return is_float(dt) ? F(-1234.5 - i) : I(1 + i % 3); });
}

// Transcendentals: allow libm differences of a few ulps should the plugin vectorise.
double tolerance(int op, int32_t dt) {
  const bool transcendental = rvl::op_info(op).accuracy != rvl::OpAccuracy::Exact;
  if (!transcendental) return 0;
  return dt == RVL_DTYPE_F32 ? 1e-6 : 1e-14;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(programs)

BOOST_AUTO_TEST_CASE(every_instruction_every_dtype) {
  int cases = 0;
  for (int op = 0; op < RVL_OP_COUNT_; ++op) {
    if (!rvl::op_is_arithmetic(op) || op == RVL_OP_CAST) continue;  // CAST: its own test
    for (int32_t dt : kDtypes) {
      if (!rvl::op_accepts(op, dt)) continue;
      const std::string ctx = op_name(op) + " " + kDtypeNames[dt];
      const std::vector<Val> vals = edge_values(dt);
      const int64_t n = static_cast<int64_t>(vals.size());
      ProgramCase c;
      const int arity = rvl::op_info(op).arity;
      const int32_t rdt = rvl::op_result_dtype(op, dt);
      if (arity == 1) {
        c.shape = {n};
        c.inputs = {make_buf(dt, vals)};
        c.views = {full(c.shape)};
        c.code = {load(dt, 0), ins(op, rdt, 0)};
      } else if (arity == 2) {
        // All pairs via broadcasting: a varies along axis 0, b along axis 1.
        c.shape = {n, n};
        c.inputs = {make_buf(dt, vals), make_buf(dt, vals)};
        c.views = {make_view(2, c.shape, {1, 0}), make_view(2, c.shape, {0, 1})};
        c.code = {load(dt, 0), load(dt, 1), ins(op, rdt, 0, 1)};
      } else {
        c.shape = {2, n, n};
        c.inputs = {make_buf(RVL_DTYPE_BOOL, {I(0), I(1)}), make_buf(dt, vals), make_buf(dt, vals)};
        c.views = {make_view(3, c.shape, {1, 0, 0}), make_view(3, c.shape, {0, 1, 0}),
                   make_view(3, c.shape, {0, 0, 1})};
        c.code = {load(RVL_DTYPE_BOOL, 0), load(dt, 1), load(dt, 2), ins(op, rdt, 0, 1, 2)};
      }
      int64_t total = 1;
      for (int64_t e : c.shape) total *= e;
      c.out = sentinel_buf(rdt, total);
      c.out_view = full(c.shape);
      c.run(ctx, tolerance(op, dt));
      ++cases;
    }
  }
  // Sanity: the coverage did not shrink. 17 arithmetic ops (CAST has its own test) on the dtypes
  // the table accepts: 79 (81 before MOD and IDIV on bool were removed from the ABI in 1.1).
  BOOST_TEST(cases == 79);
}

BOOST_AUTO_TEST_CASE(cast_every_pair_and_const) {
  for (int32_t from : kDtypes) {
    for (int32_t to : kDtypes) {
      ProgramCase c;
      const std::vector<Val> vals = edge_values(from);
      c.shape = {static_cast<int64_t>(vals.size())};
      c.inputs = {make_buf(from, vals)};
      c.views = {full(c.shape)};
      c.code = {load(from, 0), ins(RVL_OP_CAST, to, 0)};
      c.out = sentinel_buf(to, c.shape[0]);
      c.out_view = full(c.shape);
      c.run(std::string("CAST ") + kDtypeNames[from] + "->" + kDtypeNames[to]);
    }
  }
  // CONST of every dtype, including values outside the dtype's range (converted like CAST).
  for (int32_t dt : kDtypes) {
    for (int64_t v : {int64_t{0}, int64_t{2}, int64_t{300}, int64_t{-5}, int64_t{1} << 40}) {
      ProgramCase c;
      c.shape = {3};
      c.code = {is_float(dt) ? cnst_f(dt, double(v) + 0.25) : cnst_i(dt, v)};
      c.out = sentinel_buf(dt, 3);
      c.out_view = full(c.shape);
      c.run(std::string("CONST ") + kDtypeNames[dt]);
    }
  }
}

BOOST_AUTO_TEST_CASE(views_padding_flips_broadcast_strided_output) {
  // Padding: a 4x7 buffer seen as the interior of a 6x9 space (negative offset is fine because
  // invalid elements are never addressed).
  {
    ProgramCase c;
    c.shape = {6, 9};
    c.inputs = {filled(RVL_DTYPE_F32, 28, [](int64_t i) { return F(double(i) + 0.5); })};
    rvl_view v = make_view(2, c.shape, {7, 1}, -8);
    v.valid_lo[0] = 1; v.valid_hi[0] = 5;
    v.valid_lo[1] = 1; v.valid_hi[1] = 8;
    c.views = {v};
    c.code = {load(RVL_DTYPE_F32, 0), cnst_f(RVL_DTYPE_F32, 1.0), ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 1)};
    c.out = sentinel_buf(RVL_DTYPE_F32, 54);
    c.out_view = full(c.shape);
    c.run("padding");
  }
  // Negative strides (both axes flipped) into a transposed (non-contiguous) output.
  for (int32_t dt : kDtypes) {
    ProgramCase c;
    c.shape = {5, 6};
    c.inputs = {filled(dt, 30, [&](int64_t i) { return is_float(dt) ? F(i * 1.5) : I(i % (dt == RVL_DTYPE_BOOL ? 2 : 97)); })};
    c.views = {make_view(2, c.shape, {-6, -1}, 29)};
    c.code = {load(dt, 0)};
    c.out = sentinel_buf(dt, 30);
    c.out_view = make_view(2, c.shape, {1, 5});
    c.run(std::string("flip+transpose ") + kDtypeNames[dt]);
  }
  // Stride-0 broadcast with offset; output strided inside a larger buffer with an offset:
  // elements in between must stay untouched.
  {
    ProgramCase c;
    c.shape = {4, 5};
    c.inputs = {filled(RVL_DTYPE_I32, 9, [](int64_t i) { return I(10 * i); }),
                filled(RVL_DTYPE_I32, 4, [](int64_t i) { return I(i - 2); })};
    c.views = {make_view(2, c.shape, {0, 1}, 3), make_view(2, c.shape, {-1, 0}, 3)};
    c.code = {load(RVL_DTYPE_I32, 0), load(RVL_DTYPE_I32, 1), ins(RVL_OP_MUL, RVL_DTYPE_I32, 0, 1)};
    c.out = sentinel_buf(RVL_DTYPE_I32, 4 * 12 + 3);
    c.out_view = make_view(2, c.shape, {12, 2}, 3);
    c.run("broadcast + strided output");
  }
  // Rank 3 with extent-1 axes, a view invalid on an extent-1 axis (reads all zeros), and a
  // view with a validity window on a negative-stride axis.
  {
    ProgramCase c;
    c.shape = {3, 1, 40};
    c.inputs = {filled(RVL_DTYPE_F64, 120, [](int64_t i) { return F(i * 0.25); }),
                filled(RVL_DTYPE_F64, 10, [](int64_t i) { return F(100 + i); }),
                filled(RVL_DTYPE_F64, 40, [](int64_t i) { return F(-i); })};
    rvl_view v1 = make_view(3, c.shape, {0, 0, 1});
    v1.valid_lo[1] = 1;  // axis of extent 1 with an empty window: everything invalid
    rvl_view v2 = make_view(3, c.shape, {0, 0, -1}, 45);
    v2.valid_lo[2] = 6; v2.valid_hi[2] = 30;  // addresses 39..16
    c.views = {make_view(3, c.shape, {40, 7, 1}), v1, v2};
    c.code = {load(RVL_DTYPE_F64, 0), load(RVL_DTYPE_F64, 1), load(RVL_DTYPE_F64, 2),
              ins(RVL_OP_ADD, RVL_DTYPE_F64, 0, 1), ins(RVL_OP_ADD, RVL_DTYPE_F64, 3, 2)};
    c.out = sentinel_buf(RVL_DTYPE_F64, 120);
    c.out_view = full(c.shape);
    c.run("rank 3 windows");
  }
  // Rank 0 (a scalar) and an empty iteration space (nothing may be written).
  {
    ProgramCase c;
    c.shape = {};
    c.inputs = {filled(RVL_DTYPE_I64, 3, [](int64_t i) { return I(i + 40); })};
    rvl_view v{};
    v.struct_size = sizeof(v);
    v.offset = 2;
    c.views = {v};
    c.code = {load(RVL_DTYPE_I64, 0), cnst_i(RVL_DTYPE_I64, 2), ins(RVL_OP_ADD, RVL_DTYPE_I64, 0, 1)};
    c.out = sentinel_buf(RVL_DTYPE_I64, 2);
    c.out_view = v;
    c.out_view.offset = 1;
    c.run("rank 0");
    ProgramCase e;
    e.shape = {3, 0, 4};
    e.inputs = {filled(RVL_DTYPE_I64, 1, [](int64_t) { return I(1); })};
    e.views = {make_view(3, e.shape, {0, 0, 0})};
    e.code = {load(RVL_DTYPE_I64, 0)};
    e.out = sentinel_buf(RVL_DTYPE_I64, 4);
    e.out_view = make_view(3, e.shape, {0, 0, 1});
    e.run("empty space");
  }
}

BOOST_AUTO_TEST_CASE(large_elementwise_parallel) {
  // ~1M elements, several blocks per thread, strided and padded inputs, for f32 and i32.
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_I32, RVL_DTYPE_U8}) {
    ProgramCase c;
    c.shape = {1024, 1027};
    const int64_t n = 1024 * 1027;
    c.inputs = {filled(dt, n, [&](int64_t i) { return is_float(dt) ? F((i % 37) * 0.125 - 2) : I(i % 251 - (dt == RVL_DTYPE_U8 ? 0 : 100)); }),
                filled(dt, 1027, [&](int64_t i) { return is_float(dt) ? F(i * 0.5) : I(i % 13); })};
    rvl_view pad = make_view(2, c.shape, {1, 0}, -3);
    pad.valid_lo[0] = 3; pad.valid_hi[0] = 1000;
    c.views = {full(c.shape), pad};
    c.code = {load(dt, 0), load(dt, 1), ins(RVL_OP_MUL, dt, 0, 1), ins(RVL_OP_ADD, dt, 2, 0),
              ins(RVL_OP_MAX, dt, 3, 1)};
    c.out = sentinel_buf(dt, n);
    c.out_view = make_view(2, c.shape, {1, 1024});  // transposed output
    c.run(std::string("large ") + kDtypeNames[dt]);
  }
}

BOOST_AUTO_TEST_CASE(reductions) {
  const int32_t rops[] = {RVL_REDUCE_SUM, RVL_REDUCE_MAX, RVL_REDUCE_PROD};
  // Values chosen so every order of evaluation gives bitwise the same result: small integers
  // for float sums, rare powers of two for float products; ints wrap (order independent).
  auto value = [](int32_t dt, int32_t rop, int64_t i) -> Val {
    const uint64_t h = uint64_t(i) * 0x9E3779B97F4A7C15ull >> 40;
    if (dt == RVL_DTYPE_BOOL) return I(rop == RVL_REDUCE_PROD ? (h % 5000 != 0) : (h % 3000 == 0));
    if (!is_float(dt)) return I(int64_t(h % 1000) - (dt == RVL_DTYPE_U8 ? 0 : 500));
    if (rop == RVL_REDUCE_PROD) return F(i % 65536 == 7 ? 2.0 : i % 65536 == 99 ? 0.5 : i % 100003 == 5 ? -1.0 : 1.0);
    return F(double(h % 4) - (rop == RVL_REDUCE_MAX ? 1.5 : 0));
  };
  struct Shape { std::vector<int64_t> shape; std::vector<uint32_t> axes; };
  const Shape shapes[] = {
      {{16, 256, 256}, {7u, 6u, 1u}},          // 1M elements: all axes, few outputs, many outputs
      {{8, 9, 10}, {0u, 1u, 2u, 4u, 5u, 3u}},  // small: none and assorted subsets
      {{5, 0, 3}, {2u, 5u}},                   // empty reduced extent: identity
  };
  for (int32_t dt : kDtypes) {
    for (int32_t rop : rops) {
      for (const Shape& s : shapes) {
        int64_t total = 1;
        for (int64_t e : s.shape) total *= e;
        for (uint32_t axes : s.axes) {
          ProgramCase c;
          c.shape = s.shape;
          c.inputs = {filled(dt, total, [&](int64_t i) { return value(dt, rop, i); })};
          c.views = {full(c.shape)};
          c.code = {load(dt, 0)};
          c.reduce_op = rop;
          c.reduce_axes = axes;
          // Output: kept axes with doubled strides (gaps stay untouched), reduced axes stride 0.
          std::vector<int64_t> strides(s.shape.size());
          int64_t st = 2;
          for (int d = int(s.shape.size()) - 1; d >= 0; --d) {
            if ((axes >> d) & 1) continue;
            strides[d] = st;
            st *= s.shape[d];
          }
          c.out = sentinel_buf(dt, st + 1);
          c.out_view = make_view(int(s.shape.size()), s.shape, strides, 1);
          c.run("reduce op " + std::to_string(rop) + " " + kDtypeNames[dt] + " axes " + std::to_string(axes) +
                " shape " + std::to_string(total));
        }
      }
    }
  }
  // NaN propagates through a MAX reduction; a fused program (sum of a*b, b broadcast).
  ProgramCase nan;
  nan.shape = {4, 100000};
  nan.inputs = {filled(RVL_DTYPE_F32, 400000, [](int64_t i) { return F(i == 150000 ? std::nan("") : double(i % 7)); })};
  nan.views = {full(nan.shape)};
  nan.code = {load(RVL_DTYPE_F32, 0)};
  nan.reduce_op = RVL_REDUCE_MAX;
  nan.reduce_axes = 2;
  nan.out = sentinel_buf(RVL_DTYPE_F32, 4);
  nan.out_view = make_view(2, nan.shape, {1, 0});
  nan.run("max with NaN");
  ProgramCase dot;
  dot.shape = {3, 1 << 18};
  dot.inputs = {filled(RVL_DTYPE_F64, 3 << 18, [](int64_t i) { return F(double(i % 5)); }),
                filled(RVL_DTYPE_F64, 1 << 18, [](int64_t i) { return F(double(i % 3) - 1); })};
  dot.views = {full(dot.shape), make_view(2, dot.shape, {0, 1})};
  dot.code = {load(RVL_DTYPE_F64, 0), load(RVL_DTYPE_F64, 1), ins(RVL_OP_MUL, RVL_DTYPE_F64, 0, 1)};
  dot.reduce_op = RVL_REDUCE_SUM;
  dot.reduce_axes = 2;
  dot.out = sentinel_buf(RVL_DTYPE_F64, 3);
  dot.out_view = make_view(2, dot.shape, {1, 0});
  dot.run("dot products");
}

BOOST_AUTO_TEST_SUITE_END()
