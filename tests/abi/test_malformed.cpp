// Malformed kernels: each must be rejected with RVL_STATUS_INVALID_ARGUMENT and a message naming
// the problem, before anything runs (the output buffer stays untouched).
#include "common.hpp"

#include <functional>
#include <memory>

using namespace abitest;

namespace {

// A valid baseline: out[4,6] f32 = sin(in[4,6] f32). Each case mutates one thing.
struct Baseline {
  HostBuf in_host = filled(RVL_DTYPE_F32, 24, [](int64_t i) { return F(double(i)); });
  HostBuf i32_host = filled(RVL_DTYPE_I32, 24, [](int64_t i) { return I(i); });
  DevBuf in{in_host}, in_i32{i32_host}, out{96};
  int64_t shape[2] = {4, 6};
  std::vector<rvl_operand> inputs;
  std::vector<rvl_instruction> code;
  rvl_program p{};
  bool raw = false;  // run() submits p exactly as mutated (for NULL-pointer cases)
  Baseline() {
    inputs = {operand(in.get(), RVL_DTYPE_F32, contiguous(2, shape)),
              operand(in_i32.get(), RVL_DTYPE_I32, contiguous(2, shape))};
    code = {load(RVL_DTYPE_F32, 0), ins(RVL_OP_SIN, RVL_DTYPE_F32, 0)};
    p.struct_size = sizeof(p);
    p.rank = 2;
    p.shape[0] = 4; p.shape[1] = 6;
    p.output = operand(out.get(), RVL_DTYPE_F32, contiguous(2, shape));
  }
  rvl_error* run() {
    if (raw) return api().execute_program(0, nullptr, &p);
    p.n_inputs = int32_t(inputs.size());
    p.inputs = inputs.data();
    p.n_instructions = int32_t(code.size());
    p.instructions = code.data();
    return api().execute_program(0, nullptr, &p);
  }
};

void reject(const std::string& name, const std::string& keyword, const std::function<void(Baseline&)>& mutate) {
  BOOST_TEST_CONTEXT(name) {
    Baseline b;
    mutate(b);
    expect_error(b.run(), keyword);
    const HostBuf after = b.out.read(RVL_DTYPE_F32);
    for (uint8_t byte : after.bytes) BOOST_TEST_REQUIRE(byte == 0);  // nothing ran
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(malformed)

BOOST_AUTO_TEST_CASE(baseline_is_valid) {
  Baseline b;
  ok(b.run());
}

BOOST_AUTO_TEST_CASE(views_outside_buffers) {
  reject("offset past the end", "outside buffer of 24", [](Baseline& b) { b.inputs[0].view.offset = 1; });
  reject("negative direction", "element -23", [](Baseline& b) {
    b.inputs[0].view.strides[0] = -6;
    b.inputs[0].view.strides[1] = -1;
  });
  reject("validity range too wide", "element -1", [](Baseline& b) {
    b.inputs[0].view.offset = -1;  // fine while column 0 is padding ...
    b.inputs[0].view.valid_lo[1] = 0;  // ... but column 0 is declared valid
  });
  reject("output outside", "outside", [](Baseline& b) { b.p.output.view.strides[0] = 7; });
  reject("absurd stride", "overflow", [](Baseline& b) { b.inputs[0].view.strides[0] = INT64_MAX / 2; });
  reject("freed buffer", "not live", [](Baseline& b) {
    ok(api().buffer_free(b.in.get()));
    b.in.release();
  });
  reject("NULL buffer", "NULL", [](Baseline& b) { b.inputs[1].buffer = nullptr; });
}

BOOST_AUTO_TEST_CASE(instructions) {
  reject("unknown op", "unknown op code 99", [](Baseline& b) { b.code[1].op = 99; });
  reject("negative op", "unknown op code", [](Baseline& b) { b.code[1].op = -1; });
  reject("unknown dtype", "unknown dtype", [](Baseline& b) { b.code[1].dtype = 17; });
  reject("SIN on i32", "dtype", [](Baseline& b) {
    b.code = {load(RVL_DTYPE_I32, 1), ins(RVL_OP_SIN, RVL_DTYPE_I32, 0), ins(RVL_OP_CAST, RVL_DTYPE_F32, 1)};
  });
  reject("AND on f32", "dtype", [](Baseline& b) {
    b.code = {load(RVL_DTYPE_F32, 0), ins(RVL_OP_AND, RVL_DTYPE_F32, 0, 0)};
  });
  reject("NEG on bool", "dtype", [](Baseline& b) {
    b.code = {load(RVL_DTYPE_F32, 0), ins(RVL_OP_CAST, RVL_DTYPE_BOOL, 0), ins(RVL_OP_NEG, RVL_DTYPE_BOOL, 1),
              ins(RVL_OP_CAST, RVL_DTYPE_F32, 2)};
  });
  reject("WHERE cond not bool", "dtype", [](Baseline& b) {
    b.code = {load(RVL_DTYPE_F32, 0), ins(RVL_OP_WHERE, RVL_DTYPE_F32, 0, 0, 0)};
  });
  reject("mismatched binary", "dtype", [](Baseline& b) {
    b.code = {load(RVL_DTYPE_F32, 0), ins(RVL_OP_CAST, RVL_DTYPE_F64, 0), ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 1)};
  });
  reject("ADD result dtype differs", "dtype", [](Baseline& b) {
    b.code = {load(RVL_DTYPE_I32, 1), ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 0)};
  });
  reject("CMPLT result not bool", "dtype", [](Baseline& b) {
    b.code = {load(RVL_DTYPE_F32, 0), ins(RVL_OP_CMPLT, RVL_DTYPE_F32, 0, 0)};
  });
  reject("LOAD dtype differs", "differs from input 1", [](Baseline& b) { b.code[0] = load(RVL_DTYPE_F32, 1); });
  reject("LOAD input out of range", "input index 5", [](Baseline& b) { b.code[0] = load(RVL_DTYPE_F32, 5); });
  reject("SSA self reference", "SSA", [](Baseline& b) { b.code[1].src[0] = 1; });
  reject("SSA forward reference", "SSA", [](Baseline& b) {
    b.code = {load(RVL_DTYPE_F32, 0), ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 2), ins(RVL_OP_SIN, RVL_DTYPE_F32, 0)};
  });
  reject("negative source", "SSA", [](Baseline& b) { b.code[1].src[0] = -1; });
  reject("unused source set", "unused source", [](Baseline& b) { b.code[1].src[2] = 0; });
  reject("ACC outside a contraction", "ACC", [](Baseline& b) { b.code = {ins(RVL_OP_ACC, RVL_DTYPE_F32)}; });
  reject("last dtype differs from output", "output dtype", [](Baseline& b) { b.code = {load(RVL_DTYPE_I32, 1)}; });
  reject("no instructions", "instruction count 0", [](Baseline& b) { b.code.clear(); });
  reject("too many instructions", "instruction count", [](Baseline& b) {
    b.code.assign(RVL_MAX_INSTRUCTIONS + 1, load(RVL_DTYPE_F32, 0));
  });
  reject("NULL instructions", "instructions pointer is NULL", [](Baseline& b) {
    b.raw = true;
    b.p.n_inputs = 1;
    b.p.inputs = b.inputs.data();
    b.p.instructions = nullptr;
    b.p.n_instructions = 2;
  });
}

