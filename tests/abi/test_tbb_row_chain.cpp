// ABI 1.11 on tbb_cpu: chains of row reductions (rvl_program.stages). Layer norm as one program
// (stage 0 sums x; the program sums (x - mean)^2; the epilogue normalises, scales and shifts)
// against double loops written here (not the SDK reference), on the fused layout (rows
// innermost: a block of rows per task, rows longer than a block, many short rows), columns
// (passes) and f64; the cross-entropy per-row loss (LOGSUMEXP stage, reduced output); a host
// built against 1.10 (struct_size before the new members) gets the 1.10 program whatever lies
// beyond; malformed chains are INVALID_ARGUMENT; the property follows RAVEL_TBB_NO_ROW_CHAIN.
#include "common.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <tuple>

using namespace abitest;

namespace {

rvl_instruction acc(int32_t dt, int32_t k) { return ins(RVL_OP_ACC, dt, -1, -1, -1, k); }

// Layer norm over axis `axis` of [rows, cols] in dtype dt: inputs x, g, b (g and b indexed by
// the reduced axis), stage 0 = sum x, program = sum (x - ACC1/n)^2, epilogue as in the header.
struct LayerNorm {
  int64_t rows, cols;
  int axis;
  int32_t dt;
  double eps = 1e-5;
  std::vector<rvl_instruction> stage_code, main, epi;
  rvl_reduce_stage stage{};
  std::vector<rvl_operand> in;
  LayerNorm(int64_t r, int64_t c, int ax, int32_t d) : rows(r), cols(c), axis(ax), dt(d) {
    const double inv = 1.0 / double(ax == 1 ? c : r);
    stage_code = {load(dt, 0)};
    // 0 x, 1 ACC1, 2 1/n, 3 mean, 4 -mean, 5 d
    const std::vector<rvl_instruction> centred = {load(dt, 0), acc(dt, 1), cnst_f(dt, inv), ins(RVL_OP_MUL, dt, 1, 2),
                                                  ins(RVL_OP_NEG, dt, 3), ins(RVL_OP_ADD, dt, 0, 4)};
    main = centred;
    main.push_back(ins(RVL_OP_MUL, dt, 5, 5));
    epi = centred;
    epi.insert(epi.end(), {acc(dt, 0), ins(RVL_OP_MUL, dt, 6, 2), cnst_f(dt, eps), ins(RVL_OP_ADD, dt, 7, 8),
                           ins(RVL_OP_SQRT, dt, 9), ins(RVL_OP_RECIP, dt, 10), ins(RVL_OP_MUL, dt, 5, 11),
                           load(dt, 1), ins(RVL_OP_MUL, dt, 12, 13), load(dt, 2), ins(RVL_OP_ADD, dt, 14, 15)});
    stage = {sizeof(rvl_reduce_stage), RVL_REDUCE_SUM, dt, 1, stage_code.data()};
  }
  rvl_program program(rvl_buffer* x, rvl_buffer* g, rvl_buffer* b, rvl_buffer* y) {
    const int64_t shape[2] = {rows, cols};
    const std::vector<int64_t> par = axis == 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{1, 0};
    in = {operand(x, dt, contiguous(2, shape)), operand(g, dt, make_view(2, {rows, cols}, par)),
          operand(b, dt, make_view(2, {rows, cols}, par))};
    rvl_program p{};
    p.struct_size = sizeof p;
    p.rank = 2;
    p.shape[0] = rows, p.shape[1] = cols;
    p.n_inputs = 3;
    p.inputs = in.data();
    p.n_instructions = int32_t(main.size());
    p.instructions = main.data();
    p.reduce_op = RVL_REDUCE_SUM;
    p.reduce_axes = 1u << axis;
    p.output = operand(y, dt, contiguous(2, shape));
    p.n_epilogue = int32_t(epi.size());
    p.epilogue = epi.data();
    p.acc_dtype = dt;
    p.n_stages = 1;
    p.stages = &stage;
    return p;
  }
};

double xval(int64_t i) { return 3 * std::sin(0.37 * double(i)) + 0.5; }
double gval(int64_t j) { return 1 + 0.1 * std::cos(double(j)); }
double bval(int64_t j) { return 0.01 * double(j); }

void run_layer_norm(LayerNorm ln) {
  const int64_t n = ln.rows * ln.cols, len = ln.axis == 1 ? ln.cols : ln.rows, outer = n / len;
  const int32_t dt = ln.dt;
  DevBuf x(filled(dt, n, [](int64_t i) { return F(xval(i)); }));
  DevBuf g(filled(dt, len, [](int64_t j) { return F(gval(j)); }));
  DevBuf b(filled(dt, len, [](int64_t j) { return F(bval(j)); }));
  DevBuf y(filled(dt, n, [](int64_t) { return F(-7); }));
  const rvl_program p = ln.program(x.get(), g.get(), b.get(), y.get());
  ok(api().execute_program(0, nullptr, &p), "layer norm chain");
  ok(api().synchronize(0));
  const HostBuf got = y.read(dt), xs = x.read(dt);
  auto at = [&](int64_t o, int64_t k) { return ln.axis == 1 ? o * ln.cols + k : k * ln.cols + o; };
  int bad = 0;
  const double tol = dt == RVL_DTYPE_F32 ? 2e-5 : 1e-12;
  for (int64_t o = 0; o < outer; ++o) {
    double s = 0, q = 0;
    for (int64_t k = 0; k < len; ++k) s += xs.get(at(o, k)).f;
    const double mean = s / double(len);
    for (int64_t k = 0; k < len; ++k) q += (xs.get(at(o, k)).f - mean) * (xs.get(at(o, k)).f - mean);
    const double rstd = 1 / std::sqrt(q / double(len) + ln.eps);
    for (int64_t k = 0; k < len; ++k) {
      const double w = (xs.get(at(o, k)).f - mean) * rstd * F(gval(k)).f + F(bval(k)).f;
      const double gv = got.get(at(o, k)).f;
      if (!(std::abs(gv - w) <= tol * (1 + std::abs(w))) && bad++ < 3)
        BOOST_ERROR("row " << o << " element " << k << ": " << gv << ", expected " << w);
    }
  }
  BOOST_TEST(bad == 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tbb_row_chain)

BOOST_AUTO_TEST_CASE(layer_norm_against_double_loops) {
  // [64, 4096]: rows longer than a block; [300, 257] and [1000, 3]: many rows per task;
  // [37, 5] along axis 0: columns (passes); [1, 1]: one element (variance 0).
  // At least 32,768 elements (RAVEL_TBB_FUSED_MIN), so the fused loops run: [96, 1024] and
  // [40, 896] several rows per call with per-row operands (Note [Per-row operands in fused
  // loops]) and register chains (Note [Register chains]); [40, 1000] rows that are no multiple
  // of the chunk or the 64-element group (row by row, the chain's tail in the chunk loop);
  // [33, 1031] rows longer than a block; [40000, 1] one-element rows; [0, 128] no rows (a
  // success that writes nothing). Rows a multiple of 64 long in f32 run row by row in registers
  // (Note [Row chains in registers]): [64, 4096] in four folded runs, [20, 1088] a run of 1,024
  // and one of 64, [600, 64] one group per row, [3, 192] fewer rows than a task (inline).
  for (auto [r, c, axis] : std::vector<std::tuple<int64_t, int64_t, int>>{
           {64, 4096, 1}, {300, 257, 1}, {1000, 3, 1}, {37, 5, 0}, {1, 1, 1}, {2, 70001, 1}, {96, 1024, 1},
           {40, 896, 1}, {40, 1000, 1}, {33, 1031, 1}, {40000, 1, 1}, {0, 128, 1}, {20, 1088, 1}, {600, 64, 1},
           {3, 192, 1}})
    for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_F64})
      BOOST_TEST_CONTEXT(r << "x" << c << " axis " << axis << " dtype " << dt)
      run_layer_norm(LayerNorm(r, c, axis, dt));
}

