// The SPIR-V emitter without a driver: every instruction the op table defines, for every dtype
// it accepts, every CAST pair, reductions and contractions of every dtype (padded inputs
// included) are emitted and validated in process by SPIRV-Tools for the OpenCL environment.
// The structural cache key is checked too (Note [Generic kernels] in parametric.hpp): the same
// program over other shapes, strides and offsets reuses its module, a different constant does not.
#include <boost/test/unit_test.hpp>

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>
#include <ravel/validate.hpp>

#include <string>
#include <vector>

#include "emitters.hpp"
#include "spirv_check.hpp"

namespace {

// Any handle is a 1 MiB buffer at a fake address: the emitter never dereferences it.
rvl::validate::BufferRef fake_lookup(const rvl_buffer*, const char*) {
  return {reinterpret_cast<std::byte*>(0x10000), 1 << 20};
}
rvl_buffer* fake_buffer() { return reinterpret_cast<rvl_buffer*>(0x1); }

rvl_operand dense(int32_t dtype, const std::vector<int64_t>& shape) {
  rvl_operand o{};
  o.struct_size = sizeof o;
  o.buffer = fake_buffer();
  o.dtype = dtype;
  o.view.struct_size = sizeof o.view;
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    o.view.strides[d] = stride;
    o.view.valid_hi[d] = shape[d];
    stride *= shape[d];
  }
  return o;
}

rvl_instruction ins(int32_t op, int32_t dtype, int32_t a = -1, int32_t b = -1, int32_t c = -1) {
  rvl_instruction i{};
  i.op = op;
  i.dtype = dtype;
  i.src[0] = a;
  i.src[1] = b;
  i.src[2] = c;
  return i;
}

struct Kernel {
  std::vector<int64_t> shape{5, 7};
  std::vector<rvl_operand> inputs;
  std::vector<rvl_instruction> code;
  int32_t reduce_op = RVL_REDUCE_NONE;
  uint32_t reduce_axes = 0;
  // ABI 1.10 row epilogue: the output then has the whole space and the epilogue's dtype.
  std::vector<rvl_instruction> epilogue;
  int32_t acc_dtype = -1;
  // ABI 1.11 chain stages: their lists, reduce ops and value dtypes.
  std::vector<std::vector<rvl_instruction>> stage_code;
  std::vector<int32_t> stage_ops, stage_accs;

  rvl::l0::ProgramLaunch plan() const {
    rvl_program p{};
    p.struct_size = sizeof p;
    p.rank = int32_t(shape.size());
    std::vector<int64_t> out_shape = shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      p.shape[d] = shape[d];
      if ((reduce_axes >> d) & 1u) out_shape[d] = 1;
    }
    p.n_inputs = int32_t(inputs.size());
    p.inputs = inputs.data();
    p.n_instructions = int32_t(code.size());
    p.instructions = code.data();
    p.reduce_op = reduce_op;
    p.reduce_axes = reduce_axes;
    p.output = dense(code.back().dtype, out_shape);
    for (size_t d = 0; d < shape.size(); ++d) {
      if ((reduce_axes >> d) & 1u) p.output.view.strides[d] = 0;
      p.output.view.valid_hi[d] = shape[d];
    }
    if (!epilogue.empty()) {
      p.output = dense(epilogue.back().dtype, shape);
      p.n_epilogue = int32_t(epilogue.size());
      p.epilogue = epilogue.data();
      p.acc_dtype = acc_dtype;
    }
    std::vector<rvl_reduce_stage> stages(stage_code.size());
    for (size_t j = 0; j < stages.size(); ++j) {
      stages[j].struct_size = sizeof(rvl_reduce_stage);
      stages[j].reduce_op = stage_ops[j];
      stages[j].acc_dtype = stage_accs[j];
      stages[j].n_instructions = int32_t(stage_code[j].size());
      stages[j].instructions = stage_code[j].data();
    }
    p.n_stages = int32_t(stages.size());
    p.stages = stages.data();
    const uint32_t every_reduction = (1u << (RVL_REDUCE_LOGSUMEXP + 1)) - 1;
    return rvl::l0::plan_program(
        rvl::validate::validate_program(&p, fake_lookup, RVL_DTYPES_ALL, every_reduction, every_reduction));
  }
};