BOOST_AUTO_TEST_CASE(program_structure) {
  reject("rank too large", "rank 9", [](Baseline& b) { b.p.rank = RVL_MAX_RANK + 1; });
  reject("negative rank", "rank -1", [](Baseline& b) { b.p.rank = -1; });
  reject("negative shape", "shape[1] is -6", [](Baseline& b) { b.p.shape[1] = -6; });
  reject("NULL inputs", "inputs pointer is NULL", [](Baseline& b) {
    b.raw = true;
    b.p.inputs = nullptr;
    b.p.n_inputs = 2;
    b.p.instructions = b.code.data();
    b.p.n_instructions = 2;
  });
  reject("too many inputs", "input count", [](Baseline& b) {
    b.inputs.resize(RVL_MAX_INPUTS + 1, b.inputs[0]);
  });
  reject("program struct_size", "struct_size", [](Baseline& b) { b.p.struct_size = 16; });
  reject("view struct_size", "struct_size", [](Baseline& b) { b.inputs[0].view.struct_size = 8; });
  reject("operand struct_size", "struct_size", [](Baseline& b) { b.p.output.struct_size = 8; });
  reject("output with validity mask", "validity", [](Baseline& b) { b.p.output.view.valid_lo[1] = 1; });
  reject("overlapping output", "overlapping output", [](Baseline& b) {
    b.p.output.view.strides[0] = 1;  // rows start one element apart: distinct elements alias
  });
  reject("output broadcast", "overlapping output", [](Baseline& b) { b.p.output.view.strides[1] = 0; });
  reject("reduced axis with stride", "reduced axis 1 has stride 1", [](Baseline& b) {
    b.p.reduce_op = RVL_REDUCE_SUM;
    b.p.reduce_axes = 2;
  });
  reject("unknown reduce op", "reduce_op", [](Baseline& b) { b.p.reduce_op = 9; });
  reject("reduce axis beyond rank", "reduce_axes", [](Baseline& b) {
    b.p.reduce_op = RVL_REDUCE_SUM;
    b.p.reduce_axes = 4;
  });
  reject("unknown input dtype", "unknown dtype", [](Baseline& b) { b.inputs[1].dtype = 6; });
  expect_error(api().execute_program(0, nullptr, nullptr), "NULL");
  Baseline b;
  expect_error(api().execute_program(3, nullptr, &b.p), "device 3");
}

