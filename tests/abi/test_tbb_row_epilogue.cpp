// ABI 1.10 on tbb_cpu: reductions with a row epilogue (rvl_program.n_epilogue). Softmax and
// log_softmax programs against double loops written here (not the SDK reference), on the fused
// layout (rows innermost), the split one (few long rows) and columns (two passes); a host built
// against 1.8 (struct_size before the new members) gets a plain reduction whatever lies beyond;
// malformed epilogues are INVALID_ARGUMENT; the property respects the host's struct size.
#include "common.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>

using namespace abitest;

namespace {

constexpr double kLog2e = 1.4426950408889634;

// softmax (log: log_softmax) of f32 x over `axis` (0 or 1) of [rows, cols]: LOGSUMEXP widened to
// f64, then x - lse in f64, rounded to f32, then 2^(z log2 e) in f32 (the core's program).
struct Softmax {
  int64_t rows, cols;
  int axis;
  bool log;
  std::vector<rvl_instruction> main{load(RVL_DTYPE_F32, 0)}, epi;
  Softmax(int64_t r, int64_t c, int ax, bool lg) : rows(r), cols(c), axis(ax), log(lg) {
    epi = {load(RVL_DTYPE_F32, 0), ins(RVL_OP_CAST, RVL_DTYPE_F64, 0), ins(RVL_OP_ACC, RVL_DTYPE_F64),
           ins(RVL_OP_NEG, RVL_DTYPE_F64, 2), ins(RVL_OP_ADD, RVL_DTYPE_F64, 1, 3), ins(RVL_OP_CAST, RVL_DTYPE_F32, 4)};
    if (!log)
      epi.insert(epi.end(), {cnst_f(RVL_DTYPE_F32, kLog2e), ins(RVL_OP_MUL, RVL_DTYPE_F32, 5, 6),
                             ins(RVL_OP_EXP2, RVL_DTYPE_F32, 7)});
  }
  rvl_program program(rvl_buffer* x, rvl_buffer* y, const rvl_operand* in, rvl_operand* in_storage) const {
    const int64_t shape[2] = {rows, cols};
    *in_storage = operand(x, RVL_DTYPE_F32, contiguous(2, shape));
    rvl_program p{};
    p.struct_size = sizeof p;
    p.rank = 2;
    p.shape[0] = rows, p.shape[1] = cols;
    p.n_inputs = 1;
    p.inputs = in;
    p.n_instructions = int32_t(main.size());
    p.instructions = main.data();
    p.reduce_op = RVL_REDUCE_LOGSUMEXP;
    p.reduce_axes = 1u << axis;
    p.output = operand(y, RVL_DTYPE_F32, contiguous(2, shape));
    p.n_epilogue = int32_t(epi.size());
    p.epilogue = epi.data();
    p.acc_dtype = RVL_DTYPE_F64;
    return p;
  }
  // Double loops: the maximum, then the sum of e^(x - m), per row (axis 1) or column (axis 0).
  std::vector<double> expected(const std::vector<float>& x) const {
    std::vector<double> out(x.size());
    const int64_t outer = axis == 1 ? rows : cols, n = axis == 1 ? cols : rows;
    auto at = [&](int64_t o, int64_t k) { return axis == 1 ? o * cols + k : k * cols + o; };
    for (int64_t o = 0; o < outer; ++o) {
      double m = -std::numeric_limits<double>::infinity(), s = 0;
      for (int64_t k = 0; k < n; ++k) m = std::max<double>(m, x[at(o, k)]);
      for (int64_t k = 0; k < n; ++k) s += std::exp(double(x[at(o, k)]) - m);
      for (int64_t k = 0; k < n; ++k) {
        const double z = x[at(o, k)] - m - std::log(s);
        out[at(o, k)] = log ? z : std::exp(z);
      }
    }
    return out;
  }
};

void run_softmax(const Softmax& sm) {
  const int64_t n = sm.rows * sm.cols;
  std::vector<float> xv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) xv[i] = float(8 * std::sin(0.37 * double(i) + 0.1));
  DevBuf x(filled(RVL_DTYPE_F32, n, [&](int64_t i) { return F(xv[i]); }));
  DevBuf y(filled(RVL_DTYPE_F32, n, [](int64_t) { return F(-7); }));
  rvl_operand in;
  const rvl_program p = sm.program(x.get(), y.get(), &in, &in);
  ok(api().execute_program(0, nullptr, &p), "softmax program");
  ok(api().synchronize(0));
  const HostBuf got = y.read(RVL_DTYPE_F32);
  const std::vector<double> want = sm.expected(xv);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double w = want[i], g = got.get(i).f;
    // softmax: e^d with d rounded to f32 first (relative (8 + 2|d|) 2^-24); log_softmax: 2^-22.
    const double tol = sm.log ? std::ldexp(1.0, -22) * std::max(1.0, std::abs(w))
                              : (8 + 2 * std::abs(std::log(w))) * std::ldexp(1.0, -24) * w;
    if (!(std::abs(g - w) <= tol) && bad++ < 3) BOOST_ERROR("element " << i << ": " << g << ", expected " << w);
  }
  BOOST_TEST(bad == 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tbb_row_epilogue)

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_against_double_loops) {
  // [64, 4096] and [300, 257]: rows fused a block at a time; [3, 70001]: rows split across
  // threads (two passes); [37, 5] along axis 0: columns (two passes); [1, 1]: one element.
  for (auto [r, c, axis] : std::vector<std::tuple<int64_t, int64_t, int>>{
           {64, 4096, 1}, {300, 257, 1}, {3, 70001, 1}, {37, 5, 0}, {1, 1, 1}, {1000, 3, 1}})
    for (bool log : {false, true})
      BOOST_TEST_CONTEXT(r << "x" << c << " axis " << axis << (log ? " log_softmax" : " softmax"))
      run_softmax(Softmax(r, c, axis, log));
}