void check_valid(const std::vector<uint32_t>& words, const std::string& what) {
  const std::string err = l0test::validate_opencl(words);
  BOOST_TEST(err.empty(), what << ": " << err);
}

void check_program(const Kernel& k, const std::string& what) {
  check_valid(rvl::l0::emit_program(k.plan().sig), what);
}

// Every dtype (the plugin states all of them: Note [Halves in SPIR-V] in scalar_ops.cpp).
const int32_t kDtypes[] = {RVL_DTYPE_BOOL, RVL_DTYPE_U8,  RVL_DTYPE_I32, RVL_DTYPE_I64, RVL_DTYPE_F32,
                           RVL_DTYPE_F64,  RVL_DTYPE_F16, RVL_DTYPE_BF16, RVL_DTYPE_I8, RVL_DTYPE_I16,
                           RVL_DTYPE_U16,  RVL_DTYPE_U32, RVL_DTYPE_U64};

}  // namespace

BOOST_AUTO_TEST_CASE(every_op_and_dtype_of_the_op_table) {
  int emitted = 0;
  for (int32_t op = 0; op < RVL_OP_COUNT_; ++op) {
    const rvl::OpInfo& info = rvl::op_info(op);
    for (int32_t dt : kDtypes) {
      if (op == RVL_OP_LOAD || op == RVL_OP_ACC) continue;  // operands: covered everywhere else
      Kernel k;
      if (op == RVL_OP_CONST) {
        rvl_instruction c = ins(op, dt);
        if (rvl::dtype_is_float(dt)) c.value.f = -2.5; else c.value.i = -300;
        k.code = {c};
        check_program(k, std::string("CONST ") + rvl::dtype_name(dt));
        ++emitted;
        continue;
      }
      if (!rvl::op_accepts(op, dt)) continue;
      const bool select = info.accepts == rvl::OpAccepts::Select;
      std::vector<int32_t> targets;
      if (op == RVL_OP_CAST) targets.assign(std::begin(kDtypes), std::end(kDtypes));
      else targets.push_back(rvl::op_result_dtype(op, dt));
      for (int32_t to : targets) {
        k.inputs.clear();
        k.code.clear();
        for (int s = 0; s < info.arity; ++s) {
          const int32_t in_dt = select && s == 0 ? RVL_DTYPE_BOOL : dt;
          k.inputs.push_back(dense(in_dt, k.shape));
          rvl_instruction l = ins(RVL_OP_LOAD, in_dt);
          l.arg = s;
          k.code.push_back(l);
        }
        k.code.push_back(ins(op, to, 0, info.arity > 1 ? 1 : -1, info.arity > 2 ? 2 : -1));
        check_program(k, std::string(info.name) + " " + rvl::dtype_name(dt) + " -> " +
                             rvl::dtype_name(to));
        ++emitted;
      }
    }
  }
  BOOST_TEST_MESSAGE(emitted << " element-wise kernels valid");
  BOOST_TEST(emitted > 100);
}

// Both reduction shapes (Note [Reduction strategy] in <ravel/lowering/plan.hpp>): serially when
// the innermost axis is kept or fewer than 32 values meet per output, else with a work-group per
// output and a barrier tree ([3, 100] over axis 1, [5, 7] and [3, 100] over both axes).
BOOST_AUTO_TEST_CASE(reductions_of_every_dtype_with_padding) {
  int group_kernels = 0;
  for (int32_t rop : {RVL_REDUCE_SUM, RVL_REDUCE_MAX, RVL_REDUCE_PROD})
    for (int32_t dt : kDtypes)
      for (uint32_t axes : {0u, 1u, 2u, 3u})
        for (int64_t inner : {7, 100}) {
        Kernel k;
        k.shape = {inner == 7 ? 5 : 3, inner};
        group_kernels += axes == 2u && inner == 100;
        k.inputs = {dense(dt, k.shape)};
        k.inputs[0].view.valid_lo[1] = 1;  // padded: a masked load
        k.code = {ins(RVL_OP_LOAD, dt)};
        k.reduce_op = rop;
        k.reduce_axes = axes;
        BOOST_TEST(k.plan().sig.serial_reduce == !(axes & 2u && (axes == 3u || inner == 100)));
        check_program(k, "reduce " + std::to_string(rop) + " " + rvl::dtype_name(dt) + " axes " +
                             std::to_string(axes) + " inner " + std::to_string(inner));
      }
  BOOST_TEST(group_kernels > 0);
}