BOOST_AUTO_TEST_CASE(cross_entropy_row_loss_is_stored_reduced) {
  // loss[r] = logsumexp(x[r]) - x[r, t[r]]: stage 0 LOGSUMEXP, then SUM of WHERE(iota != t, 0,
  // ACC1 - x) into a [rows, 1] output.
  const int64_t rows = 50, C = 1000;
  const int32_t F32 = RVL_DTYPE_F32, I32 = RVL_DTYPE_I32;
  DevBuf x(filled(F32, rows * C, [](int64_t i) { return F(xval(i)); }));
  DevBuf t(filled(I32, rows, [](int64_t r) { return I((r * 37) % 1000); }));
  DevBuf iota(filled(I32, C, [](int64_t c) { return I(c); }));
  DevBuf loss(filled(F32, rows, [](int64_t) { return F(-7); }));
  const std::vector<rvl_instruction> lse_code = {load(F32, 0)};
  const rvl_reduce_stage st = {sizeof(rvl_reduce_stage), RVL_REDUCE_LOGSUMEXP, F32, 1, lse_code.data()};
  const std::vector<rvl_instruction> code = {load(F32, 0), load(I32, 1), load(I32, 2), ins(RVL_OP_CMPNE, RVL_DTYPE_BOOL, 1, 2),
                                             acc(F32, 1), ins(RVL_OP_NEG, F32, 0), ins(RVL_OP_ADD, F32, 4, 5),
                                             cnst_f(F32, 0), ins(RVL_OP_WHERE, F32, 3, 7, 6)};
  const int64_t shape[2] = {rows, C};
  const std::vector<rvl_operand> in = {operand(x.get(), F32, contiguous(2, shape)),
                                       operand(t.get(), I32, make_view(2, {rows, C}, {1, 0})),
                                       operand(iota.get(), I32, make_view(2, {rows, C}, {0, 1}))};
  rvl_program p{};
  p.struct_size = sizeof p;
  p.rank = 2, p.shape[0] = rows, p.shape[1] = C;
  p.n_inputs = 3, p.inputs = in.data();
  p.n_instructions = int32_t(code.size()), p.instructions = code.data();
  p.reduce_op = RVL_REDUCE_SUM, p.reduce_axes = 2u;
  p.output = operand(loss.get(), F32, make_view(2, {rows, C}, {1, 0}));
  p.n_stages = 1, p.stages = &st;
  ok(api().execute_program(0, nullptr, &p), "cross-entropy chain");
  ok(api().synchronize(0));
  const HostBuf got = loss.read(F32), xs = x.read(F32);
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, xs.get(r * C + c).f);
    for (int64_t c = 0; c < C; ++c) s += std::exp(xs.get(r * C + c).f - m);
    const double want = m + std::log(s) - xs.get(r * C + (r * 37) % 1000).f;
    BOOST_TEST(got.get(r).f == want, boost::test_tools::tolerance(1e-5));
  }
}

