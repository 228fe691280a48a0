// Every instruction x every dtype it is defined for, plus NaN/Inf propagation and integer edges.
#include "kernel_case.hpp"

namespace rvl::conformance {
namespace {

// The 1.7 dtypes run wherever a device states them (skipped elsewhere); f16 and bf16 are
// compared with the reference's f32 arithmetic rounded once (docs/dtypes.md, "Tolerances").
const int32_t kDtypes[] = {RVL_DTYPE_BOOL, RVL_DTYPE_U8,  RVL_DTYPE_I32, RVL_DTYPE_I64, RVL_DTYPE_F32,
                           RVL_DTYPE_F64,  RVL_DTYPE_F16, RVL_DTYPE_BF16, RVL_DTYPE_I8, RVL_DTYPE_I16,
                           RVL_DTYPE_U16,  RVL_DTYPE_U32, RVL_DTYPE_U64};
// The unary and binary arithmetic ops, straight from the op table (CAST and WHERE have cases of
// their own below): a row added to the table gets its cases here with no edit.
std::vector<int32_t> ops_of_arity(int arity) {
  std::vector<int32_t> out;
  for (int32_t op = 0; op < RVL_OP_COUNT_; ++op)
    if (rvl::op_info(op).arity == arity && rvl::op_info(op).result != rvl::OpResult::Free &&
        rvl::op_info(op).accepts != rvl::OpAccepts::Select)
      out.push_back(op);
  return out;
}
const std::vector<int32_t> kUnary = ops_of_arity(1);
const std::vector<int32_t> kBinary = ops_of_arity(2);
bool defined(int32_t op, int32_t dt) { return rvl::op_accepts(op, dt); }
std::string dn(int32_t dt) { return dtype_str(dt); }
std::string on(int32_t op) { return op_str(op); }

// out = op(a[, b]) over `shape`, inputs contiguous.
ProgramCase unary_case(int32_t op, int32_t dt, int32_t rdt, ref::HostBuffer a,
                       const std::vector<int64_t>& shape) {
  return simple_program(shape, {{std::move(a), contiguous(shape)}},
                        {load(dt, 0), ins(op, rdt, 0)}, threshold(accuracy_of(op), rdt));
}
ProgramCase binary_case(int32_t op, int32_t dt, ref::HostBuffer a, ref::HostBuffer b,
                        const std::vector<int64_t>& shape) {
  const int32_t rdt = rvl::op_result_dtype(op, dt);
  return simple_program(shape, {{std::move(a), contiguous(shape)}, {std::move(b), contiguous(shape)}},
                        {load(dt, 0), load(dt, 1), ins(op, rdt, 0, 1)},
                        threshold(accuracy_of(op), rdt));
}

void register_basic() {
  const std::vector<int64_t> shape{97};
  for (int32_t dt : kDtypes) {
    add_case("elementwise", "LOAD/" + dn(dt), [=](Measure& m) {
      simple_program({7, 13}, {{make_data(dt, 91, 1), contiguous({7, 13})}}, {load(dt, 0)},
                     threshold(Accuracy::Exact, dt)).run(m);
    });
    const std::vector<std::pair<std::string, rvl_instruction>> consts =
        ref::is_float(dt)
            ? std::vector<std::pair<std::string, rvl_instruction>>{
                  {"third", const_f(dt, 1.0 / 3.0)}, {"huge", const_f(dt, 1e300)},
                  {"neg_zero", const_f(dt, -0.0)}}
            : std::vector<std::pair<std::string, rvl_instruction>>{
                  {"300", const_i(dt, 300)}, {"2^40+5", const_i(dt, (int64_t(1) << 40) + 5)},
                  {"-1", const_i(dt, -1)}};
    for (const auto& [label, c] : consts)
      add_case("elementwise", "CONST/" + dn(dt) + "/" + label, [=](Measure& m) {
        simple_program({5, 3}, {}, {c}, threshold(Accuracy::Exact, dt)).run(m);
      });
    for (int32_t op : kUnary) {
      if (!defined(op, dt)) continue;
      add_case("elementwise", on(op) + "/" + dn(dt), [=](Measure& m) {
        unary_case(op, dt, dt, make_data(dt, 97, 10 + op), shape).run(m);
      });
    }
    for (int32_t op : kBinary) {
      if (!defined(op, dt)) continue;
      add_case("elementwise", on(op) + "/" + dn(dt), [=](Measure& m) {
        const Data kind = (op == RVL_OP_MOD || op == RVL_OP_IDIV) ? Data::Small : Data::Mixed;
        binary_case(op, dt, make_data(dt, 97, 20 + op), make_data(dt, 97, 40 + op, kind), shape).run(m);
      });
    }
    add_case("elementwise", "WHERE/" + dn(dt), [=](Measure& m) {
      simple_program(shape,
                     {{make_data(RVL_DTYPE_BOOL, 97, 5), contiguous(shape)},
                      {make_data(dt, 97, 6), contiguous(shape)},
                      {make_data(dt, 97, 7), contiguous(shape)}},
                     {load(RVL_DTYPE_BOOL, 0), load(dt, 1), load(dt, 2), ins(RVL_OP_WHERE, dt, 0, 1, 2)},
                     threshold(Accuracy::Exact, dt)).run(m);
    });
    for (int32_t to : kDtypes)
      add_case("elementwise", "CAST/" + dn(dt) + "->" + dn(to), [=](Measure& m) {
        unary_case(RVL_OP_CAST, dt, to, make_data(dt, 97, 60 + to), shape).run(m);
      });
  }
}

// Every pair of special values through every binary op; specials through unary ops and casts.
void register_specials() {
  for (int32_t dt : kDtypes) {
    const bool fp = ref::is_float(dt);
    const std::string group = fp ? "nan_inf" : "integer_edges";
    const int64_t ns = fp ? 11 : 9;  // the Data::Specials cycle length
    const ref::HostBuffer sp = make_data(dt, ns, 0, Data::Specials);
    ref::HostBuffer a(dt, ns * ns), b(dt, ns * ns);
    for (int64_t i = 0; i < ns * ns; ++i) a.set(i, sp.get(i / ns)), b.set(i, sp.get(i % ns));
    const std::vector<int64_t> shape{ns * ns};
    for (int32_t op : kBinary) {
      if (!defined(op, dt)) continue;
      add_case(group, on(op) + "/" + dn(dt), [=](Measure& m) { binary_case(op, dt, a, b, shape).run(m); });
    }
    for (int32_t op : kUnary) {
      if (!defined(op, dt)) continue;
      add_case(group, on(op) + "/" + dn(dt), [=](Measure& m) { unary_case(op, dt, dt, a, shape).run(m); });
    }
    for (int32_t to : kDtypes)
      add_case(group, "CAST/" + dn(dt) + "->" + dn(to),
               [=](Measure& m) { unary_case(RVL_OP_CAST, dt, to, a, shape).run(m); });
  }
}

}  // namespace

void register_elementwise_cases() {
  register_basic();
  register_specials();
}

}  // namespace rvl::conformance
