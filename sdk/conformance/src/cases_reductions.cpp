// Reductions: every subset of up to 4 axes x SUM/MAX/PROD x every dtype; long reductions;
// empty reduced extents (identity); NaN propagation through MAX; strided outputs.
#include "kernel_case.hpp"

namespace rvl::conformance {
namespace {

const char* rop_name(int32_t r) {
  return r == RVL_REDUCE_SUM ? "SUM" : r == RVL_REDUCE_MAX ? "MAX" : "PROD";
}

ProgramCase reduction(const std::vector<int64_t>& shape, uint32_t axes, int32_t rop, int32_t dt,
                      Data kind, uint64_t seed) {
  const int64_t n = count(shape);
  ProgramCase pc = simple_program(shape, {{make_data(dt, n, seed, kind), contiguous(shape)}},
                                  {load(dt, 0)}, threshold(Accuracy::Accumulation, dt));
  int64_t oe = 0;
  pc.out_view = reduced_output(shape, axes, &oe);
  pc.out = make_data(dt, oe, seed + 1, Data::Small);
  pc.reduce_op = rop;
  pc.reduce_axes = axes;
  return pc;
}

}  // namespace

void register_reduction_cases() {
  const std::vector<int64_t> shape{3, 4, 5, 2};
  for (int32_t rop : {RVL_REDUCE_SUM, RVL_REDUCE_MAX, RVL_REDUCE_PROD})
    for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_F64, RVL_DTYPE_I32, RVL_DTYPE_I64, RVL_DTYPE_U8,
                       RVL_DTYPE_BOOL})
      for (uint32_t axes = 0; axes < 16; ++axes) {
        std::string ax;
        for (int d = 0; d < 4; ++d) if ((axes >> d) & 1u) ax += std::to_string(d);
        add_case("reductions",
                 std::string(rop_name(rop)) + "/" + dtype_str(dt) + "/axes{" + ax + "}",
                 [=](Measure& m) {
                   // PROD over floats: values near 1 so 120 factors stay finite.
                   const Data kind = rop == RVL_REDUCE_PROD && ref::is_float(dt) ? Data::Positive
                                     : rop == RVL_REDUCE_MAX ? Data::Mixed : Data::Small;
                   ProgramCase pc = reduction(shape, axes, rop, dt, kind, 100 + axes);
                   if (rop == RVL_REDUCE_PROD && ref::is_float(dt))  // x -> x/2 + 0.6 in [0.7, 2.5)
                     pc.code = {load(dt, 0), const_f(dt, 0.25), ins(RVL_OP_MUL, dt, 0, 1),
                                const_f(dt, 0.9), ins(RVL_OP_ADD, dt, 2, 3)};
                   pc.run(m);
                 });
      }
  // Long reductions (many blocks / a tree reduction on a GPU), odd lengths.
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_F64, RVL_DTYPE_I32})
    for (const auto& [shape2, axes] : std::vector<std::pair<std::vector<int64_t>, uint32_t>>{
             {{100003}, 1u}, {{129, 1031}, 2u}, {{1031, 129}, 1u}, {{17, 33, 65}, 5u}})
      add_case("reductions", std::string("SUM/") + dtype_str(dt) + "/long_" + std::to_string(count(shape2)) +
                   "_axes" + std::to_string(axes),
               [=, shape2 = shape2, axes = axes](Measure& m) {
                 reduction(shape2, axes, RVL_REDUCE_SUM, dt, Data::Small, 7).run(m);
               });
  // MAX propagates NaN; SUM of +Inf and -Inf is NaN.
  add_case("reductions", "MAX/f32/nan_propagates", [](Measure& m) {
    reduction({4, 11}, 2u, RVL_REDUCE_MAX, RVL_DTYPE_F32, Data::Specials, 1).run(m);
  });
  add_case("reductions", "SUM/f64/inf_and_nan", [](Measure& m) {
    reduction({11, 4}, 1u, RVL_REDUCE_SUM, RVL_DTYPE_F64, Data::Specials, 1).run(m);
  });
  // An empty reduced extent stores the identity, in every dtype (MAX's is the type's lowest
  // value: -inf, INT8_MIN, ..., 0 for the unsigned types and false).
  for (int32_t rop : {RVL_REDUCE_SUM, RVL_REDUCE_MAX, RVL_REDUCE_PROD})
    for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_F64, RVL_DTYPE_F16, RVL_DTYPE_BF16, RVL_DTYPE_I8,
                       RVL_DTYPE_I16, RVL_DTYPE_I32, RVL_DTYPE_I64, RVL_DTYPE_U8, RVL_DTYPE_U16,
                       RVL_DTYPE_U32, RVL_DTYPE_U64, RVL_DTYPE_BOOL})
      add_case("reductions", std::string(rop_name(rop)) + "/" + dtype_str(dt) + "/empty_extent",
               [=](Measure& m) { reduction({3, 0}, 2u, rop, dt, Data::Small, 3).run(m); });
  // Reduction fused with element-wise work, into a strided output with an offset.
  add_case("reductions", "SUM/f32/fused_strided_output", [](Measure& m) {
    const std::vector<int64_t> s{6, 9};
    ProgramCase pc = simple_program(
        s, {{make_data(RVL_DTYPE_F32, 54, 3), view_of(s, {1, 6})}, {make_data(RVL_DTYPE_F32, 9, 4), view_of(s, {0, 1})}},
        {load(RVL_DTYPE_F32, 0), load(RVL_DTYPE_F32, 1), ins(RVL_OP_MUL, RVL_DTYPE_F32, 0, 1)},
        threshold(Accuracy::Accumulation, RVL_DTYPE_F32));
    pc.reduce_op = RVL_REDUCE_SUM;
    pc.reduce_axes = 2u;
    pc.out = make_data(RVL_DTYPE_F32, 20, 5);
    pc.out_view = view_of(s, {-3, 0}, 17);
    pc.run(m);
  });
}

}  // namespace rvl::conformance
