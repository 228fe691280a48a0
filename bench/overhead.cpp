// Per-op overhead: build and realize a tiny add (4 f32 elements) many times, with the kernel
// cache on (every realization after the first is a hit) and off (every one is planned and
// lowered again), and replayed by a ravel::Jit (no graph at all: bind, allocate, launch);
// reports the time per op split into scheduling and execution (ravel::KernelStats). The rounds
// alternate so all three see the same machine state.
//   bench_overhead [iterations]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ravel/ravel.hpp"

struct Result {
  double total = 0, schedule = 0, execute = 0;
  int64_t hits = 0, misses = 0;
};

enum class Mode { CacheOn, CacheOff, Jit };

static Result round_of(const ravel::Tensor& x, int iters, Mode mode, ravel::Jit& jit) {
  ravel::FusionOptions o;
  o.cache_kernels = mode != Mode::CacheOff;
  ravel::set_fusion_options(o);
  ravel::reset_stats();
  auto t0 = std::chrono::steady_clock::now();
  if (mode == Mode::Jit)
    for (int i = 0; i < iters; ++i) jit({x});
  else
    for (int i = 0; i < iters; ++i) (x + x).realize();
  Result r;
  r.total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  auto st = ravel::cumulative_stats();
  r.schedule = st.schedule_seconds / iters;
  r.execute = st.execute_seconds / iters;
  r.hits = st.cache_hits;
  r.misses = st.cache_misses;
  return r;
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  using ravel::Tensor;
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  x.realize();
  ravel::Jit jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + in[0]}; });
  for (int i = 0; i < 100; ++i) (x + x).realize(), jit({x});  // warm-up (and the capture)
  const int rounds = 5;
  std::vector<Result> on, off, replay;
  for (int r = 0; r < rounds; ++r) {
    on.push_back(round_of(x, iters / rounds, Mode::CacheOn, jit));
    off.push_back(round_of(x, iters / rounds, Mode::CacheOff, jit));
    replay.push_back(round_of(x, iters / rounds, Mode::Jit, jit));
  }
  auto report = [&](const char* name, std::vector<Result> v) {
    std::sort(v.begin(), v.end(), [](const Result& a, const Result& b) { return a.total < b.total; });
    const Result& m = v[v.size() / 2];  // the median round
    std::printf("tiny add, kernel cache %-3s: %.2f us per op (schedule %.2f us, execute %.2f us, rest %.2f us)"
                "  [round hits %lld, misses %lld]\n",
                name, m.total * 1e6, m.schedule * 1e6, m.execute * 1e6, (m.total - m.schedule - m.execute) * 1e6,
                static_cast<long long>(m.hits), static_cast<long long>(m.misses));
    return m.total;
  };
  std::printf("%d realizations per setting, %d alternating rounds, median round shown\n", iters, rounds);
  double t_on = report("on", on), t_off = report("off", off);
  std::sort(replay.begin(), replay.end(), [](const Result& a, const Result& b) { return a.total < b.total; });
  const Result& j = replay[replay.size() / 2];
  std::printf("tiny add, Jit replay      : %.2f us per op (execute %.2f us, rest %.2f us)\n", j.total * 1e6,
              j.execute * 1e6, (j.total - j.execute) * 1e6);
  std::printf("per-op time, cache off / cache on: %.2f; cache on / Jit replay: %.2f\n", t_off / t_on, t_on / j.total);
  return 0;
}
