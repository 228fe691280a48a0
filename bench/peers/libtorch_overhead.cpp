// libtorch peer for bench_overhead: per-op overhead of a tiny eager add (4 f32 elements) from C++,
// and of the MLP forward + backward + SGD step bench_training_step runs (784-512-512-10, batch
// 256), under torch::NoGradGuard for the update. Built only when libtorch is found.
//   bench_libtorch_overhead [iterations] [training steps]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;
static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  torch::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  torch::Tensor x = torch::tensor({1.f, 2.f, 3.f, 4.f});
  for (int i = 0; i < 100; ++i) (void)torch::add(x, x);
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) (void)torch::add(x, x);
  std::printf("libtorch tiny add, %d ops: %.2f us per op (threads %d)\n", iters, since(t0) / iters * 1e6,
              torch::get_num_threads());

  torch::manual_seed(0);
  auto w1 = (torch::randn({784, 512}) * 0.05).requires_grad_(), b1 = torch::zeros({512}).requires_grad_();
  auto w2 = (torch::randn({512, 512}) * 0.05).requires_grad_(), b2 = torch::zeros({512}).requires_grad_();
  auto w3 = (torch::randn({512, 10}) * 0.05).requires_grad_(), b3 = torch::zeros({10}).requires_grad_();
  auto xb = torch::randn({256, 784});
  auto yb = torch::randint(0, 10, {256});
  std::vector<double> t;
  for (int s = 0; s < steps + 2; ++s) {
    t0 = Clock::now();
    auto h1 = torch::relu(torch::matmul(xb, w1) + b1);
    auto h2 = torch::relu(torch::matmul(h1, w2) + b2);
    auto loss = torch::nll_loss(torch::log_softmax(torch::matmul(h2, w3) + b3, 1), yb);
    loss.backward();
    {
      torch::NoGradGuard ng;
      for (auto* p : {&w1, &b1, &w2, &b2, &w3, &b3}) p->sub_(p->grad() * 0.01), p->grad().zero_();
    }
    if (s >= 2) t.push_back(since(t0));
  }
  std::sort(t.begin(), t.end());
  std::printf("libtorch MLP training step 784-512-512-10 batch 256: median %.3f ms, min %.3f ms (%d steps)\n",
              t[t.size() / 2] * 1e3, t[0] * 1e3, steps);
  return 0;
}
