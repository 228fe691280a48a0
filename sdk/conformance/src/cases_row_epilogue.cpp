// Reductions with a row epilogue (ABI 1.10): softmax e^(x - lse), log_softmax x - lse, x / sum,
// x - max, over rows (the one-pass layout), columns and interleaved axes (two passes), long
// rows (split across threads), empty extents, special values (NaN, ±inf rows) and a gapped
// output with an offset. Expected values come from the reference interpreter, which runs the
// plain reduction into a buffer and then the epilogue element by element (reference_kernels.cpp).
//
// Optional: a device whose rvl_device_properties.reduce_epilogue_ops lacks the reduction gets
// the case as a skip (ProgramCase::run).
#include "kernel_case.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace rvl::conformance {
// A named namespace: the conformance runner is a unity build, whose other case files keep
// helpers of the same names (add, kInf, special_rows) in their anonymous namespaces.
namespace row_epi {

constexpr double kLog2e = 1.4426950408889634;
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

enum class Epi { Softmax, LogSoftmax, Divide, Subtract };

// `values` of dtype vdt (the reduction reads them as they are, or widened to acc for a
// widening LOGSUMEXP), then the epilogue over the same input.
ProgramCase row_case(const std::vector<int64_t>& shape, uint32_t axes, int32_t rop, Epi epi, int32_t dt,
                     ref::HostBuffer data, int32_t acc = -1) {
  if (acc < 0) acc = dt;
  ProgramCase pc = simple_program(shape, {{std::move(data), contiguous(shape)}}, {load(dt, 0)},
                                  threshold(Accuracy::Accumulation, dt));
  pc.reduce_op = rop;
  pc.reduce_axes = axes;
  pc.acc_dtype = acc;
  // x in the accumulator's dtype (a CAST when it widens), then the epilogue's arithmetic.
  std::vector<rvl_instruction>& e = pc.epilogue;
  e = {load(dt, 0)};
  int32_t x = 0;
  if (acc != dt) e.push_back(ins(RVL_OP_CAST, acc, 0)), x = 1;
  e.push_back(ins(RVL_OP_ACC, acc));
  const int32_t a = int32_t(e.size()) - 1;
  switch (epi) {
    case Epi::Softmax:
    case Epi::LogSoftmax:
    case Epi::Subtract:
      e.push_back(ins(RVL_OP_NEG, acc, a));
      e.push_back(ins(RVL_OP_ADD, acc, x, a + 1));
      break;
    case Epi::Divide:
      e.push_back(ins(RVL_OP_RECIP, acc, a));
      e.push_back(ins(RVL_OP_MUL, acc, x, a + 1));
      break;
  }
  if (acc != dt) e.push_back(ins(RVL_OP_CAST, dt, int32_t(e.size()) - 1));
  if (epi == Epi::Softmax) {
    const int32_t z = int32_t(e.size()) - 1;
    e.push_back(const_f(dt, kLog2e));
    e.push_back(ins(RVL_OP_MUL, dt, z, z + 1));
    e.push_back(ins(RVL_OP_EXP2, dt, z + 2));
    pc.threshold = std::max(pc.threshold, threshold(Accuracy::Transcendental, dt));
  }
  if (epi == Epi::Divide) pc.threshold = std::max(pc.threshold, threshold(Accuracy::Rounding, dt));
  return pc;
}

void add(const std::string& name, std::function<ProgramCase()> make) {
  add_case("row_epilogue", name, [make](Measure& m) { make().run(m); });
}

bool has_lse() {
  const Session& s = session();
  return RVL_HAS_MEMBER(&s.props, rvl_device_properties, reduce_ops) && ((s.props.reduce_ops >> RVL_REDUCE_LOGSUMEXP) & 1u);
}

ProgramCase lse_case(const std::vector<int64_t>& shape, uint32_t axes, Epi epi, int32_t dt, ref::HostBuffer data,
                     int32_t acc = -1) {
  if (!has_lse()) throw Skip("the device does not list LOGSUMEXP in rvl_device_properties.reduce_ops");
  return row_case(shape, axes, RVL_REDUCE_LOGSUMEXP, epi, dt, std::move(data), acc);
}

// Rows of 6: all -inf, one +inf, NaN, ±1e4 (exp overflows), tiny values.
std::vector<ref::Value> special_rows() {
  const std::vector<std::vector<double>> rows = {{-kInf, -kInf, -kInf, -kInf, -kInf, -kInf},
                                                 {-kInf, 1.5, -kInf, -2, -kInf, 0},
                                                 {1, kInf, -3, 2, 0, -1},
                                                 {1, 2, kNaN, 3, kInf, -kInf},
                                                 {1e4, -1e4, 9999.5, 0, -kInf, 1e4},
                                                 {-1e4, -1e4, -1e4, -1e4, -1e4, -1e4},
                                                 {88.8, 89, -88.8, 0, 709.8, 710}};
  std::vector<ref::Value> v;
  for (const auto& r : rows)
    for (double x : r) v.push_back(ref::fval(x));
  return v;
}

}  // namespace row_epi

