// Fused programs of growing length (up to RVL_MAX_INSTRUCTIONS), DAGs that reuse values,
// mixed dtypes in one program, and the largest number of inputs.
#include "kernel_case.hpp"

namespace rvl::conformance {
namespace {

// A chain of `length` instructions over three inputs; every step depends on the previous one.
std::vector<rvl_instruction> chain(int32_t dt, int length) {
  const bool fp = ref::is_float(dt);
  std::vector<rvl_instruction> c = {load(dt, 0), load(dt, 1), load(dt, 2),
                                    fp ? const_f(dt, 0.5) : const_i(dt, 3)};
  int32_t cur = 0;
  int step = 0;
  while (int(c.size()) < length) {
    const int32_t j = int32_t(c.size());
    switch (step++ % 6) {
      case 0: c.push_back(ins(RVL_OP_MUL, dt, cur, 3)); break;
      case 1: c.push_back(ins(RVL_OP_ADD, dt, cur, 1)); break;
      case 2: c.push_back(fp ? ins(RVL_OP_SIN, dt, cur) : ins(RVL_OP_XOR, dt, cur, 2)); break;
      case 3: c.push_back(ins(RVL_OP_MAX, dt, cur, 2)); break;
      case 4: c.push_back(fp ? ins(RVL_OP_NEG, dt, cur) : ins(RVL_OP_IDIV, dt, cur, 1)); break;
      default: c.push_back(fp ? ins(RVL_OP_MUL, dt, cur, 3) : ins(RVL_OP_MOD, dt, cur, 3)); break;
    }
    cur = j;
  }
  c.resize(size_t(length));
  if (length <= 4) c.back() = ins(RVL_OP_ADD, dt, 0, 1);  // keep even the shortest meaningful
  return c;
}

}  // namespace

void register_fused_cases() {
  const std::vector<int64_t> shape{33, 17};
  const int64_t n = count(shape);
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_F64, RVL_DTYPE_I32, RVL_DTYPE_I64})
    for (int length : {2, 4, 8, 16, 64, 256, 1024, RVL_MAX_INSTRUCTIONS}) {
      add_case("fused", "chain/" + dtype_str(dt) + "/" + std::to_string(length), [=](Measure& m) {
        const int L = length < 4 ? 4 : length;
        std::vector<rvl_instruction> code = chain(dt, L);
        if (length == 2) code = {load(dt, 0), ins(RVL_OP_NEG, dt, 0)};
        simple_program(shape,
                       {{make_data(dt, n, 1, Data::Small), contiguous(shape)},
                        {make_data(dt, 17, 2, Data::Small), view_of(shape, {0, 1})},
                        {make_data(dt, n, 3, Data::Small), view_of(shape, {1, 33})}},
                       code, threshold(Accuracy::Accumulation, dt)).run(m);
      });
    }
  // Mixed dtypes: clamp(trunc(x * 3) as i32 + y, ...) as f64, then a select back to f32.
  add_case("fused", "mixed_dtypes", [shape, n](Measure& m) {
    using namespace std;
    const int32_t F = RVL_DTYPE_F32, D = RVL_DTYPE_F64, I = RVL_DTYPE_I32, B = RVL_DTYPE_BOOL;
    simple_program(shape,
                   {{make_data(F, n, 4), contiguous(shape)}, {make_data(I, n, 5, Data::Small), contiguous(shape)}},
                   {load(F, 0), const_f(F, 3.0), ins(RVL_OP_MUL, F, 0, 1), ins(RVL_OP_CAST, I, 2),
                    load(I, 1), ins(RVL_OP_ADD, I, 3, 4), ins(RVL_OP_CAST, D, 5), const_f(D, 0.25),
                    ins(RVL_OP_MUL, D, 6, 7), ins(RVL_OP_CAST, F, 8), ins(RVL_OP_CMPLT, B, 9, 0),
                    ins(RVL_OP_WHERE, F, 10, 9, 0), ins(RVL_OP_EXP2, F, 11)},
                   threshold(Accuracy::Accumulation, F)).run(m);
  });
  // A CAST of a computed half to its own dtype rounds (docs/dtypes.md, "Half arithmetic": a
  // half op computes in f32 and rounds where a value is stored or cast; the core relies on it,
  // Note [Comparisons see stored halves]): y = x * (1/3) keeps f32 precision, y - cast(y) is
  // the rounding residual, nonzero almost everywhere, and exactly 0 on a device whose cast to
  // the same dtype does nothing. The residual is then compared with 0 (CMPNE) and selected.
  for (int32_t dt : {RVL_DTYPE_F16, RVL_DTYPE_BF16})
    add_case("fused", "half_cast_rounds/" + dtype_str(dt), [shape, n, dt](Measure& m) {
      const int32_t B = RVL_DTYPE_BOOL;
      simple_program(shape, {{make_data(dt, n, 21), contiguous(shape)}},
                     {load(dt, 0), const_f(dt, 1.0 / 3.0), ins(RVL_OP_MUL, dt, 0, 1), ins(RVL_OP_CAST, dt, 2),
                      ins(RVL_OP_NEG, dt, 3), ins(RVL_OP_ADD, dt, 2, 4), const_f(dt, 0.0), ins(RVL_OP_CMPNE, B, 5, 6),
                      const_f(dt, 1024.0), ins(RVL_OP_MUL, dt, 5, 8), ins(RVL_OP_WHERE, dt, 7, 9, 6)},
                     threshold(Accuracy::Rounding, dt)).run(m);
    });
  // A DAG: one loaded value feeds many instructions (x*x + x*y + sqrt(|x|) ...).
  add_case("fused", "dag_reuse", [shape, n](Measure& m) {
    const int32_t F = RVL_DTYPE_F64;
    simple_program(shape,
                   {{make_data(F, n, 6), contiguous(shape)}, {make_data(F, n, 7), contiguous(shape)}},
                   {load(F, 0), load(F, 1), ins(RVL_OP_MUL, F, 0, 0), ins(RVL_OP_MUL, F, 0, 1),
                    ins(RVL_OP_ADD, F, 2, 3), ins(RVL_OP_NEG, F, 0), ins(RVL_OP_MAX, F, 0, 5),
                    ins(RVL_OP_SQRT, F, 6), ins(RVL_OP_ADD, F, 4, 7), ins(RVL_OP_RECIP, F, 8),
                    ins(RVL_OP_LOG2, F, 6), ins(RVL_OP_ADD, F, 9, 10)},
                   threshold(Accuracy::Accumulation, F)).run(m);
  });
  // RVL_MAX_INPUTS inputs, each viewed differently, summed.
  add_case("fused", "max_inputs", [shape, n](Measure& m) {
    const int32_t F = RVL_DTYPE_F32;
    std::vector<Input> inputs;
    std::vector<rvl_instruction> code;
    for (int i = 0; i < RVL_MAX_INPUTS; ++i) {
      if (i % 3 == 0) inputs.push_back({make_data(F, n, 10 + i), contiguous(shape)});
      else if (i % 3 == 1) inputs.push_back({make_data(F, 17, 10 + i), view_of(shape, {0, 1})});
      else inputs.push_back({make_data(F, n, 10 + i), view_of(shape, {-1, -33}, n - 1)});
      code.push_back(load(F, i));
      if (i > 0) code.push_back(ins(RVL_OP_ADD, F, int32_t(code.size()) - 2, int32_t(code.size()) - 1));
    }
    simple_program(shape, std::move(inputs), std::move(code), threshold(Accuracy::Accumulation, F)).run(m);
  });
}

}  // namespace rvl::conformance