BOOST_AUTO_TEST_CASE(a_1_10_host_gets_the_1_10_program) {
  // struct_size ends at acc_dtype: n_stages and stages are garbage the plugin must not read, so
  // this is the 1.10 program "sum x with the epilogue x / ACC" (its ACCs' args are ignored).
  const int64_t shape[2] = {4, 6};
  DevBuf x(filled(RVL_DTYPE_F32, 24, [](int64_t i) { return F(1 + double(i % 5)); }));
  DevBuf y(filled(RVL_DTYPE_F32, 24, [](int64_t) { return F(-7); }));
  const std::vector<rvl_instruction> code = {load(RVL_DTYPE_F32, 0)};
  const std::vector<rvl_instruction> epi = {load(RVL_DTYPE_F32, 0), acc(RVL_DTYPE_F32, 3),
                                            ins(RVL_OP_RECIP, RVL_DTYPE_F32, 1), ins(RVL_OP_MUL, RVL_DTYPE_F32, 0, 2)};
  const rvl_operand in = operand(x.get(), RVL_DTYPE_F32, contiguous(2, shape));
  rvl_program p{};
  p.struct_size = RVL_PROGRAM_STRUCT_SIZE_1_10;
  p.rank = 2, p.shape[0] = 4, p.shape[1] = 6;
  p.n_inputs = 1, p.inputs = &in;
  p.n_instructions = 1, p.instructions = code.data();
  p.reduce_op = RVL_REDUCE_SUM, p.reduce_axes = 2u;
  p.output = operand(y.get(), RVL_DTYPE_F32, contiguous(2, shape));
  p.n_epilogue = int32_t(epi.size()), p.epilogue = epi.data(), p.acc_dtype = RVL_DTYPE_F32;
  p.n_stages = 12345;
  p.stages = reinterpret_cast<const rvl_reduce_stage*>(uintptr_t(1));
  ok(api().execute_program(0, nullptr, &p), "1.10-sized program");
  ok(api().synchronize(0));
  const HostBuf got = y.read(RVL_DTYPE_F32);
  for (int64_t r = 0; r < 4; ++r) {
    double s = 0;
    for (int64_t k = 0; k < 6; ++k) s += 1 + double((r * 6 + k) % 5);
    for (int64_t k = 0; k < 6; ++k)
      BOOST_TEST(got.get(r * 6 + k).f == (1 + double((r * 6 + k) % 5)) / s, boost::test_tools::tolerance(1e-6));
  }
}