void register_row_epilogue_cases() {
  using row_epi::Epi;
  using row_epi::lse_case;
  using row_epi::row_case;
  const auto add = row_epi::add;
  const auto special_rows = row_epi::special_rows;
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_F64}) {
    const std::string d = dtype_str(dt);
    // Shapes and axes: rows (one pass), 4-d with the last two reduced (one pass), columns and
    // interleaved axes (two passes), many short rows, long rows split across threads.
    const std::vector<std::pair<std::vector<int64_t>, uint32_t>> layouts = {
        {{5, 37}, 2u}, {{3, 4, 5, 2}, 12u}, {{37, 5}, 1u}, {{3, 4, 5, 2}, 5u}, {{1031, 129}, 2u},
        {{300, 257}, 2u}, {{3, 70001}, 2u}, {{1, 1, 9}, 4u}};
    for (const auto& [shape, axes] : layouts) {
      const std::string tag = std::to_string(count(shape)) + "_axes" + std::to_string(axes);
      add("softmax/" + d + "/" + tag, [=, shape = shape, axes = axes] {
        return lse_case(shape, axes, Epi::Softmax, dt, make_data(dt, count(shape), 41 + axes, Data::Mixed));
      });
      add("log_softmax/" + d + "/" + tag, [=, shape = shape, axes = axes] {
        return lse_case(shape, axes, Epi::LogSoftmax, dt, make_data(dt, count(shape), 43 + axes, Data::Mixed));
      });
      add("sum_divide/" + d + "/" + tag, [=, shape = shape, axes = axes] {
        return row_case(shape, axes, RVL_REDUCE_SUM, Epi::Divide, dt, make_data(dt, count(shape), 47, Data::Positive));
      });
      add("max_subtract/" + d + "/" + tag, [=, shape = shape, axes = axes] {
        return row_case(shape, axes, RVL_REDUCE_MAX, Epi::Subtract, dt, make_data(dt, count(shape), 53, Data::Mixed));
      });
    }
    add("softmax/" + d + "/large_magnitude", [=] {  // ±1e4: e^x overflows, e^(x - lse) must not
      ref::HostBuffer x = make_data(dt, 7000, 59, Data::Mixed);
      for (int64_t i = 0; i < x.elements(); ++i) x.set(i, ref::fval(x.get(i).f * 2500));
      return lse_case({7, 1000}, 2u, Epi::Softmax, dt, std::move(x));
    });
    add("softmax/" + d + "/special_rows", [=] {
      return lse_case({7, 6}, 2u, Epi::Softmax, dt, make_values(dt, special_rows()));
    });
    add("log_softmax/" + d + "/special_rows", [=] {
      return lse_case({7, 6}, 2u, Epi::LogSoftmax, dt, make_values(dt, special_rows()));
    });
    add("softmax/" + d + "/special_columns", [=] {  // the same values along axis 0
      ProgramCase pc = lse_case({6, 7}, 1u, Epi::Softmax, dt, make_values(dt, special_rows()));
      pc.inputs[0].view = view_of({6, 7}, {1, 6});
      return pc;
    });
    add("softmax/" + d + "/specials_data", [=] {
      return lse_case({9, 40}, 2u, Epi::Softmax, dt, make_data(dt, 360, 61, Data::Specials));
    });
    add("softmax/" + d + "/empty_rows", [=] {  // nothing to write; the marker stays
      ProgramCase pc = lse_case({3, 0}, 2u, Epi::Softmax, dt, make_data(dt, 0, 1));
      pc.out = make_data(dt, 1, 5, Data::Small);
      return pc;
    });
    add("softmax/" + d + "/empty_kept", [=] {
      ProgramCase pc = lse_case({0, 5}, 2u, Epi::Softmax, dt, make_data(dt, 0, 1));
      pc.out = make_data(dt, 1, 5, Data::Small);
      return pc;
    });
    add("softmax/" + d + "/strided_output", [=] {  // gaps and an offset that must stay untouched
      ProgramCase pc = lse_case({6, 37}, 2u, Epi::Softmax, dt, make_data(dt, 222, 67, Data::Mixed));
      pc.out = make_data(dt, 6 * 40 + 3, 5, Data::Small);
      pc.out_view = view_of({6, 37}, {40, 1}, 3);
      return pc;
    });
  }
  // The core's softmax on f32: f32 values, an f64 accumulator (the widening LOGSUMEXP), the
  // subtraction in f64, e^z in f32.
  const int32_t F = RVL_DTYPE_F32;
  for (const auto& [shape, axes] : std::vector<std::pair<std::vector<int64_t>, uint32_t>>{
           {{64, 4096}, 2u}, {{5, 37}, 2u}, {{37, 5}, 1u}, {{3, 70001}, 2u}})
    for (Epi epi : {Epi::Softmax, Epi::LogSoftmax})
      add(std::string(epi == Epi::Softmax ? "softmax" : "log_softmax") + "/f32_acc_f64/" + std::to_string(count(shape)) +
              "_axes" + std::to_string(axes),
          [=, shape = shape, axes = axes] {
            return lse_case(shape, axes, epi, F, make_data(F, count(shape), 71, Data::Mixed), RVL_DTYPE_F64);
          });
  add("softmax/f32_acc_f64/special_rows", [=] {
    return lse_case({7, 6}, 2u, Epi::Softmax, F, make_values(F, special_rows()), RVL_DTYPE_F64);
  });
  // Halves (ABI 1.7), as the core sends them: the reduction over the values widened to f32 (a
  // CAST ends its list, so acc_dtype is F32) with the epilogue rounding back; and sum / max in
  // the half itself, whose ACC is the reduced value rounded to the half (a device computing in
  // f32 must round it before the epilogue reads it). Rows, columns and long rows.
  for (int32_t dt : {RVL_DTYPE_F16, RVL_DTYPE_BF16}) {
    const std::string d = dtype_str(dt);
    for (const auto& [shape, axes] : std::vector<std::pair<std::vector<int64_t>, uint32_t>>{
             {{5, 37}, 2u}, {{37, 5}, 1u}, {{300, 257}, 2u}}) {
      const std::string tag = std::to_string(count(shape)) + "_axes" + std::to_string(axes);
      add("softmax/" + d + "_acc_f32/" + tag, [=, shape = shape, axes = axes] {
        ProgramCase pc = lse_case(shape, axes, Epi::Softmax, dt, make_data(dt, count(shape), 73, Data::Mixed), F);
        pc.code.push_back(ins(RVL_OP_CAST, F, 0));
        return pc;
      });
      // LOGSUMEXP over the half values themselves (acc_dtype the half): accumulated in f32 and
      // rounded to the half before the epilogue reads it, like sum and max below.
      add("log_softmax/" + d + "/" + tag, [=, shape = shape, axes = axes] {
        return lse_case(shape, axes, Epi::LogSoftmax, dt, make_data(dt, count(shape), 89, Data::Mixed));
      });
      add("sum_divide/" + d + "/" + tag, [=, shape = shape, axes = axes] {
        return row_case(shape, axes, RVL_REDUCE_SUM, Epi::Divide, dt, make_data(dt, count(shape), 79, Data::Positive));
      });
      add("max_subtract/" + d + "/" + tag, [=, shape = shape, axes = axes] {
        return row_case(shape, axes, RVL_REDUCE_MAX, Epi::Subtract, dt, make_data(dt, count(shape), 83, Data::Mixed));
      });
    }
  }
}

}  // namespace rvl::conformance