BOOST_AUTO_TEST_CASE(a_1_8_host_gets_a_plain_reduction) {
  // struct_size ends at `output`: n_epilogue and the rest are garbage the plugin must not read.
  const int64_t shape[2] = {4, 6};
  DevBuf x(filled(RVL_DTYPE_F32, 24, [](int64_t i) { return F(0.25 * double(i % 7)); }));
  DevBuf y(filled(RVL_DTYPE_F32, 4, [](int64_t) { return F(-7); }));
  Softmax sm(4, 6, 1, false);
  rvl_operand in;
  rvl_program p = sm.program(x.get(), y.get(), &in, &in);
  p.struct_size = RVL_PROGRAM_STRUCT_SIZE_1_0;
  p.output = operand(y.get(), RVL_DTYPE_F32, make_view(2, {4, 6}, {1, 0}));
  p.n_epilogue = 12345;
  p.epilogue = reinterpret_cast<const rvl_instruction*>(uintptr_t(1));
  p.acc_dtype = -3;
  ok(api().execute_program(0, nullptr, &p), "1.8-sized reduction");
  ok(api().synchronize(0));
  const HostBuf got = y.read(RVL_DTYPE_F32);
  for (int64_t r = 0; r < 4; ++r) {
    double s = 0;
    for (int64_t k = 0; k < 6; ++k) s += std::exp(0.25 * double((r * 6 + k) % 7));
    BOOST_TEST(got.get(r).f == std::log(s), boost::test_tools::tolerance(1e-6));
  }
  (void)shape;
}

BOOST_AUTO_TEST_CASE(malformed_epilogues_are_invalid) {
  DevBuf x(filled(RVL_DTYPE_F32, 24, [](int64_t i) { return F(double(i)); }));
  DevBuf y(filled(RVL_DTYPE_F32, 24, [](int64_t) { return F(0); }));
  Softmax sm(4, 6, 1, false);
  rvl_operand in;
  auto fresh = [&] { return sm.program(x.get(), y.get(), &in, &in); };
  rvl_program p = fresh();
  p.reduce_op = RVL_REDUCE_NONE, p.reduce_axes = 0;
  expect_error(api().execute_program(0, nullptr, &p), "needs a reduce_op");
  p = fresh();
  p.acc_dtype = RVL_DTYPE_F32;  // the ACC instruction says f64
  expect_error(api().execute_program(0, nullptr, &p), "accumulator dtype");
  p = fresh();
  p.acc_dtype = 99;
  expect_error(api().execute_program(0, nullptr, &p), "acc_dtype");
  p = fresh();
  p.acc_dtype = RVL_DTYPE_I32;
  expect_error(api().execute_program(0, nullptr, &p), "LOGSUMEXP");
  p = fresh();
  p.epilogue = nullptr;
  expect_error(api().execute_program(0, nullptr, &p), "NULL");
  p = fresh();
  p.output = operand(y.get(), RVL_DTYPE_F32, make_view(2, {4, 6}, {1, 0}));  // the reduced form
  expect_error(api().execute_program(0, nullptr, &p), "output");
  std::vector<rvl_instruction> bad = sm.epi;
  bad[0].arg = 1;  // only one input
  p = fresh();
  p.epilogue = bad.data();
  expect_error(api().execute_program(0, nullptr, &p), "input index");
  bad = sm.epi;
  bad.push_back(ins(RVL_OP_CAST, RVL_DTYPE_F64, 8));  // the last dtype must be the output's
  p = fresh();
  p.epilogue = bad.data();
  p.n_epilogue = int32_t(bad.size());
  expect_error(api().execute_program(0, nullptr, &p), "differs from the output dtype");
  // ACC in a plain elementwise program is still refused.
  const int64_t shape[2] = {4, 6};
  const rvl_instruction acc_only[] = {ins(RVL_OP_ACC, RVL_DTYPE_F32)};
  rvl_program q{};
  q.struct_size = sizeof q;
  q.rank = 2, q.shape[0] = 4, q.shape[1] = 6;
  q.n_instructions = 1, q.instructions = acc_only;
  q.output = operand(y.get(), RVL_DTYPE_F32, contiguous(2, shape));
  expect_error(api().execute_program(0, nullptr, &q), "only allowed in epilogues");
}

BOOST_AUTO_TEST_CASE(property_respects_the_hosts_struct_size) {
  constexpr unsigned char kGuard = 0x5A;
  rvl_device_properties p;
  std::memset(&p, kGuard, sizeof p);
  p.struct_size = RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_8;
  ok(api().device_properties(0, &p));
  const auto* bytes = reinterpret_cast<const unsigned char*>(&p);
  for (size_t i = RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_8; i < sizeof p; ++i)
    BOOST_TEST_REQUIRE(int(bytes[i]) == int(kGuard), "byte " << i << " past the 1.8 struct was written");
  rvl_device_properties q{};
  q.struct_size = sizeof q;
  ok(api().device_properties(0, &q));
  const char* off = std::getenv("RAVEL_TBB_NO_ROW_EPILOGUE");
  BOOST_TEST(q.reduce_epilogue_ops == (off && *off && *off != '0' ? 0u : q.reduce_ops));
}

BOOST_AUTO_TEST_SUITE_END()