// Row epilogues (ABI 1.10, emit_program.cpp): x + sum, max(x, max), x * prod and log_softmax's
// x - logsumexp, for every dtype each reduction accepts, serial and with a work-group per row,
// with a padded input; the epilogue reads ACC and the input again. ACC in a half is the value
// rounded and widened back (Note [Row epilogues on GPUs]).
BOOST_AUTO_TEST_CASE(row_epilogues_of_every_reduction_and_dtype) {
  int emitted = 0, group_kernels = 0;
  for (int32_t rop : {RVL_REDUCE_SUM, RVL_REDUCE_MAX, RVL_REDUCE_PROD, RVL_REDUCE_LOGSUMEXP})
    for (int32_t dt : kDtypes) {
      const bool lse = rop == RVL_REDUCE_LOGSUMEXP;
      if (dt == RVL_DTYPE_BOOL || (lse && !rvl::dtype_is_float(dt))) continue;
      for (uint32_t axes : {1u, 2u, 3u})
        for (int64_t inner : {7, 100}) {
          Kernel k;
          k.shape = {inner == 7 ? 5 : 3, inner};
          k.inputs = {dense(dt, k.shape)};
          k.inputs[0].view.valid_lo[1] = 1;  // padded: a masked load
          k.code = {ins(RVL_OP_LOAD, dt)};
          k.reduce_op = rop;
          k.reduce_axes = axes;
          k.acc_dtype = dt;
          k.epilogue = {ins(RVL_OP_LOAD, dt), ins(RVL_OP_ACC, dt)};
          if (lse) k.epilogue.push_back(ins(RVL_OP_NEG, dt, 1));  // x - lse
          const int32_t op = rop == RVL_REDUCE_PROD ? RVL_OP_MUL : rop == RVL_REDUCE_MAX ? RVL_OP_MAX : RVL_OP_ADD;
          k.epilogue.push_back(ins(op, dt, 0, lse ? 2 : 1));
          const rvl::l0::ProgramLaunch L = k.plan();
          BOOST_TEST(L.sig.has_epilogue());
          BOOST_TEST(L.sig.serial_reduce == !(axes & 2u && (axes == 3u || inner == 100)));
          group_kernels += !L.sig.serial_reduce;
          check_program(k, "row epilogue of reduce " + std::to_string(rop) + " " + rvl::dtype_name(dt) +
                               " axes " + std::to_string(axes) + " inner " + std::to_string(inner));
          ++emitted;
        }
    }
  // The core's softmax on f32: the widening LOGSUMEXP (f64 ACC), e^z back in f32.
  Kernel k;
  k.shape = {3, 100};
  k.inputs = {dense(RVL_DTYPE_F32, k.shape)};
  k.code = {ins(RVL_OP_LOAD, RVL_DTYPE_F32)};
  k.reduce_op = RVL_REDUCE_LOGSUMEXP;
  k.reduce_axes = 2u;
  k.acc_dtype = RVL_DTYPE_F64;
  k.epilogue = {ins(RVL_OP_LOAD, RVL_DTYPE_F32), ins(RVL_OP_CAST, RVL_DTYPE_F64, 0), ins(RVL_OP_ACC, RVL_DTYPE_F64),
                ins(RVL_OP_NEG, RVL_DTYPE_F64, 2),  ins(RVL_OP_ADD, RVL_DTYPE_F64, 1, 3),
                ins(RVL_OP_CAST, RVL_DTYPE_F32, 4), ins(RVL_OP_EXP2, RVL_DTYPE_F32, 5)};
  check_program(k, "softmax with an f64 accumulator");
  BOOST_TEST_MESSAGE(emitted + 1 << " row epilogue kernels valid");
  BOOST_TEST(emitted > 80);
  BOOST_TEST(group_kernels > 0);
}

