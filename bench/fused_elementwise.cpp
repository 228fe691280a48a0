// d = exp(a) * b + c over N f32 elements: Ravel (fused, one kernel) against a hand-written
// OpenMP loop doing the same one pass over memory, and (when python3 with torch is available)
// PyTorch's CPU time for torch.exp(a) * b + c, all interleaved round by round in the same run.
// Prints min/median times, effective bandwidth (16 bytes per element: 3 reads + 1 write) and
// throughput ratios; the compiler flags both C++ sides were built with are printed too.
//   bench_fused_elementwise [N] [repetitions] [--no-torch]
// RAVEL_PEER_PYTHON selects the python interpreter (default: /usr/bin/python3, then python3).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "peer_process.hpp"
#include "ravel/ravel.hpp"

#ifndef RAVEL_BENCH_FLAGS
#define RAVEL_BENCH_FLAGS "?"
#endif
#ifndef RAVEL_BENCH_DIR
#define RAVEL_BENCH_DIR "."
#endif

using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int main(int argc, char** argv) {
  std::vector<const char*> pos;
  bool want_torch = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-torch") == 0) want_torch = false;
    else pos.push_back(argv[i]);
  }
  const int64_t n = pos.size() > 0 ? std::atoll(pos[0]) : (int64_t{1} << 24);
  const int reps = pos.size() > 1 ? std::atoi(pos[1]) : 20;
  std::vector<float> a(n), b(n), c(n), d(n);
  for (int64_t i = 0; i < n; ++i) a[i] = std::sin(0.001f * i), b[i] = 0.5f + 0.25f * std::cos(0.002f * i), c[i] = 1.0f / (1 + i % 7);

  PeerProcess torch;
  if (want_torch) {
    const std::string script = std::string(RAVEL_BENCH_DIR) + "/peers/torch_fused.py";
    torch.start(peer_python(), {script, "--serve", std::to_string(n)});
    if (!torch.ok()) std::printf("(PyTorch peer not available: %s)\n", torch.error().c_str());
  }

  using ravel::Tensor;
  Tensor ta = Tensor::from_vector(a, {n}), tb = Tensor::from_vector(b, {n}), tc = Tensor::from_vector(c, {n});
  ravel::realize({ta, tb, tc});
  std::vector<double> t_ravel, t_omp, t_torch;
  double max_err = 0;
  int64_t kernels = 0;
  for (int r = 0; r < reps + 2; ++r) {  // interleaved; the first two rounds are warm-up
    auto t0 = Clock::now();
    Tensor td = ta.exp() * tb + tc;
    td.realize();
    double tr = seconds_since(t0);
    kernels = ravel::last_realization_stats().kernels();
    t0 = Clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = std::exp(a[i]) * b[i] + c[i];
    double to = seconds_since(t0);
    double tt = torch.ok() ? torch.run() : -1;
    if (r == reps + 1) {  // the results agree (relative error, against the OpenMP loop)
      auto got = td.to_vector<float>();
      for (int64_t i = 0; i < n; ++i) max_err = std::max(max_err, std::fabs(double(got[i]) - d[i]) / std::fabs(double(d[i])));
    }
    if (r >= 2) {
      t_ravel.push_back(tr), t_omp.push_back(to);
      if (tt >= 0) t_torch.push_back(tt);
    }
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  auto mn = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  const double bytes = 16.0 * static_cast<double>(n);
  std::printf("d = exp(a) * b + c, %lld f32 elements, %d repetitions, kernels per evaluation: %lld\n",
              static_cast<long long>(n), reps, static_cast<long long>(kernels));
  std::printf("C++ flags (Ravel core, plugin and this loop alike): %s\n", RAVEL_BENCH_FLAGS);
  std::printf("max relative difference ravel vs openmp loop: %.2e\n", max_err);
  std::printf("%-16s %10s %10s %10s\n", "", "min ms", "median ms", "GB/s(med)");
  auto row = [&](const char* name, const std::vector<double>& v) {
    std::printf("%-16s %10.2f %10.2f %10.1f\n", name, mn(v) * 1e3, med(v) * 1e3, bytes / med(v) / 1e9);
  };
  row("ravel", t_ravel);
  row("openmp loop", t_omp);
  if (!t_torch.empty()) row(("pytorch " + torch.info()).c_str(), t_torch);
  std::printf("ravel throughput / openmp throughput (median): %.2f\n", med(t_omp) / med(t_ravel));
  if (!t_torch.empty()) std::printf("ravel throughput / pytorch throughput (median): %.2f\n", med(t_torch) / med(t_ravel));
  return 0;
}