BOOST_AUTO_TEST_CASE(malformed_chains_are_invalid) {
  DevBuf x(filled(RVL_DTYPE_F32, 24, [](int64_t i) { return F(double(i)); }));
  DevBuf g(filled(RVL_DTYPE_F32, 6, [](int64_t) { return F(1); }));
  DevBuf b(filled(RVL_DTYPE_F32, 6, [](int64_t) { return F(0); }));
  DevBuf y(filled(RVL_DTYPE_F32, 24, [](int64_t) { return F(0); }));
  LayerNorm ln(4, 6, 1, RVL_DTYPE_F32);
  auto fresh = [&] { return ln.program(x.get(), g.get(), b.get(), y.get()); };
  rvl_program p = fresh();
  ok(api().execute_program(0, nullptr, &p), "the valid chain");
  p = fresh();
  p.n_stages = RVL_MAX_REDUCE_STAGES + 1;
  expect_error(api().execute_program(0, nullptr, &p), "n_stages");
  p = fresh();
  p.stages = nullptr;
  expect_error(api().execute_program(0, nullptr, &p), "NULL");
  p = fresh();
  p.reduce_op = RVL_REDUCE_NONE, p.reduce_axes = 0;
  expect_error(api().execute_program(0, nullptr, &p), "reduce_op");
  LayerNorm bad = ln;
  bad.main[1].arg = 2;  // only one stage: ACC 1 is the highest the program's list may read
  p = bad.program(x.get(), g.get(), b.get(), y.get());
  expect_error(api().execute_program(0, nullptr, &p), "ACC index");
  bad = ln;
  bad.main[1].arg = 0;  // the program's own reduction is not done while it runs
  p = bad.program(x.get(), g.get(), b.get(), y.get());
  expect_error(api().execute_program(0, nullptr, &p), "ACC index");
  bad = ln;
  bad.stage_code = {acc(RVL_DTYPE_F32, 1)};  // a stage reading itself
  bad.stage.instructions = bad.stage_code.data();
  p = bad.program(x.get(), g.get(), b.get(), y.get());
  expect_error(api().execute_program(0, nullptr, &p), "ACC index");
  bad = ln;
  bad.stage.instructions = bad.stage_code.data();
  bad.stage.acc_dtype = RVL_DTYPE_F64;  // its last instruction is f32
  p = bad.program(x.get(), g.get(), b.get(), y.get());
  expect_error(api().execute_program(0, nullptr, &p), "dtype");
  bad = ln;
  bad.stage.instructions = bad.stage_code.data();
  bad.stage.reduce_op = RVL_REDUCE_NONE;
  p = bad.program(x.get(), g.get(), b.get(), y.get());
  expect_error(api().execute_program(0, nullptr, &p), "reduce_op");
  bad = ln;
  bad.stage.instructions = bad.stage_code.data();
  bad.stage.struct_size = 4;
  p = bad.program(x.get(), g.get(), b.get(), y.get());
  expect_error(api().execute_program(0, nullptr, &p), "struct_size");
  ok(api().synchronize(0));
}

BOOST_AUTO_TEST_CASE(property_follows_the_switch_and_the_hosts_struct_size) {
  constexpr unsigned char kGuard = 0x5A;
  rvl_device_properties p;
  std::memset(&p, kGuard, sizeof p);
  p.struct_size = RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_10;
  ok(api().device_properties(0, &p));
  const auto* bytes = reinterpret_cast<const unsigned char*>(&p);
  for (size_t i = RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_10; i < sizeof p; ++i)
    BOOST_TEST_REQUIRE(int(bytes[i]) == int(kGuard), "byte " << i << " past the 1.10 struct was written");
  rvl_device_properties q{};
  q.struct_size = sizeof q;
  ok(api().device_properties(0, &q));
  const char* off = std::getenv("RAVEL_TBB_NO_ROW_CHAIN");
  BOOST_TEST(q.reduce_chain_ops == (off && *off && *off != '0' ? 0u : q.reduce_ops));
}

BOOST_AUTO_TEST_SUITE_END()
