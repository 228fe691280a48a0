// RVL_REDUCE_LOGSUMEXP (ABI 1.4): f32/f64 over assorted axes and shapes, long rows (the
// parallel split), values of ±1e4 where a naive exp(x) overflows, empty extents, rows of -inf,
// +inf and NaN, and a fused producer into a strided output. Expected values come from the
// reference interpreter's logsumexp_two_pass (reference_kernels.cpp): the maximum first, then
// m + log(sum exp(x - m)) in f64, deliberately not the online rule a plugin uses.
//
// The reduction is optional: a device that does not set its bit in
// rvl_device_properties.reduce_ops (every 1.0-1.3 plugin) gets every case as a skip.
#include "kernel_case.hpp"

#include <cmath>
#include <limits>

namespace rvl::conformance {
namespace {

void require_logsumexp() {
  const Session& s = session();
  const bool stated = RVL_HAS_MEMBER(&s.props, rvl_device_properties, reduce_ops) && s.props.reduce_ops != 0;
  if (!stated || !((s.props.reduce_ops >> RVL_REDUCE_LOGSUMEXP) & 1u))
    throw Skip("the device does not list LOGSUMEXP in rvl_device_properties.reduce_ops");
}

// logsumexp over `axes` of (input * scale): scale 2500 turns Data::Mixed's [-4, 4) into ±1e4.
ProgramCase lse(const std::vector<int64_t>& shape, uint32_t axes, int32_t dt, ref::HostBuffer data,
                double scale = 1) {
  std::vector<rvl_instruction> code{load(dt, 0)};
  if (scale != 1) code = {load(dt, 0), const_f(dt, scale), ins(RVL_OP_MUL, dt, 0, 1)};
  ProgramCase pc = simple_program(shape, {{std::move(data), contiguous(shape)}}, code,
                                  threshold(Accuracy::Accumulation, dt));
  int64_t oe = 0;
  pc.out_view = reduced_output(shape, axes, &oe);
  pc.out = make_data(dt, oe, 5, Data::Small);
  pc.reduce_op = RVL_REDUCE_LOGSUMEXP;
  pc.reduce_axes = axes;
  return pc;
}

void add(const std::string& name, std::function<ProgramCase()> make) {
  add_case("logsumexp", name, [make](Measure& m) {
    require_logsumexp();
    make().run(m);
  });
}

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Rows of 6 that exercise every special-value rule of backend.h.
std::vector<ref::Value> special_rows() {
  const std::vector<std::vector<double>> rows = {
      {-kInf, -kInf, -kInf, -kInf, -kInf, -kInf},  // all -inf -> -inf (not NaN)
      {-kInf, 1.5, -kInf, -2, -kInf, 0},           // -inf contributes nothing
      {1, kInf, -3, 2, 0, -1},                     // +inf -> +inf
      {kInf, -kInf, 0, 0, 0, 0},                   // +inf and -inf -> +inf
      {1, 2, kNaN, 3, kInf, -kInf},                // NaN wins
      {kNaN, -kInf, -kInf, -kInf, -kInf, -kInf},   // NaN first
      {1e4, -1e4, 9999.5, 0, -kInf, 1e4},          // exp(1e4) overflows any float
      {-1e4, -1e4, -1e4, -1e4, -1e4, -1e4},        // exp(-1e4) underflows to 0
      {1e-30, -1e-30, 0, 0, 0, 0},
      {88.8, 89, -88.8, 0, 709.8, 710}};           // the f32 and f64 exp overflow points
  std::vector<ref::Value> v;
  for (const auto& r : rows)
    for (double x : r) v.push_back(ref::fval(x));
  return v;
}

}  // namespace

void register_logsumexp_cases() {
  const std::vector<int64_t> shape{3, 4, 5, 2};
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_F64}) {
    const std::string d = dtype_str(dt);
    for (uint32_t axes = 0; axes < 16; ++axes) {
      std::string ax;
      for (int k = 0; k < 4; ++k)
        if ((axes >> k) & 1u) ax += std::to_string(k);
      add("LOGSUMEXP/" + d + "/axes{" + ax + "}", [=] {
        return lse(shape, axes, dt, make_data(dt, count(shape), 300 + axes, Data::Mixed));
      });
    }
    // Long rows and columns: block boundaries, the split of few outputs across threads, the
    // reduced-outer layout.
    for (const auto& [s2, axes] : std::vector<std::pair<std::vector<int64_t>, uint32_t>>{
             {{100003}, 1u}, {{129, 1031}, 2u}, {{1031, 129}, 1u}, {{17, 33, 65}, 5u}, {{3, 70001}, 2u},
             {{4096, 3}, 1u}, {{300, 257}, 2u}})
      add("LOGSUMEXP/" + d + "/long_" + std::to_string(count(s2)) + "_axes" + std::to_string(axes),
          [=, s2 = s2, axes = axes] { return lse(s2, axes, dt, make_data(dt, count(s2), 11, Data::Mixed)); });
    // ±1e4: exp(x) overflows (f32 and f64); the result must be finite and accurate.
    for (const auto& [s2, axes] : std::vector<std::pair<std::vector<int64_t>, uint32_t>>{
             {{7, 1000}, 2u}, {{1000, 7}, 1u}, {{50001}, 1u}, {{2, 5000, 3}, 2u}})
      add("LOGSUMEXP/" + d + "/large_magnitude_" + std::to_string(count(s2)) + "_axes" + std::to_string(axes),
          [=, s2 = s2, axes = axes] {
            return lse(s2, axes, dt, make_data(dt, count(s2), 13, Data::Mixed), 2500.0);
          });
    add("LOGSUMEXP/" + d + "/empty_extent", [=] { return lse({3, 0}, 2u, dt, make_data(dt, 0, 1)); });
    add("LOGSUMEXP/" + d + "/empty_kept", [=] { return lse({0, 5}, 2u, dt, make_data(dt, 0, 1)); });
    add("LOGSUMEXP/" + d + "/special_rows", [=] {
      return lse({10, 6}, 2u, dt, make_values(dt, special_rows()));
    });
    add("LOGSUMEXP/" + d + "/special_columns", [=] {  // the same values, reduced along axis 0
      ProgramCase pc = lse({10, 6}, 2u, dt, make_values(dt, special_rows()));
      pc.inputs[0].view = view_of({6, 10}, {1, 6});
      pc.shape = {6, 10};
      int64_t oe = 0;
      pc.out_view = reduced_output({6, 10}, 2u, &oe);
      pc.out = make_data(dt, oe, 5, Data::Small);
      return pc;
    });
    add("LOGSUMEXP/" + d + "/special_rows_reduced_outer", [=] {  // axis 0: columns mix them
      return lse({10, 6}, 1u, dt, make_values(dt, special_rows()));
    });
    add("LOGSUMEXP/" + d + "/specials_data_reduced_outer", [=] {
      return lse({300, 40}, 1u, dt, make_data(dt, 12000, 19, Data::Specials));
    });
    add("LOGSUMEXP/" + d + "/specials_data", [=] {  // NaN, ±inf, ±0, tiny, huge cycling
      return lse({9, 40}, 2u, dt, make_data(dt, 360, 17, Data::Specials));
    });
    // Long rows holding one special value deep inside (past the first blocks and splits).
    for (const auto& [name, value] : std::vector<std::pair<std::string, double>>{
             {"one_pinf", kInf}, {"one_nan", kNaN}, {"one_large", 1e4}})
      add("LOGSUMEXP/" + d + "/long_row_" + name, [=, value = value] {
        std::vector<ref::Value> v;
        for (int64_t i = 0; i < 2 * 40000; ++i) v.push_back(ref::fval(i == 40000 + 30001 ? value : -0.001 * (i % 977)));
        return lse({2, 40000}, 2u, dt, make_values(dt, v));
      });
    add("LOGSUMEXP/" + d + "/long_row_all_ninf", [=] {
      return lse({3, 20000}, 2u, dt, make_values(dt, std::vector<ref::Value>(60000, ref::fval(-kInf))));
    });
    // A fused producer (x * 3 - 1) into a gapped output with an offset.
    add("LOGSUMEXP/" + d + "/fused_strided_output", [=] {
      const std::vector<int64_t> s2{6, 37};
      ProgramCase pc = lse(s2, 2u, dt, make_data(dt, count(s2), 23, Data::Mixed));
      pc.code = {load(dt, 0), const_f(dt, 3), ins(RVL_OP_MUL, dt, 0, 1), const_f(dt, -1), ins(RVL_OP_ADD, dt, 2, 3)};
      pc.out = make_data(dt, 20, 5, Data::Small);
      pc.out_view = view_of(s2, {3, 0}, 2);
      return pc;
    });
  }
  // Widening: f32 values into an f64 output (states in f32, m + log s in f64). The f32
  // accumulation class: the exponentials are f32's.
  auto widen = [](ProgramCase pc) {
    int64_t oe = 1;
    for (size_t d = 0; d < pc.shape.size(); ++d)
      if (!((pc.reduce_axes >> d) & 1u)) oe *= pc.shape[d];
    pc.out = make_data(RVL_DTYPE_F64, oe, 5, Data::Small);
    pc.threshold = threshold(Accuracy::Accumulation, RVL_DTYPE_F32);
    return pc;
  };
  const int32_t F = RVL_DTYPE_F32;
  for (const auto& [s2, axes] : std::vector<std::pair<std::vector<int64_t>, uint32_t>>{
           {{3, 4, 5, 2}, 10u}, {{129, 1031}, 2u}, {{1031, 129}, 1u}, {{100003}, 1u}})
    add("LOGSUMEXP/f32_to_f64/" + std::to_string(count(s2)) + "_axes" + std::to_string(axes),
        [=, s2 = s2, axes = axes] { return widen(lse(s2, axes, F, make_data(F, count(s2), 29, Data::Mixed))); });
  add("LOGSUMEXP/f32_to_f64/large_magnitude", [=] {
    return widen(lse({7, 1000}, 2u, F, make_data(F, 7000, 31, Data::Mixed), 2500.0));
  });
  add("LOGSUMEXP/f32_to_f64/special_rows", [=] { return widen(lse({10, 6}, 2u, F, make_values(F, special_rows()))); });
  add("LOGSUMEXP/f32_to_f64/special_rows_reduced_outer", [=] {
    return widen(lse({10, 6}, 1u, F, make_values(F, special_rows())));
  });
  add("LOGSUMEXP/f32_to_f64/empty_extent", [=] { return widen(lse({3, 0}, 2u, F, make_data(F, 0, 1))); });
}

}  // namespace rvl::conformance
