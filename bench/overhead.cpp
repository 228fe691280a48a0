// Per-op overhead: build and realize a tiny add (4 f32 elements) many times; reports the time
// per realized op split into scheduling and execution (ravel::KernelStats).
//   bench_overhead [iterations]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ravel/ravel.hpp"

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  using ravel::Tensor;
  Tensor a = Tensor::ones({4}), b = Tensor::full({4}, 2.0);
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  x.realize();
  for (int i = 0; i < 100; ++i) (x + x).realize();  // warm-up
  ravel::reset_stats();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) (x + x).realize();
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto st = ravel::cumulative_stats();
  std::printf("tiny add, %d realizations: %.2f us per op (schedule %.2f us, execute %.2f us, rest %.2f us)\n", iters,
              total / iters * 1e6, st.schedule_seconds / iters * 1e6, st.execute_seconds / iters * 1e6,
              (total - st.schedule_seconds - st.execute_seconds) / iters * 1e6);
  return 0;
}
