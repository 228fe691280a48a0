// The oneTBB plugin's dispatch decisions under other thread counts (so that scaling to more
// cores is covered on a 2-core machine): whether a kernel runs inline (Note [Inline small kernels]) and how it is split (chunks
// of outputs per thread, a deterministic reduce over the reduced range, tiles of a permuting
// copy) depend on tbb::this_task_arena::max_concurrency(). With one device the plugin runs a
// synchronous kernel in the caller's arena, so running it inside arenas of 1, 3, 16 and 64
// threads (tbb::global_control raising the worker limit to match) on a 2-core machine drives
// every branch a 16- or 64-core machine takes, with really oversubscribed workers. Each result is checked against a naive double loop written here;
// nothing is timed.
#include "common.hpp"

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace abitest;

namespace {

float dispatch_input(int64_t i) {  // deterministic values in [-1, 1)
  uint64_t x = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  x ^= x >> 29, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 32;
  return static_cast<float>(x >> 40) / static_cast<float>(1 << 23) - 1.0f;
}

HostBuf dispatch_host(const std::vector<float>& v) {
  HostBuf h;
  h.dtype = RVL_DTYPE_F32;
  h.bytes.resize(v.size() * sizeof(float));
  std::memcpy(h.bytes.data(), v.data(), h.bytes.size());
  return h;
}

// Runs `code` over `shape` (row-major output of out_n floats, contiguous over the kept axes) on
// the plugin inside an arena of `threads` threads.
std::vector<float> dispatch_run(int threads, const std::vector<int64_t>& shape, const std::vector<std::vector<float>>& ins,
                                const std::vector<rvl_view>& views, const std::vector<rvl_instruction>& code,
                                int32_t reduce_op, uint32_t reduce_axes, int64_t out_n, const rvl_view& out_view) {
  std::vector<std::unique_ptr<DevBuf>> bufs;
  std::vector<rvl_operand> ops;
  for (size_t i = 0; i < ins.size(); ++i) {
    bufs.push_back(std::make_unique<DevBuf>(dispatch_host(ins[i])));
    ops.push_back(operand(bufs.back()->get(), RVL_DTYPE_F32, views[i]));
  }
  DevBuf dout(dispatch_host(std::vector<float>(out_n, -7.0f)));
  rvl_program p{};
  p.struct_size = sizeof(rvl_program);
  p.rank = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) p.shape[d] = shape[d];
  p.n_inputs = static_cast<int32_t>(ops.size());
  p.inputs = ops.data();
  p.n_instructions = static_cast<int32_t>(code.size());
  p.instructions = code.data();
  p.reduce_op = reduce_op;
  p.reduce_axes = reduce_axes;
  p.output = operand(dout.get(), RVL_DTYPE_F32, out_view);
  rvl_error* err = nullptr;
  // global_control lifts oneTBB's worker limit (the core count) so the arena really gets its
  // threads: oversubscribed, not only reported as available.
  tbb::global_control workers(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
  tbb::task_arena arena(threads);
  arena.execute([&] { err = api().execute_program(0, nullptr, &p); });
  ok(err, "execute_program in an arena of " + std::to_string(threads) + " threads");
  const HostBuf got = dout.read(RVL_DTYPE_F32);
  std::vector<float> out(out_n);
  std::memcpy(out.data(), got.bytes.data(), out.size() * sizeof(float));
  return out;
}

std::vector<float> dispatch_values(int64_t n, int64_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = dispatch_input(seed * 1000003 + i);
  return v;
}

// Sum of x over axis `axis` of the row-major [rows, cols] matrix, checked against a double loop
// (tolerance relative to the sum of magnitudes); NaN and infinity must come out as in the loop.
void check_sum(int threads, int64_t rows, int64_t cols, int axis, std::vector<float> x) {
  const std::string ctx = "sum over axis " + std::to_string(axis) + " of " + std::to_string(rows) + "x" +
                          std::to_string(cols) + " with " + std::to_string(threads) + " threads";
  const int64_t outs = axis == 0 ? cols : rows, len = axis == 0 ? rows : cols;
  const int64_t sh[2] = {rows, cols};
  // The output walks the kept axis densely and has stride 0 on the reduced one (the ABI's rule).
  const rvl_view ov = make_view(2, {rows, cols}, {axis == 0 ? 0 : 1, axis == 0 ? 1 : 0});
  const std::vector<float> got = dispatch_run(threads, {rows, cols}, {x}, {contiguous(2, sh)}, {load(RVL_DTYPE_F32, 0)},
                                              RVL_REDUCE_SUM, 1u << axis, outs, ov);
  int64_t bad = 0;
  std::string first;
  for (int64_t o = 0; o < outs; ++o) {
    double s = 0, mag = 0;
    for (int64_t i = 0; i < len; ++i) {
      const double v = axis == 0 ? x[i * cols + o] : x[o * cols + i];
      s += v, mag += std::abs(v);
    }
    const double g = got[o];
    const bool same = std::isnan(s) ? std::isnan(g) : std::isinf(s) ? g == s : std::abs(g - s) <= 1e-5 * mag + 1e-6;
    if (!same && bad++ == 0) first = "output " + std::to_string(o) + ": " + std::to_string(g) + " vs " + std::to_string(s);
  }
  BOOST_TEST(bad == 0, ctx << ": " << bad << " outputs differ; " << first);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tbb_dispatch_under_thread_counts)

BOOST_AUTO_TEST_CASE(reductions_split_every_way_match_the_double_loop) {
  for (int threads : {1, 3, 16, 64}) {
    // Outer axis with many outputs (chunks of outputs per thread; parallel above the inline
    // threshold), with few outputs (a deterministic reduce over rows), and a small inline one.
    std::vector<float> x = dispatch_values(600 * 1000, 1);  // work 600k > the inline threshold, 2^19
    x[5 * 1000 + 17] = std::numeric_limits<float>::quiet_NaN();  // column 17: NaN
    x[9 * 1000 + 40] = std::numeric_limits<float>::infinity();   // column 40: +inf
    check_sum(threads, 600, 1000, 0, x);
    check_sum(threads, 6001, 100, 0, dispatch_values(6001 * 100, 2));
    check_sum(threads, 37, 53, 0, dispatch_values(37 * 53, 3));
    // Inner axis: many outputs, and few long ones (each split over the threads).
    std::vector<float> y = dispatch_values(800 * 700, 4);
    y[3 * 700 + 11] = std::numeric_limits<float>::quiet_NaN();  // row 3: NaN
    y[8 * 700 + 2] = -std::numeric_limits<float>::infinity();   // row 8: -inf
    check_sum(threads, 800, 700, 1, y);
    check_sum(threads, 30, 20011, 1, dispatch_values(30 * 20011, 5));
  }
}

BOOST_AUTO_TEST_CASE(elementwise_and_permuting_copies_match_the_loop) {
  for (int threads : {1, 3, 16, 64}) {
    const std::string ctx = " with " + std::to_string(threads) + " threads";
    // a * b + c over 120,037 elements (5 instructions: parallel blocks) and 1,001 (inline).
    for (int64_t n : {int64_t{120037}, int64_t{1001}}) {
      const std::vector<float> a = dispatch_values(n, 6), b = dispatch_values(n, 7), c = dispatch_values(n, 8);
      const int64_t sh[1] = {n};
      const rvl_view v = contiguous(1, sh);
      const std::vector<float> got =
          dispatch_run(threads, {n}, {a, b, c}, {v, v, v},
                       {load(RVL_DTYPE_F32, 0), load(RVL_DTYPE_F32, 1), ins(RVL_OP_MUL, RVL_DTYPE_F32, 0, 1),
                        load(RVL_DTYPE_F32, 2), ins(RVL_OP_ADD, RVL_DTYPE_F32, 2, 3)},
                       RVL_REDUCE_NONE, 0, n, v);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i)
        bad += std::abs(got[i] - (double(a[i]) * b[i] + c[i])) > 1e-6 ? 1 : 0;
      BOOST_TEST(bad == 0, "a * b + c of " << n << ctx << ": " << bad << " differ");
    }
    // Transposes: 800 x 701 (parallel tiles) and 70 x 90 (inline), exact.
    for (auto [r, cl] : {std::pair<int64_t, int64_t>{800, 701}, {70, 90}}) {
      const std::vector<float> src = dispatch_values(r * cl, 9);
      const int64_t sh[2] = {r, cl};
      const std::vector<float> got = dispatch_run(threads, {r, cl}, {src}, {make_view(2, {r, cl}, {1, r})},
                                                  {load(RVL_DTYPE_F32, 0)}, RVL_REDUCE_NONE, 0, r * cl, contiguous(2, sh));
      int64_t bad = 0;
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < cl; ++j) bad += got[i * cl + j] != src[j * r + i] ? 1 : 0;
      BOOST_TEST(bad == 0, "transpose " << r << "x" << cl << ctx << ": " << bad << " differ");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