// Chains (ABI 1.11): layer norm's form (stage 0 sums x, the program sums (x - ACC1)^2, the
// epilogue reads both) and a LOGSUMEXP stage feeding a SUM without epilogue (the cross-entropy
// row loss's form), in every float dtype, serial and with a work-group per row, padded.
BOOST_AUTO_TEST_CASE(row_chains_of_every_float_dtype) {
  int emitted = 0;
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_F64, RVL_DTYPE_F16, RVL_DTYPE_BF16})
    for (uint32_t axes : {1u, 2u})
      for (int64_t inner : {7, 100})
        for (bool epilogue : {true, false}) {
          Kernel k;
          k.shape = {inner == 7 ? 5 : 3, inner};
          k.inputs = {dense(dt, k.shape)};
          k.inputs[0].view.valid_lo[1] = 1;
          rvl_instruction acc1 = ins(RVL_OP_ACC, dt);
          acc1.arg = 1;
          k.stage_code = {{ins(RVL_OP_LOAD, dt)}};
          k.stage_ops = {epilogue ? RVL_REDUCE_SUM : RVL_REDUCE_LOGSUMEXP};
          k.stage_accs = {dt};
          // (x - ACC1)^2, or ACC1 - x
          k.code = {ins(RVL_OP_LOAD, dt), acc1, ins(RVL_OP_NEG, dt, 1), ins(RVL_OP_ADD, dt, 0, 2)};
          if (epilogue) k.code.push_back(ins(RVL_OP_MUL, dt, 3, 3));
          else k.code.push_back(ins(RVL_OP_NEG, dt, 3));
          k.reduce_op = RVL_REDUCE_SUM;
          k.reduce_axes = axes;
          if (epilogue) {
            rvl_instruction acc0 = ins(RVL_OP_ACC, dt);
            k.acc_dtype = dt;
            k.epilogue = {ins(RVL_OP_LOAD, dt), acc1, acc0, ins(RVL_OP_ADD, dt, 0, 1), ins(RVL_OP_MUL, dt, 3, 2)};
          }
          const rvl::l0::ProgramLaunch L = k.plan();
          BOOST_TEST(L.sig.stages.size() == 1u);
          check_program(k, std::string("chain ") + rvl::dtype_name(dt) + " axes " + std::to_string(axes) + " inner " +
                               std::to_string(inner) + (epilogue ? " with epilogue" : ""));
          ++emitted;
          Kernel other = k;  // another stage op: another module
          other.stage_ops = {RVL_REDUCE_MAX};
          BOOST_TEST(other.plan().sig.key() != L.sig.key());
        }
  BOOST_TEST(emitted == 32);
}

