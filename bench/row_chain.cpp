// Layer norm on a plugin through the C ABI, as the one program of a chain of row reductions
// (ABI 1.11, stages) or as main's two-kernel plan (the sum; then the sum of squared deviations
// with the 1.10 row epilogue, loading the sum), timed in the same process (docs/architecture.md decision 48).
//
//   bench_row_chain PLUGIN.so ROWSxCOLS [reps [chain|two]]
// prints one JSON line per plan, rounds interleaved (chain, two, chain, two, ...), the median,
// min and max per plan, after checking both outputs against a double loop. The core's scheduler
// does not build chains yet, so this is the plugin-level comparison; run it under chrt -f 10.
#include <ravel/backend.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const rvl_backend_api* api = nullptr;

void ok(rvl_error* e, const char* what) {
  if (!e) return;
  std::fprintf(stderr, "%s: %s\n", what, api->error_message(e));
  std::exit(1);
}

rvl_instruction ins(int32_t op, int32_t s0 = -1, int32_t s1 = -1, int32_t arg = 0) {
  rvl_instruction i{};
  i.op = op;
  i.dtype = RVL_DTYPE_F32;
  i.src[0] = s0, i.src[1] = s1, i.src[2] = -1;
  i.arg = arg;
  return i;
}
rvl_instruction cnst(double v) {
  rvl_instruction i = ins(RVL_OP_CONST);
  i.value.f = v;
  return i;
}

