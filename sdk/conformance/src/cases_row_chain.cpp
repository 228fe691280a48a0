// Chains of row reductions (ABI 1.11, docs/abi.md §19): layer norm (the sum, then the sum of
// squared deviations reading it, then the normalising epilogue reading both), the
// cross-entropy per-row loss (logsumexp, then the target's term reading it, stored reduced),
// a 3-stage chain whose epilogue reads every stage, and RMS norm as the 1.10 form it needs;
// rows of odd lengths, rows longer than a block, columns and interleaved axes, every float
// dtype the device runs, NaN and ±inf rows; and malformed chains, refused with
// INVALID_ARGUMENT before anything is written. Expected values: the reference interpreter,
// which reduces each stage separately into a buffer (reference_kernels.cpp, run_chain).
//
// Optional: a device whose rvl_device_properties.reduce_chain_ops lacks a reduction of the
// chain gets the case as a skip (ProgramCase::run).
#include "kernel_case.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

namespace rvl::conformance {
// A named namespace (the conformance runner is a unity build; see cases_row_epilogue.cpp).
namespace row_chain {

constexpr double kLog2e = 1.4426950408889634;
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kEps = 1e-5;

rvl_instruction acc(int32_t dt, int32_t k) {
  rvl_instruction a = ins(RVL_OP_ACC, dt);
  a.arg = k;
  return a;
}

// Appends `i` and returns its index.
int32_t push(std::vector<rvl_instruction>& code, rvl_instruction i) {
  code.push_back(i);
  return int32_t(code.size()) - 1;
}

// The float dtype arithmetic happens in: halves compute in f32 (their values are CAST).
int32_t wide(int32_t dt) { return rvl::dtype_is_half(dt) ? RVL_DTYPE_F32 : dt; }

// x (input 0) as the accumulator dtype w.
int32_t load_x(std::vector<rvl_instruction>& c, int32_t dt, int32_t w) {
  const int32_t x = push(c, load(dt, 0));
  return dt == w ? x : push(c, ins(RVL_OP_CAST, w, x));
}

// x - ACC(k) / n in dtype w.
int32_t centred(std::vector<rvl_instruction>& c, int32_t dt, int32_t w, int32_t k, int64_t n) {
  const int32_t x = load_x(c, dt, w);
  const int32_t a = push(c, acc(w, k));
  const int32_t inv = push(c, const_f(w, 1.0 / double(n)));
  const int32_t mean = push(c, ins(RVL_OP_MUL, w, a, inv));
  const int32_t neg = push(c, ins(RVL_OP_NEG, w, mean));
  return push(c, ins(RVL_OP_ADD, w, x, neg));
}

std::vector<int64_t> row_shape(const std::vector<int64_t>& shape, uint32_t axes) {
  std::vector<int64_t> r = shape;
  for (size_t d = 0; d < r.size(); ++d)
    if (!((axes >> d) & 1u)) r[d] = 1;
  return r;
}

int64_t reduced_count(const std::vector<int64_t>& shape, uint32_t axes) { return count(row_shape(shape, axes)); }

// A [reduced axes] parameter (g or b) broadcast over the kept axes.
Input row_param(const std::vector<int64_t>& shape, uint32_t axes, int32_t dt, uint64_t seed) {
  const std::vector<int64_t> rs = row_shape(shape, axes);
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t st = 1;
  for (int d = int(shape.size()) - 1; d >= 0; --d)
    if ((axes >> d) & 1u) strides[d] = st, st *= shape[d];
  return {make_data(dt, count(rs), seed, Data::Positive), view_of(shape, strides)};
}

// Layer norm over the reduced axes: y = (x - mean) * rsqrt(var + eps) * g + b, as stage 0
// (sum x), the program's own reduction (sum (x - mean)^2) and the epilogue.
ProgramCase layer_norm(const std::vector<int64_t>& shape, uint32_t axes, int32_t dt, ref::HostBuffer x) {
  const int32_t w = wide(dt);
  const int64_t n = reduced_count(shape, axes);
  ProgramCase pc = simple_program(shape, {{std::move(x), contiguous(shape)}}, {load(dt, 0)},
                                  threshold(Accuracy::Accumulation, dt) + threshold(Accuracy::Rounding, dt));
  pc.code.clear();  // the placeholder that named the output dtype
  pc.inputs.push_back(row_param(shape, axes, dt, 7));
  pc.inputs.push_back(row_param(shape, axes, dt, 11));
  pc.reduce_op = RVL_REDUCE_SUM;
  pc.reduce_axes = axes;
  pc.acc_dtype = w;
  ProgramCase::Stage sum;
  sum.reduce_op = RVL_REDUCE_SUM;
  sum.acc_dtype = w;
  load_x(sum.code, dt, w);
  pc.stages = {sum};
  std::vector<rvl_instruction>& c = pc.code;
  const int32_t d = centred(c, dt, w, 1, n);
  push(c, ins(RVL_OP_MUL, w, d, d));
  std::vector<rvl_instruction>& e = pc.epilogue;
  const int32_t de = centred(e, dt, w, 1, n);
  const int32_t var = push(e, ins(RVL_OP_MUL, w, push(e, acc(w, 0)), push(e, const_f(w, 1.0 / double(n)))));
  const int32_t rstd = push(e, ins(RVL_OP_RECIP, w, push(e, ins(RVL_OP_SQRT, w, push(e, ins(RVL_OP_ADD, w, var, push(e, const_f(w, kEps))))))));
  int32_t g = push(e, load(dt, 1)), b = push(e, load(dt, 2));
  if (dt != w) g = push(e, ins(RVL_OP_CAST, w, g)), b = push(e, ins(RVL_OP_CAST, w, b));
  const int32_t y = push(e, ins(RVL_OP_ADD, w, push(e, ins(RVL_OP_MUL, w, push(e, ins(RVL_OP_MUL, w, de, rstd)), g)), b));
  if (dt != w) push(e, ins(RVL_OP_CAST, dt, y));
  return pc;
}

// RMS norm, y = x * rsqrt(mean(x^2) + eps) * g: one reduction and its epilogue (the 1.10 form,
// no stage needed); here so that the norm family is covered in one group.
ProgramCase rms_norm(const std::vector<int64_t>& shape, uint32_t axes, int32_t dt, ref::HostBuffer x) {
  const int32_t w = wide(dt);
  const int64_t n = reduced_count(shape, axes);
  ProgramCase pc = simple_program(shape, {{std::move(x), contiguous(shape)}}, {load(dt, 0)},
                                  threshold(Accuracy::Accumulation, dt) + threshold(Accuracy::Rounding, dt));
  pc.code.clear();
  pc.inputs.push_back(row_param(shape, axes, dt, 13));
  pc.reduce_op = RVL_REDUCE_SUM;
  pc.reduce_axes = axes;
  pc.acc_dtype = w;
  const int32_t xc = load_x(pc.code, dt, w);
  push(pc.code, ins(RVL_OP_MUL, w, xc, xc));
  std::vector<rvl_instruction>& e = pc.epilogue;
  const int32_t xe = load_x(e, dt, w);
  const int32_t ms = push(e, ins(RVL_OP_MUL, w, push(e, acc(w, 0)), push(e, const_f(w, 1.0 / double(n)))));
  const int32_t r = push(e, ins(RVL_OP_RECIP, w, push(e, ins(RVL_OP_SQRT, w, push(e, ins(RVL_OP_ADD, w, ms, push(e, const_f(w, kEps))))))));
  int32_t g = push(e, load(dt, 1));
  if (dt != w) g = push(e, ins(RVL_OP_CAST, w, g));
  const int32_t y = push(e, ins(RVL_OP_MUL, w, push(e, ins(RVL_OP_MUL, w, xe, r)), g));
  if (dt != w) push(e, ins(RVL_OP_CAST, dt, y));
  return pc;
}

// Cross-entropy's per-row loss over rows [rows, C]: logsumexp(x) - x[target], as stage 0
// (LOGSUMEXP) and a SUM of WHERE(iota == target, ACC1 - x, 0), stored reduced ([rows, 1]).
ProgramCase ce_loss(int64_t rows, int64_t C, int32_t dt, ref::HostBuffer x) {
  const std::vector<int64_t> shape{rows, C};
  std::vector<ref::Value> t, iota;
  for (int64_t r = 0; r < rows; ++r) t.push_back(ref::ival((r * 7 + 3) % std::max<int64_t>(C, 1)));
  for (int64_t c = 0; c < C; ++c) iota.push_back(ref::ival(c));
  const int32_t I = RVL_DTYPE_I32;
  ProgramCase pc = simple_program(shape, {{std::move(x), contiguous(shape)}, {make_values(I, t), view_of(shape, {1, 0})},
                                          {make_values(I, iota), view_of(shape, {0, 1})}},
                                  {load(dt, 0)}, threshold(Accuracy::Accumulation, dt) + threshold(Accuracy::Transcendental, dt));
  pc.code.clear();
  int64_t outs = 0;
  pc.out_view = reduced_output(shape, 2u, &outs);
  pc.out = make_data(dt, outs, 5, Data::Small);
  pc.reduce_op = RVL_REDUCE_SUM;
  pc.reduce_axes = 2u;
  ProgramCase::Stage lse;
  lse.reduce_op = RVL_REDUCE_LOGSUMEXP;
  lse.acc_dtype = dt;
  lse.code = {load(dt, 0)};
  pc.stages = {lse};
  std::vector<rvl_instruction>& c = pc.code;
  const int32_t xv = push(c, load(dt, 0));
  const int32_t ne = push(c, ins(RVL_OP_CMPNE, RVL_DTYPE_BOOL, push(c, load(I, 1)), push(c, load(I, 2))));
  const int32_t term = push(c, ins(RVL_OP_ADD, dt, push(c, acc(dt, 1)), push(c, ins(RVL_OP_NEG, dt, xv))));
  push(c, ins(RVL_OP_WHERE, dt, ne, push(c, const_f(dt, 0)), term));
  return pc;
}

// Three reductions and an epilogue reading all of them: m = max x, s = sum e^(x - m),
// E = sum x e^(x - m) / s (the softmax mean), y = e^(x - m) / s * (x - E).
ProgramCase three_stages(const std::vector<int64_t>& shape, uint32_t axes, int32_t dt, ref::HostBuffer x) {
  ProgramCase pc = simple_program(shape, {{std::move(x), contiguous(shape)}}, {load(dt, 0)},
                                  threshold(Accuracy::Accumulation, dt) + threshold(Accuracy::Transcendental, dt));
  pc.code.clear();
  pc.reduce_op = RVL_REDUCE_SUM;
  pc.reduce_axes = axes;
  pc.acc_dtype = dt;
  ProgramCase::Stage mx, sum;
  mx.reduce_op = RVL_REDUCE_MAX;
  mx.acc_dtype = sum.acc_dtype = dt;
  mx.code = {load(dt, 0)};
  // e^(x - ACC(m)) into c; returns its index.
  const auto expo = [dt](std::vector<rvl_instruction>& c, int32_t xv, int32_t m) {
    const int32_t z = push(c, ins(RVL_OP_ADD, dt, xv, push(c, ins(RVL_OP_NEG, dt, push(c, acc(dt, m))))));
    return push(c, ins(RVL_OP_EXP2, dt, push(c, ins(RVL_OP_MUL, dt, z, push(c, const_f(dt, kLog2e))))));
  };
  sum.reduce_op = RVL_REDUCE_SUM;
  expo(sum.code, push(sum.code, load(dt, 0)), 1);
  pc.stages = {mx, sum};
  std::vector<rvl_instruction>& c = pc.code;
  const int32_t xc = push(c, load(dt, 0));
  const int32_t pcv = push(c, ins(RVL_OP_MUL, dt, expo(c, xc, 1), push(c, ins(RVL_OP_RECIP, dt, push(c, acc(dt, 2))))));
  push(c, ins(RVL_OP_MUL, dt, pcv, xc));
  std::vector<rvl_instruction>& e = pc.epilogue;
  const int32_t xe = push(e, load(dt, 0));
  const int32_t pe = push(e, ins(RVL_OP_MUL, dt, expo(e, xe, 1), push(e, ins(RVL_OP_RECIP, dt, push(e, acc(dt, 2))))));
  const int32_t dev = push(e, ins(RVL_OP_ADD, dt, xe, push(e, ins(RVL_OP_NEG, dt, push(e, acc(dt, 0))))));
  push(e, ins(RVL_OP_MUL, dt, pe, dev));
  return pc;
}

void add(const std::string& name, std::function<ProgramCase()> make) {
  add_case("row_chain", name, [make](Measure& m) { make().run(m); });
}

// Rows of 6: all -inf, one +inf, NaN, ±1e4, a constant row (variance 0), large values.
ref::HostBuffer special_rows(int32_t dt) {
  const std::vector<std::vector<double>> rows = {{-kInf, -kInf, -kInf, -kInf, -kInf, -kInf},
                                                 {-kInf, 1.5, -kInf, -2, -kInf, 0},
                                                 {1, kInf, -3, 2, 0, -1},
                                                 {1, 2, kNaN, 3, kInf, -kInf},
                                                 {1e4, -1e4, 9999.5, 0, 3, 1e4},
                                                 {2.5, 2.5, 2.5, 2.5, 2.5, 2.5},
                                                 {60000, -60000, 1, 2, 3, 4}};
  std::vector<ref::Value> v;
  for (const auto& r : rows)
    for (double x : r) v.push_back(ref::fval(x));
  return make_values(dt, v);
}

// ---- malformed chains -----------------------------------------------------------------------
// A valid layer norm over [4, 6] f32 on device buffers, mutated; a device that lists SUM in its
// reduce_chain_ops must refuse each mutation with INVALID_ARGUMENT and write nothing.
struct Malformed {
  ProgramCase pc = layer_norm({4, 6}, 2u, RVL_DTYPE_F32, make_data(RVL_DTYPE_F32, 24, 3, Data::Mixed));
  std::vector<rvl_reduce_stage> stages;
  rvl_program p{};
  std::vector<std::unique_ptr<RawBuffer>> bufs;
  std::vector<rvl_operand> ops;
  Malformed() {
    const Session& s = session();
    const uint32_t chain = RVL_HAS_MEMBER(&s.props, rvl_device_properties, reduce_chain_ops) ? s.props.reduce_chain_ops : 0;
    if (!((chain >> RVL_REDUCE_SUM) & 1u)) throw Skip("the device does not list SUM in reduce_chain_ops (optional)");
    for (const Input& in : pc.inputs) {
      bufs.push_back(std::make_unique<RawBuffer>(uint64_t(in.data.bytes.size())));
      check_ok(s.api->buffer_write(nullptr, bufs.back()->get(), 0, in.data.bytes.data(), in.data.bytes.size()), "buffer_write");
      rvl_operand o{};
      o.struct_size = sizeof o;
      o.buffer = bufs.back()->get();
      o.dtype = in.data.dtype;
      o.view = in.view;
      ops.push_back(o);
    }
    bufs.push_back(std::make_unique<RawBuffer>(96));
    const std::vector<uint8_t> zeros(96, 0);
    check_ok(s.api->buffer_write(nullptr, bufs.back()->get(), 0, zeros.data(), 96), "buffer_write");
    rvl_operand o{};
    o.struct_size = sizeof o;
    o.buffer = bufs.back()->get();
    o.dtype = RVL_DTYPE_F32;
    o.view = contiguous({4, 6});
    for (const ProgramCase::Stage& st : pc.stages)
      stages.push_back({sizeof(rvl_reduce_stage), st.reduce_op, st.acc_dtype, int32_t(st.code.size()), st.code.data()});
    p.struct_size = sizeof p;
    p.rank = 2;
    p.shape[0] = 4, p.shape[1] = 6;
    p.n_inputs = int32_t(ops.size());
    p.inputs = ops.data();
    p.n_instructions = int32_t(pc.code.size());
    p.instructions = pc.code.data();
    p.reduce_op = RVL_REDUCE_SUM;
    p.reduce_axes = 2u;
    p.output = o;
    p.n_epilogue = int32_t(pc.epilogue.size());
    p.epilogue = pc.epilogue.data();
    p.acc_dtype = RVL_DTYPE_F32;
    p.n_stages = int32_t(stages.size());
    p.stages = stages.data();
  }
  rvl_error* run() { return session().api->execute_program(session().device, nullptr, &p); }
  void check_untouched() const {
    std::vector<uint8_t> bytes(96);
    check_ok(session().api->buffer_read(nullptr, bufs.back()->get(), 0, bytes.data(), 96), "buffer_read");
    for (uint8_t b : bytes)
      if (b != 0) throw Failure("the output was written although the kernel was rejected");
  }
};

void reject(const std::string& name, std::function<void(Malformed&)> mutate) {
  add_case("row_chain", "malformed/" + name, [mutate](Measure&) {
    Malformed m;
    mutate(m);
    check_error(m.run(), RVL_STATUS_INVALID_ARGUMENT, "the malformed chain");
    m.check_untouched();
  });
}

void register_malformed() {
  add_case("row_chain", "malformed/baseline_runs", [](Measure&) {  // the mutations' starting point is valid
    Malformed m;
    check_ok(m.run(), "execute_program");
    check_ok(session().api->synchronize(session().device), "synchronize");
  });
  // ACC k in the main list / the epilogue / a stage outside what it may read.
  reject("acc_index_past_stages", [](Malformed& m) { m.pc.code[1].arg = 2; });
  reject("acc_index_own_reduction_in_main", [](Malformed& m) { m.pc.code[1].arg = 0; });
  reject("acc_index_negative_in_epilogue", [](Malformed& m) { m.pc.epilogue[1].arg = -1; });
  reject("stage_reads_itself", [](Malformed& m) {
    m.pc.stages[0].code = {acc(RVL_DTYPE_F32, 1)};
    m.stages[0].instructions = m.pc.stages[0].code.data();
  });
  reject("acc_dtype_mismatch", [](Malformed& m) { m.stages[0].acc_dtype = RVL_DTYPE_F64; });
  reject("stage_reduce_none", [](Malformed& m) { m.stages[0].reduce_op = RVL_REDUCE_NONE; });
  reject("stage_reduce_unknown", [](Malformed& m) { m.stages[0].reduce_op = 99; });
  reject("stage_acc_dtype_unknown", [](Malformed& m) { m.stages[0].acc_dtype = 77; });
  reject("stage_lse_of_ints", [](Malformed& m) {
    m.pc.stages[0].code = {load(RVL_DTYPE_F32, 0), ins(RVL_OP_CAST, RVL_DTYPE_I32, 0)};
    m.stages[0] = {sizeof(rvl_reduce_stage), RVL_REDUCE_LOGSUMEXP, RVL_DTYPE_I32, 2, m.pc.stages[0].code.data()};
  });
  reject("stage_struct_size", [](Malformed& m) { m.stages[0].struct_size = 8; });
  reject("stage_no_instructions", [](Malformed& m) { m.stages[0].n_instructions = 0; });
  reject("stage_null_instructions", [](Malformed& m) { m.stages[0].instructions = nullptr; });
  reject("stage_ssa", [](Malformed& m) {
    m.pc.stages[0].code = {ins(RVL_OP_NEG, RVL_DTYPE_F32, 0)};
    m.stages[0].instructions = m.pc.stages[0].code.data();
  });
  reject("null_stages", [](Malformed& m) { m.p.stages = nullptr; });
  reject("too_many_stages", [](Malformed& m) { m.p.n_stages = RVL_MAX_REDUCE_STAGES + 1; });
  reject("negative_stages", [](Malformed& m) { m.p.n_stages = -1; });
  reject("stages_without_reduce_op", [](Malformed& m) { m.p.reduce_op = RVL_REDUCE_NONE, m.p.reduce_axes = 0; });
}

}  // namespace row_chain

void register_row_chain_cases() {
  using row_chain::ce_loss;
  using row_chain::layer_norm;
  using row_chain::rms_norm;
  using row_chain::three_stages;
  const auto add = row_chain::add;
  const auto special_rows = row_chain::special_rows;
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_F64, RVL_DTYPE_F16, RVL_DTYPE_BF16}) {
    const std::string d = dtype_str(dt);
    // Rows (one pass per block of rows), the last two axes reduced, columns and interleaved axes
    // (passes), odd and long rows (longer than a block), many short rows, and rows of 3 and 4 (a
    // device that visits short rows in another order must still fold each row's own values).
    const std::vector<std::pair<std::vector<int64_t>, uint32_t>> layouts = {
        {{5, 37}, 2u}, {{3, 4, 5, 2}, 12u}, {{37, 5}, 1u}, {{3, 4, 5, 2}, 5u}, {{1031, 129}, 2u},
        {{300, 257}, 2u}, {{3, 70001}, 2u}, {{1, 1, 9}, 4u}, {{64, 1024}, 2u}, {{1000, 3}, 2u}, {{64, 4}, 2u}};
    for (const auto& [shape, axes] : layouts) {
      const std::string tag = std::to_string(count(shape)) + "_axes" + std::to_string(axes);
      add("layer_norm/" + d + "/" + tag, [=, shape = shape, axes = axes] {
        return layer_norm(shape, axes, dt, make_data(dt, count(shape), 41 + axes, Data::Mixed));
      });
      add("rms_norm/" + d + "/" + tag, [=, shape = shape, axes = axes] {
        return rms_norm(shape, axes, dt, make_data(dt, count(shape), 43 + axes, Data::Mixed));
      });
    }
    add("layer_norm/" + d + "/special_rows", [=] { return layer_norm({7, 6}, 2u, dt, special_rows(dt)); });
    add("layer_norm/" + d + "/specials_data", [=] {
      return layer_norm({9, 40}, 2u, dt, make_data(dt, 360, 61, Data::Specials));
    });
    add("layer_norm/" + d + "/strided_output", [=] {  // gaps and an offset that must stay untouched
      ProgramCase pc = layer_norm({6, 37}, 2u, dt, make_data(dt, 222, 67, Data::Mixed));
      pc.out = make_data(dt, 6 * 40 + 3, 5, Data::Small);
      pc.out_view = view_of({6, 37}, {40, 1}, 3);
      return pc;
    });
    // One row (every axis reduced) read through a permutation: a space that does not collapse
    // to one axis, whose per-row values have stride 0 everywhere (tbb_cpu once took them for
    // row-invariant inputs and read the stage's value as 0).
    add("layer_norm/" + d + "/every_axis_permuted", [=] {
      ProgramCase pc = layer_norm({3, 4, 5}, 7u, dt, make_data(dt, 60, 83, Data::Mixed));
      pc.inputs[0].view = view_of({3, 4, 5}, {1, 3, 12});
      return pc;
    });
    add("layer_norm/" + d + "/empty_rows", [=] {
      ProgramCase pc = layer_norm({3, 0}, 2u, dt, make_data(dt, 0, 1));
      pc.out = make_data(dt, 1, 5, Data::Small);
      return pc;
    });
    if (rvl::dtype_is_half(dt)) continue;  // LOGSUMEXP is f32 / f64 only
    for (const auto& [rows, C] : std::vector<std::pair<int64_t, int64_t>>{{5, 37}, {1031, 129}, {64, 1000}, {3, 70001}})
      add("ce_loss/" + d + "/" + std::to_string(rows) + "x" + std::to_string(C), [=, rows = rows, C = C] {
        return ce_loss(rows, C, dt, make_data(dt, rows * C, 71, Data::Mixed));
      });
    add("ce_loss/" + d + "/special_rows", [=] { return ce_loss(7, 6, dt, special_rows(dt)); });
    for (const auto& [shape, axes] : std::vector<std::pair<std::vector<int64_t>, uint32_t>>{
             {{5, 37}, 2u}, {{37, 5}, 1u}, {{300, 257}, 2u}, {{3, 70001}, 2u}})
      add("three_stages/" + d + "/" + std::to_string(count(shape)) + "_axes" + std::to_string(axes),
          [=, shape = shape, axes = axes] {
            return three_stages(shape, axes, dt, make_data(dt, count(shape), 73, Data::Mixed));
          });
  }
  row_chain::register_malformed();
}

}  // namespace rvl::conformance
