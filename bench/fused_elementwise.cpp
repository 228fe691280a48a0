// d = exp(a) * b + c over N f32 elements: Ravel (fused, one kernel) against a hand-written
// OpenMP loop doing the same one pass over memory, in the same run. Prints min/median times,
// effective bandwidth (16 bytes per element: 3 reads + 1 write) and the ratio.
//   bench_fused_elementwise [N] [repetitions]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ravel/ravel.hpp"

using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t{1} << 24);
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  std::vector<float> a(n), b(n), c(n), d(n);
  for (int64_t i = 0; i < n; ++i) a[i] = std::sin(0.001f * i), b[i] = 0.5f + 0.25f * std::cos(0.002f * i), c[i] = 1.0f / (1 + i % 7);

  using ravel::Tensor;
  Tensor ta = Tensor::from_vector(a, {n}), tb = Tensor::from_vector(b, {n}), tc = Tensor::from_vector(c, {n});
  ravel::realize({ta, tb, tc});
  std::vector<double> t_ravel, t_omp;
  for (int r = 0; r < reps + 2; ++r) {  // interleaved; the first two rounds are warm-up
    auto t0 = Clock::now();
    Tensor td = ta.exp() * tb + tc;
    td.realize();
    double tr = seconds_since(t0);
    t0 = Clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = std::exp(a[i]) * b[i] + c[i];
    double to = seconds_since(t0);
    if (r >= 2) t_ravel.push_back(tr), t_omp.push_back(to);
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  auto mn = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  const double bytes = 16.0 * static_cast<double>(n);
  std::printf("d = exp(a) * b + c, %lld f32 elements, %d repetitions, kernels per evaluation: %lld\n",
              static_cast<long long>(n), reps, static_cast<long long>(ravel::last_realization_stats().kernels()));
  std::printf("%-16s %10s %10s %10s\n", "", "min ms", "median ms", "GB/s(med)");
  std::printf("%-16s %10.2f %10.2f %10.1f\n", "ravel", mn(t_ravel) * 1e3, med(t_ravel) * 1e3, bytes / med(t_ravel) / 1e9);
  std::printf("%-16s %10.2f %10.2f %10.1f\n", "openmp loop", mn(t_omp) * 1e3, med(t_omp) * 1e3, bytes / med(t_omp) / 1e9);
  std::printf("ravel throughput / openmp throughput (median): %.2f\n", med(t_omp) / med(t_ravel));
  return 0;
}