rvl_operand operand(rvl_buffer* b, int64_t s0, int64_t s1, int64_t rows, int64_t cols) {
  rvl_operand o{};
  o.struct_size = sizeof o;
  o.buffer = b;
  o.dtype = RVL_DTYPE_F32;
  o.view.struct_size = sizeof o.view;
  o.view.strides[0] = s0, o.view.strides[1] = s1;
  o.view.valid_hi[0] = rows, o.view.valid_hi[1] = cols;
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_row_chain PLUGIN.so ROWSxCOLS [reps]\n");
    return 2;
  }
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) return std::fprintf(stderr, "%s\n", dlerror()), 1;
  api = reinterpret_cast<rvl_backend_entry_fn>(dlsym(h, "rvl_backend_entry"))();
  ok(api->initialize(), "initialize");
  const int64_t rows = std::atol(argv[2]), cols = std::atol(std::strchr(argv[2], 'x') + 1);
  const int reps = argc > 3 ? std::atoi(argv[3]) : 11;
  const double n = double(cols);
  std::vector<float> x(static_cast<size_t>(rows * cols)), g(static_cast<size_t>(cols)), b(static_cast<size_t>(cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(3 * std::sin(0.37 * double(i)) + 0.5);
  for (int64_t j = 0; j < cols; ++j) g[j] = float(1 + 0.1 * std::cos(double(j))), b[j] = float(0.01 * j);
  auto buffer = [&](const void* data, size_t bytes) {
    rvl_buffer* buf = nullptr;
    ok(api->buffer_allocate(0, bytes, &buf), "buffer_allocate");
    if (data) ok(api->buffer_write(nullptr, buf, 0, data, bytes), "buffer_write");
    return buf;
  };
  rvl_buffer *bx = buffer(x.data(), x.size() * 4), *bg = buffer(g.data(), g.size() * 4),
             *bb = buffer(b.data(), b.size() * 4), *by = buffer(nullptr, x.size() * 4),
             *bs = buffer(nullptr, size_t(rows) * 4);
  const rvl_operand X = operand(bx, cols, 1, rows, cols), G = operand(bg, 0, 1, rows, cols),
                    B = operand(bb, 0, 1, rows, cols), Y = operand(by, cols, 1, rows, cols),
                    S = operand(bs, 1, 0, rows, cols);
  // (x - ACC(k) / n) at instructions [at, at + 6); ACC k, or LOAD `sum_input` when k < 0.
  auto centred = [&](std::vector<rvl_instruction>& c, int32_t k, int32_t sum_input) {
    const int32_t at = int32_t(c.size());
    c.push_back(ins(RVL_OP_LOAD, -1, -1, 0));
    c.push_back(k >= 0 ? ins(RVL_OP_ACC, -1, -1, k) : ins(RVL_OP_LOAD, -1, -1, sum_input));
    c.push_back(cnst(1.0 / n));
    c.push_back(ins(RVL_OP_MUL, at + 1, at + 2));
    c.push_back(ins(RVL_OP_NEG, at + 3));
    c.push_back(ins(RVL_OP_ADD, at, at + 4));
    return at + 5;
  };
  // The epilogue: (x - mean) * rsqrt(ACC0 / n + eps) * g + b; the sum from ACC 1 or input 3.
  auto epilogue = [&](bool chain) {
    std::vector<rvl_instruction> e;
    const int32_t d = centred(e, chain ? 1 : -1, 3);
    const int32_t a = int32_t(e.size());
    e.push_back(ins(RVL_OP_ACC, -1, -1, 0));
    e.push_back(cnst(1.0 / n));
    e.push_back(ins(RVL_OP_MUL, a, a + 1));
    e.push_back(cnst(1e-5));
    e.push_back(ins(RVL_OP_ADD, a + 2, a + 3));
    e.push_back(ins(RVL_OP_SQRT, a + 4));
    e.push_back(ins(RVL_OP_RECIP, a + 5));
    e.push_back(ins(RVL_OP_MUL, d, a + 6));
    e.push_back(ins(RVL_OP_LOAD, -1, -1, 1));
    e.push_back(ins(RVL_OP_MUL, a + 7, a + 8));
    e.push_back(ins(RVL_OP_LOAD, -1, -1, 2));
    e.push_back(ins(RVL_OP_ADD, a + 9, a + 10));
    return e;
  };
  auto squares = [&](bool chain) {
    std::vector<rvl_instruction> c;
    const int32_t d = centred(c, chain ? 1 : -1, 3);
    c.push_back(ins(RVL_OP_MUL, d, d));
    return c;
  };
  auto program = [&](const std::vector<rvl_operand>& in, const std::vector<rvl_instruction>& code,
                     const rvl_operand& out) {
    rvl_program p{};
    p.struct_size = sizeof p;
    p.rank = 2;
    p.shape[0] = rows, p.shape[1] = cols;
    p.n_inputs = int32_t(in.size());
    p.inputs = in.data();
    p.n_instructions = int32_t(code.size());
    p.instructions = code.data();
    p.reduce_op = RVL_REDUCE_SUM;
    p.reduce_axes = 2u;
    p.output = out;
    return p;
  };
  // The chain: stage 0 sums x; the program sums squared deviations; the epilogue normalises.
  const std::vector<rvl_operand> in3 = {X, G, B}, in4 = {X, G, B, S};
  const std::vector<rvl_instruction> load_x = {ins(RVL_OP_LOAD, -1, -1, 0)};
  const rvl_reduce_stage stage = {sizeof(rvl_reduce_stage), RVL_REDUCE_SUM, RVL_DTYPE_F32, 1, load_x.data()};
  const std::vector<rvl_instruction> sq_chain = squares(true), epi_chain = epilogue(true);
  rvl_program chain = program(in3, sq_chain, Y);
  chain.n_epilogue = int32_t(epi_chain.size());
  chain.epilogue = epi_chain.data();
  chain.acc_dtype = RVL_DTYPE_F32;
  chain.n_stages = 1;
  chain.stages = &stage;
  // Main's plan: the sum into S, then the squares with the epilogue, both reading S.
  const rvl_program sum = program({X}, load_x, operand(bs, 1, 0, rows, cols));
  const std::vector<rvl_instruction> sq_two = squares(false), epi_two = epilogue(false);
  rvl_program second = program(in4, sq_two, Y);
  second.n_epilogue = int32_t(epi_two.size());
  second.epilogue = epi_two.data();
  second.acc_dtype = RVL_DTYPE_F32;
  std::vector<rvl_operand> sum_in = {X};
  rvl_program first = sum;
  first.inputs = sum_in.data();

  auto run = [&](bool use_chain) {
    if (use_chain) ok(api->execute_program(0, nullptr, &chain), "chain");
    else ok(api->execute_program(0, nullptr, &first), "sum"), ok(api->execute_program(0, nullptr, &second), "second");
    ok(api->synchronize(0), "synchronize");
  };
  auto check = [&](const char* what) {
    std::vector<float> y(x.size());
    ok(api->buffer_read(nullptr, by, 0, y.data(), y.size() * 4), "buffer_read");
    for (int64_t r = 0; r < rows; r += 7) {
      double s = 0, q = 0;
      for (int64_t j = 0; j < cols; ++j) s += x[size_t(r * cols + j)];
      const double mean = s / n;
      for (int64_t j = 0; j < cols; ++j) q += (x[size_t(r * cols + j)] - mean) * (x[size_t(r * cols + j)] - mean);
      const double rstd = 1 / std::sqrt(q / n + 1e-5);
      for (int64_t j = 0; j < cols; ++j) {
        const double want = (x[size_t(r * cols + j)] - mean) * rstd * g[j] + b[j];
        if (std::abs(y[size_t(r * cols + j)] - want) > 1e-4 * (1 + std::abs(want))) {
          std::fprintf(stderr, "%s: row %ld col %ld: %g, expected %g\n", what, long(r), long(j), y[size_t(r * cols + j)], want);
          std::exit(1);
        }
      }
    }
  };
  run(true), check("chain");
  ok(api->buffer_write(nullptr, by, 0, x.data(), x.size() * 4), "reset");
  run(false), check("two kernels");
  // argv[4] "chain" or "two": time that plan alone (for a profiler).
  const std::string only = argc > 4 ? argv[4] : "";
  for (int w = 0; w < 2; ++w) run(true), run(false);
  std::vector<double> t[2];
  for (int i = 0; i < reps; ++i)
    for (int k = 0; k < 2; ++k) {
      if ((only == "chain" && k == 1) || (only == "two" && k == 0)) continue;
      const auto t0 = std::chrono::steady_clock::now();
      run(k == 0);
      t[k].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  for (int k = 0; k < 2; ++k)
    if (!t[k].empty())
    std::printf("{\"plan\": \"%s\", \"size\": [%ld, %ld], \"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, \"reps\": %d}\n",
                k == 0 ? "chain (ABI 1.11, one kernel)" : "two kernels (sum; squares + 1.10 epilogue)", long(rows),
                long(cols), median(t[k]), *std::min_element(t[k].begin(), t[k].end()),
                *std::max_element(t[k].begin(), t[k].end()), reps);
  return 0;
}