BOOST_AUTO_TEST_CASE(contractions) {
  HostBuf h = filled(RVL_DTYPE_F32, 64, [](int64_t i) { return F(double(i)); });
  DevBuf a(h), bb(h), c(h);
  const int64_t sa[2] = {4, 4};
  auto base = [&] {
    rvl_contraction k{};
    k.struct_size = sizeof(k);
    k.dtype = RVL_DTYPE_F32;
    k.m = 4; k.n = 4; k.k = 4;
    k.a = operand(a.get(), RVL_DTYPE_F32, contiguous(2, sa));
    k.b = operand(bb.get(), RVL_DTYPE_F32, contiguous(2, sa));
    k.c = operand(c.get(), RVL_DTYPE_F32, contiguous(2, sa));
    return k;
  };
  rvl_contraction k = base();
  ok(api().execute_contraction(0, nullptr, &k));
  k = base(); k.a.view.offset = 60;
  expect_error(api().execute_contraction(0, nullptr, &k), "operand A: view reaches element 75");
  k = base(); k.b.view.strides[0] = -4;
  expect_error(api().execute_contraction(0, nullptr, &k), "operand B: view reaches element -12");
  k = base(); k.dtype = RVL_DTYPE_F64;
  expect_error(api().execute_contraction(0, nullptr, &k), "differs from the contraction dtype");
  k = base(); k.batch_rank = 7;
  expect_error(api().execute_contraction(0, nullptr, &k), "batch_rank 7");
  k = base(); k.m = -1;
  expect_error(api().execute_contraction(0, nullptr, &k), ">= 0");
  k = base(); k.c.view.strides[0] = 2;
  expect_error(api().execute_contraction(0, nullptr, &k), "overlapping output");
  k = base(); k.a.view.valid_hi[1] = 3;
  expect_error(api().execute_contraction(0, nullptr, &k), "validity");
  k = base(); k.struct_size = 8;
  expect_error(api().execute_contraction(0, nullptr, &k), "struct_size");
  std::vector<rvl_instruction> epi = {ins(RVL_OP_ACC, RVL_DTYPE_F32), ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 2)};
  k = base(); k.n_epilogue = 2; k.epilogue = epi.data();
  expect_error(api().execute_contraction(0, nullptr, &k), "SSA");
  epi = {ins(RVL_OP_ACC, RVL_DTYPE_F64)};
  k = base(); k.n_epilogue = 1; k.epilogue = epi.data();
  expect_error(api().execute_contraction(0, nullptr, &k), "contraction dtype");
  epi = {load(RVL_DTYPE_F32, 0)};
  k = base(); k.n_epilogue = 1; k.epilogue = epi.data();
  expect_error(api().execute_contraction(0, nullptr, &k), "input index 0");
  k = base(); k.n_epilogue = 1; k.epilogue = nullptr;
  expect_error(api().execute_contraction(0, nullptr, &k), "NULL");
  k = base(); k.n_epilogue_inputs = 1; k.epilogue_inputs = nullptr;
  expect_error(api().execute_contraction(0, nullptr, &k), "NULL");
}

BOOST_AUTO_TEST_SUITE_END()
