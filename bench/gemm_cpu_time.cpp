// Ravel's f32 matmul against cblas_sgemm (OpenBLAS) in one process, interleaved call by call, for
// GEMM tuning on a machine that others load: by default it times each call in *thread CPU time*
// (CLOCK_THREAD_CPUTIME_ID, which stops while the thread is descheduled), so with both runners
// single-threaded the ratio is the kernels' and blocking's, not the scheduler's. WALL=1 times
// wall clock instead, PCPU=1 process CPU time. Not built by CMake (a developer tool):
//   g++ -O2 -std=c++20 -I core/include -I sdk/include bench/gemm_cpu_time.cpp -o /tmp/gemm_cpu_time \
//       -L build-perf/lib -lravel_core -lopenblas -Wl,-rpath,$PWD/build-perf/lib
//   OPENBLAS_NUM_THREADS=1 RAVEL_TBB_INLINE_WORK=1000000000000 /tmp/gemm_cpu_time M K N TA TB REPS
// (TA/TB = 1: that operand is transposed in memory, as in a backward pass; RAVEL_TBB_INLINE_WORK
// must be written out in digits: it is read with strtoll, so "1e12" would mean 1.)
// Prints medians (ms, GFLOP/s), the ratio OpenBLAS/Ravel (> 1: Ravel faster) and the minima.
#include <cblas.h>
#include <time.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "ravel/ravel.hpp"
using ravel::Tensor;
static double cpu() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static double wall() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char** argv) {
  // args: m k n ta tb reps   (ta/tb: 1 = operand transposed in memory)
  long m = atol(argv[1]), k = atol(argv[2]), n = atol(argv[3]);
  int ta = atoi(argv[4]), tb = atoi(argv[5]), reps = atoi(argv[6]);
  bool use_wall = getenv("WALL") != nullptr;
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (long i = 0; i < m * k; ++i) a[i] = float((i * 37) % 101) / 50.0f - 1.0f;
  for (long i = 0; i < k * n; ++i) b[i] = float((i * 53) % 103) / 51.0f - 1.0f;
  Tensor A = ta ? Tensor::from_vector<float>(a, {k, m}).transpose() : Tensor::from_vector<float>(a, {m, k});
  Tensor B = tb ? Tensor::from_vector<float>(b, {n, k}).transpose() : Tensor::from_vector<float>(b, {k, n});
  A.realize(); B.realize();
  auto rv = [&] { Tensor C = A.matmul(B); C.realize(); };
  auto bl = [&] { cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                              a.data(), ta ? m : k, b.data(), tb ? k : n, 0.0f, c.data(), n); };
  for (int i = 0; i < 3; ++i) { rv(); bl(); }
  std::vector<double> tr, tbl;
  auto pcpu = [] { timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; };
  double (*clk)() = use_wall ? wall : getenv("PCPU") ? +pcpu : cpu;
  for (int r = 0; r < reps; ++r) {
    double t0 = clk(); rv(); double t1 = clk(); bl(); double t2 = clk();
    tr.push_back(t1 - t0); tbl.push_back(t2 - t1);
  }
  std::sort(tr.begin(), tr.end()); std::sort(tbl.begin(), tbl.end());
  double fl = 2.0 * m * n * k;
  printf("%ldx%ldx%ld ta=%d tb=%d: ravel %.3f ms (%.1f GF) openblas %.3f ms (%.1f GF) ratio %.2f  [min: %.3f vs %.3f ms, %.2f]\n", m, k, n, ta, tb,
         tr[reps / 2] * 1e3, fl / tr[reps / 2] * 1e-9, tbl[reps / 2] * 1e3, fl / tbl[reps / 2] * 1e-9, tbl[reps / 2] / tr[reps / 2], tr[0] * 1e3, tbl[0] * 1e3, tbl[0] / tr[0]);
}
