// Malformed kernels: each must be rejected with RVL_STATUS_INVALID_ARGUMENT before anything
// runs (the output buffer stays as it was) and without touching memory outside any buffer.
#include "kernel_case.hpp"

#include <memory>

namespace rvl::conformance {
namespace {

const int32_t F = RVL_DTYPE_F32, I32 = RVL_DTYPE_I32;

// A valid baseline: out[4,6] f32 = sin(in[4,6] f32); input 1 is an i32 [4,6] buffer.
struct Baseline {
  RawBuffer in{96}, in_i32{96}, out{96};
  std::vector<rvl_operand> inputs;
  std::vector<rvl_instruction> code;
  rvl_program p{};
  bool raw = false;  // submit p exactly as mutated (for NULL-pointer and count cases)
  Baseline() {
    const std::vector<int64_t> s{4, 6};
    std::vector<float> ones(24, 1.0f);
    check_ok(session().api->buffer_write(nullptr, in.get(), 0, ones.data(), 96), "buffer_write");
    // New buffers have unspecified contents (docs/abi.md §4): zero the output explicitly, so
    // check_untouched() can tell "not written" from whatever the allocator handed out.
    const std::vector<uint8_t> zeros(96, 0);
    check_ok(session().api->buffer_write(nullptr, out.get(), 0, zeros.data(), 96), "buffer_write");
    inputs = {operand(in.get(), F, contiguous(s)), operand(in_i32.get(), I32, contiguous(s))};
    code = {load(F, 0), ins(RVL_OP_SIN, F, 0)};
    p.struct_size = sizeof p;
    p.rank = 2;
    p.shape[0] = 4, p.shape[1] = 6;
    p.output = operand(out.get(), F, contiguous(s));
  }
  static rvl_operand operand(rvl_buffer* b, int32_t dt, const rvl_view& v) {
    rvl_operand o{};
    o.struct_size = sizeof o;
    o.buffer = b;
    o.dtype = dt;
    o.view = v;
    return o;
  }
  rvl_error* run() {
    if (!raw) {
      p.n_inputs = int32_t(inputs.size());
      p.inputs = inputs.data();
      p.n_instructions = int32_t(code.size());
      p.instructions = code.data();
    }
    return session().api->execute_program(session().device, nullptr, &p);
  }
  void check_untouched() const {
    std::vector<uint8_t> bytes(96);
    check_ok(session().api->buffer_read(nullptr, out.get(), 0, bytes.data(), 96), "buffer_read");
    for (uint8_t b : bytes)
      if (b != 0) throw Failure("the output was written although the kernel was rejected");
  }
};

void reject(const std::string& name, std::function<void(Baseline&)> mutate) {
  add_case("malformed", name, [mutate](Measure&) {
    Baseline b;
    mutate(b);
    check_error(b.run(), RVL_STATUS_INVALID_ARGUMENT, "the malformed program");
    b.check_untouched();
  });
}

void register_program_cases() {
  add_case("malformed", "baseline_is_valid", [](Measure&) {
    Baseline b;
    check_ok(b.run(), "the valid baseline program");
  });
  reject("view/offset_past_end", [](Baseline& b) { b.inputs[0].view.offset = 1; });
  reject("view/negative_addresses", [](Baseline& b) {
    b.inputs[0].view.strides[0] = -6;
    b.inputs[0].view.strides[1] = -1;
  });
  reject("view/validity_too_wide", [](Baseline& b) {
    b.inputs[0].view.offset = -1;   // fine while column 0 is padding ...
    b.inputs[0].view.valid_lo[1] = 0;  // ... but it is declared valid
  });
  reject("view/output_outside", [](Baseline& b) { b.p.output.view.strides[0] = 7; });
  reject("view/output_negative", [](Baseline& b) { b.p.output.view.offset = -1; });
  reject("view/absurd_stride_overflow", [](Baseline& b) { b.inputs[0].view.strides[0] = INT64_MAX / 2; });
  reject("view/absurd_offset", [](Baseline& b) { b.inputs[0].view.offset = INT64_MIN + 5; });
  reject("view/freed_buffer", [](Baseline& b) {
    check_ok(session().api->buffer_free(b.in.get()), "buffer_free");
    b.in.release();
  });
  reject("view/null_buffer", [](Baseline& b) { b.inputs[1].buffer = nullptr; });
  reject("view/output_null_buffer", [](Baseline& b) { b.p.output.buffer = nullptr; });
  reject("view/output_validity_mask", [](Baseline& b) { b.p.output.view.valid_lo[1] = 1; });
  reject("view/overlapping_output", [](Baseline& b) { b.p.output.view.strides[0] = 1; });
  reject("view/broadcast_output", [](Baseline& b) { b.p.output.view.strides[1] = 0; });
  reject("view/struct_size", [](Baseline& b) { b.inputs[0].view.struct_size = 8; });
  reject("operand/struct_size", [](Baseline& b) { b.p.output.struct_size = 8; });
  reject("operand/unknown_dtype", [](Baseline& b) { b.inputs[1].dtype = RVL_DTYPE_COUNT_; });
  reject("operand/negative_dtype", [](Baseline& b) { b.inputs[1].dtype = -1; });
  reject("op/unknown_code", [](Baseline& b) { b.code[1].op = 99; });
  reject("op/code_count", [](Baseline& b) { b.code[1].op = RVL_OP_COUNT_; });
  reject("op/negative_code", [](Baseline& b) { b.code[1].op = -1; });
  reject("op/unknown_dtype", [](Baseline& b) { b.code[1].dtype = 17; });
  reject("dtype/SIN_on_i32", [](Baseline& b) {
    b.code = {load(I32, 1), ins(RVL_OP_SIN, I32, 0), ins(RVL_OP_CAST, F, 1)};
  });
  reject("dtype/AND_on_f32", [](Baseline& b) { b.code = {load(F, 0), ins(RVL_OP_AND, F, 0, 0)}; });
  reject("dtype/NEG_on_bool", [](Baseline& b) {
    b.code = {load(F, 0), ins(RVL_OP_CAST, RVL_DTYPE_BOOL, 0), ins(RVL_OP_NEG, RVL_DTYPE_BOOL, 1),
              ins(RVL_OP_CAST, F, 2)};
  });
  reject("dtype/WHERE_condition_not_bool", [](Baseline& b) { b.code = {load(F, 0), ins(RVL_OP_WHERE, F, 0, 0, 0)}; });
  reject("dtype/mismatched_binary", [](Baseline& b) {
    b.code = {load(F, 0), ins(RVL_OP_CAST, RVL_DTYPE_F64, 0), ins(RVL_OP_ADD, F, 0, 1)};
  });
  reject("dtype/ADD_result_differs", [](Baseline& b) { b.code = {load(I32, 1), ins(RVL_OP_ADD, F, 0, 0)}; });
  reject("dtype/CMPLT_result_not_bool", [](Baseline& b) { b.code = {load(F, 0), ins(RVL_OP_CMPLT, F, 0, 0)}; });
  reject("dtype/LOAD_differs_from_input", [](Baseline& b) { b.code[0] = load(F, 1); });
  reject("dtype/last_differs_from_output", [](Baseline& b) { b.code = {load(I32, 1)}; });
  reject("ssa/input_index_out_of_range", [](Baseline& b) { b.code[0] = load(F, 5); });
  reject("ssa/negative_input_index", [](Baseline& b) { b.code[0] = load(F, -1); });
  reject("ssa/self_reference", [](Baseline& b) { b.code[1].src[0] = 1; });
  reject("ssa/forward_reference", [](Baseline& b) {
    b.code = {load(F, 0), ins(RVL_OP_ADD, F, 0, 2), ins(RVL_OP_SIN, F, 0)};
  });
  reject("ssa/negative_source", [](Baseline& b) { b.code[1].src[0] = -1; });
  reject("ssa/unused_source_set", [](Baseline& b) { b.code[1].src[2] = 0; });
  reject("ssa/ACC_outside_contraction", [](Baseline& b) { b.code = {ins(RVL_OP_ACC, F)}; });
  reject("count/no_instructions", [](Baseline& b) { b.code.clear(); });
  reject("count/too_many_instructions", [](Baseline& b) { b.code.assign(RVL_MAX_INSTRUCTIONS + 1, load(F, 0)); });
  reject("count/too_many_inputs", [](Baseline& b) { b.inputs.resize(RVL_MAX_INPUTS + 1, b.inputs[0]); });
  reject("count/negative_inputs", [](Baseline& b) {
    b.raw = true;
    b.p.n_inputs = -1;
    b.p.inputs = b.inputs.data();
    b.p.n_instructions = 2;
    b.p.instructions = b.code.data();
  });
  reject("null/instructions", [](Baseline& b) {
    b.raw = true;
    b.p.n_inputs = 2;
    b.p.inputs = b.inputs.data();
    b.p.n_instructions = 2;
    b.p.instructions = nullptr;
  });
  reject("null/inputs", [](Baseline& b) {
    b.raw = true;
    b.p.n_inputs = 2;
    b.p.inputs = nullptr;
    b.p.n_instructions = 2;
    b.p.instructions = b.code.data();
  });
  reject("rank/beyond_limit", [](Baseline& b) { b.p.rank = RVL_MAX_RANK + 1; });
  reject("rank/huge", [](Baseline& b) { b.p.rank = 1 << 30; });
  reject("rank/negative", [](Baseline& b) { b.p.rank = -1; });
  reject("shape/negative_extent", [](Baseline& b) { b.p.shape[1] = -6; });
  reject("program/struct_size", [](Baseline& b) { b.p.struct_size = 16; });
  reject("reduce/unknown_op", [](Baseline& b) { b.p.reduce_op = 9; });
  reject("reduce/axis_beyond_rank", [](Baseline& b) {
    b.p.reduce_op = RVL_REDUCE_SUM;
    b.p.reduce_axes = 4;
  });
  reject("reduce/reduced_axis_with_stride", [](Baseline& b) {
    b.p.reduce_op = RVL_REDUCE_SUM;
    b.p.reduce_axes = 2;
  });
  reject("reduce/axes_without_op", [](Baseline& b) { b.p.reduce_axes = 1; });
  // LOGSUMEXP may widen f32 values into f64, nothing else changes dtype: an f64 value into an f32
  // output, and SUM widening f32 into f64, are rejected.
  reject("reduce/logsumexp_narrowing", [](Baseline& b) {
    b.code = {load(F, 0), ins(RVL_OP_CAST, RVL_DTYPE_F64, 0)};
    b.p.reduce_op = RVL_REDUCE_LOGSUMEXP;
    b.p.reduce_axes = 2;
    b.p.output = Baseline::operand(b.out.get(), F, view_of({4, 6}, {1, 0}));
  });
  reject("reduce/sum_widening", [](Baseline& b) {
    b.code = {load(F, 0)};
    b.p.reduce_op = RVL_REDUCE_SUM;
    b.p.reduce_axes = 2;
    b.p.output = Baseline::operand(b.out.get(), RVL_DTYPE_F64, view_of({4, 6}, {1, 0}));
  });
  // LOGSUMEXP (1.4) is defined on floats only: rejected for an i32 output, whatever the device.
  reject("reduce/logsumexp_on_i32", [](Baseline& b) {
    b.code = {load(I32, 1)};
    b.p.reduce_op = RVL_REDUCE_LOGSUMEXP;
    b.p.reduce_axes = 2;
    b.p.output = Baseline::operand(b.out.get(), I32, view_of({4, 6}, {1, 0}));
  });
  add_case("malformed", "null/program", [](Measure&) {
    check_error(session().api->execute_program(session().device, nullptr, nullptr),
                RVL_STATUS_INVALID_ARGUMENT, "execute_program(NULL)");
  });
  add_case("malformed", "device/out_of_range", [](Measure&) {
    int32_t count = 0;
    check_ok(session().api->device_count(&count), "device_count");
    for (int32_t dev : {count, -1}) {
      Baseline b;
      b.p.n_inputs = 2, b.p.inputs = b.inputs.data();
      b.p.n_instructions = 2, b.p.instructions = b.code.data();
      check_error(session().api->execute_program(dev, nullptr, &b.p), RVL_STATUS_INVALID_ARGUMENT,
                  "execute_program on device " + std::to_string(dev));
      b.check_untouched();
    }
  });
}

// Contractions: a valid 4x4x4 f32 baseline and one mutation per case.
void reject_contraction(const std::string& name, std::function<void(rvl_contraction&, std::vector<rvl_instruction>&, rvl_operand&)> mutate) {
  add_case("malformed", "contraction/" + name, [mutate, name](Measure&) {
    if (!session().has_contraction()) throw Skip("execute_contraction is not supported (NULL)");
    RawBuffer a(64), b(64), c(64), e(64);
    rvl_contraction k{};
    k.struct_size = sizeof k;
    k.dtype = F;
    k.m = k.n = k.k = 4;
    const std::vector<int64_t> s{4, 4};
    k.a = Baseline::operand(a.get(), F, contiguous(s));
    k.b = Baseline::operand(b.get(), F, contiguous(s));
    k.c = Baseline::operand(c.get(), F, contiguous(s));
    std::vector<rvl_instruction> epi;
    rvl_operand einput = Baseline::operand(e.get(), F, contiguous(s));
    mutate(k, epi, einput);
    if (!epi.empty() && k.epilogue == nullptr && k.n_epilogue == 0) {
      k.epilogue = epi.data();
      k.n_epilogue = int32_t(epi.size());
    }
    if (name == "valid_baseline") {
      check_ok(session().api->execute_contraction(session().device, nullptr, &k), "the valid baseline");
      return;
    }
    check_error(session().api->execute_contraction(session().device, nullptr, &k),
                RVL_STATUS_INVALID_ARGUMENT, "the malformed contraction");
    std::vector<uint8_t> bytes(64);
    check_ok(session().api->buffer_read(nullptr, c.get(), 0, bytes.data(), 64), "buffer_read");
    for (uint8_t x : bytes)
      if (x != 0) throw Failure("C was written although the contraction was rejected");
  });
}

// Every (op, dtype) pair the op table does not accept is rejected: the sources are made by a
// CAST from the f32 input, the op is applied to them, and the result cast back.
void register_table_dtype_cases() {
  for (int32_t op = 0; op < RVL_OP_COUNT_; ++op) {
    const rvl::OpInfo& info = rvl::op_info(op);
    if (!rvl::op_is_arithmetic(op) || info.accepts == rvl::OpAccepts::Select) continue;
    for (int32_t dt = 0; dt < RVL_DTYPE_COUNT_; ++dt) {
      if (rvl::op_accepts(op, dt)) continue;
      reject("table/" + op_str(op) + "_on_" + dtype_str(dt), [op, dt](Baseline& b) {
        const int32_t rdt = rvl::op_result_dtype(op, dt) >= 0 ? rvl::op_result_dtype(op, dt) : dt;
        b.code = {load(F, 0), ins(RVL_OP_CAST, dt, 0),
                  ins(op, rdt, 1, rvl::op_info(op).arity > 1 ? 1 : -1, rvl::op_info(op).arity > 2 ? 1 : -1),
                  ins(RVL_OP_CAST, F, 2)};
      });
    }
  }
}

void register_malformed_contraction_cases() {
  using E = std::vector<rvl_instruction>;
  reject_contraction("valid_baseline", [](rvl_contraction&, E&, rvl_operand&) {});
  reject_contraction("A_outside", [](rvl_contraction& k, E&, rvl_operand&) { k.a.view.offset = 60; });
  reject_contraction("B_negative", [](rvl_contraction& k, E&, rvl_operand&) { k.b.view.strides[0] = -4; });
  reject_contraction("C_outside", [](rvl_contraction& k, E&, rvl_operand&) { k.c.view.strides[1] = 5; });
  reject_contraction("operand_dtype_differs", [](rvl_contraction& k, E&, rvl_operand&) { k.dtype = RVL_DTYPE_F64; });
  reject_contraction("unknown_dtype", [](rvl_contraction& k, E&, rvl_operand&) { k.dtype = 42; });
  reject_contraction("batch_rank_beyond_limit", [](rvl_contraction& k, E&, rvl_operand&) { k.batch_rank = RVL_MAX_RANK - 1; });
  reject_contraction("negative_m", [](rvl_contraction& k, E&, rvl_operand&) { k.m = -1; });
  reject_contraction("overlapping_C", [](rvl_contraction& k, E&, rvl_operand&) { k.c.view.strides[0] = 2; });
  reject_contraction("A_validity_mask", [](rvl_contraction& k, E&, rvl_operand&) { k.a.view.valid_hi[1] = 3; });
  reject_contraction("struct_size", [](rvl_contraction& k, E&, rvl_operand&) { k.struct_size = 8; });
  reject_contraction("null_A_buffer", [](rvl_contraction& k, E&, rvl_operand&) { k.a.buffer = nullptr; });
  reject_contraction("epilogue_ssa", [](rvl_contraction&, E& e, rvl_operand&) { e = {ins(RVL_OP_ACC, F), ins(RVL_OP_ADD, F, 0, 2)}; });
  reject_contraction("epilogue_ACC_dtype", [](rvl_contraction&, E& e, rvl_operand&) { e = {ins(RVL_OP_ACC, RVL_DTYPE_F64)}; });
  reject_contraction("epilogue_load_without_inputs", [](rvl_contraction&, E& e, rvl_operand&) { e = {load(F, 0)}; });
  reject_contraction("epilogue_unknown_op", [](rvl_contraction&, E& e, rvl_operand&) { e = {ins(RVL_OP_ACC, F), ins(77, F, 0)}; });
  reject_contraction("epilogue_input_outside", [](rvl_contraction& k, E& e, rvl_operand& in) {
    in.view.offset = 1;  // 16 elements from 1: one past the end
    k.n_epilogue_inputs = 1;
    k.epilogue_inputs = &in;
    e = {ins(RVL_OP_ACC, F), load(F, 0), ins(RVL_OP_ADD, F, 0, 1)};
  });
  reject_contraction("epilogue_input_dtype", [](rvl_contraction& k, E& e, rvl_operand& in) {
    k.n_epilogue_inputs = 1;
    k.epilogue_inputs = &in;
    e = {ins(RVL_OP_ACC, F), load(RVL_DTYPE_I32, 0), ins(RVL_OP_CAST, F, 1), ins(RVL_OP_ADD, F, 0, 2)};
  });
  reject_contraction("null_epilogue", [](rvl_contraction& k, E&, rvl_operand&) { k.n_epilogue = 1; k.epilogue = nullptr; });
  reject_contraction("null_epilogue_inputs", [](rvl_contraction& k, E&, rvl_operand&) { k.n_epilogue_inputs = 1; k.epilogue_inputs = nullptr; });
  // ABI 1.8 (im2col block): malformed M/K/N groups, where the device takes groups at all.
  auto groups = [](rvl_contraction& k) {
    const rvl_device_properties& p = session().props;
    if (!RVL_HAS_MEMBER(&p, rvl_device_properties, contraction_axes) || p.contraction_axes < 2)
      throw Skip("multi-axis contractions are not supported (contraction_axes < 2)");
    k.k_rank = 2, k.k_shape[0] = 2, k.k_shape[1] = 2;  // K = (2, 2), A [4, 2x2], B [2x2, 4]
    k.a_k_strides[0] = 2, k.a_k_strides[1] = 1, k.b_k_strides[0] = 8, k.b_k_strides[1] = 4;
    k.a.view.strides[1] = 0, k.b.view.strides[0] = 0;
  };
  reject_contraction("group_product", [groups](rvl_contraction& k, E&, rvl_operand&) { groups(k); k.k_shape[1] = 3; });
  reject_contraction("group_rank", [groups](rvl_contraction& k, E&, rvl_operand&) { groups(k); k.k_rank = RVL_MAX_RANK + 1; });
  reject_contraction("group_view_stride", [groups](rvl_contraction& k, E&, rvl_operand&) { groups(k); k.b.view.strides[0] = 4; });
  reject_contraction("group_outside_buffer", [groups](rvl_contraction& k, E&, rvl_operand&) { groups(k); k.b_k_strides[0] = 16; });
  reject_contraction("group_negative_extent", [groups](rvl_contraction& k, E&, rvl_operand&) {
    groups(k);
    k.k_shape[0] = -2, k.k_shape[1] = -2;
  });
}

}  // namespace

void register_malformed_cases() {
  register_table_dtype_cases();
  register_program_cases();
  register_malformed_contraction_cases();
}

}  // namespace rvl::conformance