BOOST_AUTO_TEST_CASE(contractions_of_every_dtype_with_an_epilogue) {
  for (int32_t dt : kDtypes)
    for (int batch : {0, 2}) {
      rvl_contraction c{};
      c.struct_size = sizeof c;
      c.dtype = dt;
      c.batch_rank = batch;
      std::vector<int64_t> lead;
      for (int d = 0; d < batch; ++d) lead.push_back(c.batch_shape[d] = 3);
      c.m = 5, c.n = 6, c.k = 7;
      auto with = [&](int64_t r, int64_t col) {
        std::vector<int64_t> s = lead;
        s.push_back(r);
        s.push_back(col);
        return s;
      };
      c.a = dense(dt, with(c.m, c.k));
      c.b = dense(dt, with(c.k, c.n));
      c.c = dense(dt, with(c.m, c.n));
      rvl_operand bias = dense(dt, with(c.m, c.n));
      bias.view.valid_hi[batch + 1] = 4;  // padded epilogue input
      rvl_instruction load = ins(RVL_OP_LOAD, dt);
      std::vector<rvl_instruction> epi = {ins(RVL_OP_ACC, dt), load, ins(RVL_OP_MAX, dt, 0, 1)};
      c.n_epilogue_inputs = 1;
      c.epilogue_inputs = &bias;
      c.n_epilogue = int32_t(epi.size());
      c.epilogue = epi.data();
      const auto plan = rvl::l0::plan_contraction(rvl::validate::validate_contraction(&c, fake_lookup, RVL_DTYPES_ALL));
      check_valid(rvl::l0::emit_contraction(plan.sig),
                  std::string("contraction ") + rvl::dtype_name(dt) + " batch " + std::to_string(batch));
    }
}

BOOST_AUTO_TEST_CASE(modules_are_keyed_by_structure_not_by_shape) {
  Kernel a;
  a.inputs = {dense(RVL_DTYPE_F32, a.shape), dense(RVL_DTYPE_F32, a.shape)};
  rvl_instruction l1 = ins(RVL_OP_LOAD, RVL_DTYPE_F32);
  l1.arg = 1;
  a.code = {ins(RVL_OP_LOAD, RVL_DTYPE_F32), l1, ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 1)};
  Kernel b = a;
  b.shape = {40, 3};
  b.inputs = {dense(RVL_DTYPE_F32, b.shape), dense(RVL_DTYPE_F32, b.shape)};
  b.inputs[1].view.offset = 8;  // other extents and offsets: the same module
  BOOST_TEST(a.plan().sig.key() == b.plan().sig.key());
  // Dense views merge into one axis: a 2-D element-wise kernel runs over a flat index.
  BOOST_TEST(a.plan().sig.kept == 1);

  Kernel c = a;
  c.inputs[1].view.valid_lo[0] = 1;  // padding needs the validity check: another module
  BOOST_TEST(a.plan().sig.key() != c.plan().sig.key());
  Kernel d = a;
  rvl_instruction k = ins(RVL_OP_CONST, RVL_DTYPE_F32);
  k.value.f = 2.0;
  d.code = {ins(RVL_OP_LOAD, RVL_DTYPE_F32), k, ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 1)};
  Kernel e = d;
  e.code[1].value.f = 3.0;
  BOOST_TEST(d.plan().sig.key() != e.plan().sig.key());

  // A row epilogue is structure: two programs differing only in it are two modules, and a
  // reduction with an epilogue is not the plain reduction's module.
  Kernel r;
  r.shape = {6, 37};
  r.inputs = {dense(RVL_DTYPE_F32, r.shape)};
  r.code = {ins(RVL_OP_LOAD, RVL_DTYPE_F32)};
  r.reduce_op = RVL_REDUCE_MAX;
  r.reduce_axes = 2u;
  r.acc_dtype = RVL_DTYPE_F32;
  r.epilogue = {ins(RVL_OP_LOAD, RVL_DTYPE_F32), ins(RVL_OP_ACC, RVL_DTYPE_F32), ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 1)};
  Kernel r2 = r;
  r2.epilogue[2].op = RVL_OP_MUL;
  BOOST_TEST(r.plan().sig.key() != r2.plan().sig.key());
  BOOST_TEST(r.plan().sig.key() != [&] { Kernel plain = r; plain.epilogue.clear(); return plain.plan().sig.key(); }());
  // Its output record holds every axis' stride (the row is written back, not reduced).
  const rvl::l0::ProgramLaunch plain = r.plan();
  const rvl::l0::ProgramMeta pm(plain.sig);
  BOOST_TEST(pm.size == plain.meta.size());
  BOOST_TEST(plain.meta[rvl::l0::ProgramMeta::stride(pm.output, 0)] == 37);
  BOOST_TEST(plain.meta[rvl::l0::ProgramMeta::stride(pm.output, 1)] == 1);
}
