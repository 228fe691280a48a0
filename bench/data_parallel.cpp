// Data parallelism over tbb_cpu devices (docs/sharding.md; docs/performance.md, "Sharded tensors"):
//   - the makemore step (batch 64) and the MLP step (784-512-512-10, batch 256), each a Jit-captured
//     SGD step with the batch split over N devices (1, 2, 4) and the parameters replicated; every
//     N runs in its own process with RAVEL_TBB_DEVICES=N, so the machine's cores are split over
//     the devices and every row uses the same total threads; rounds interleave the device counts;
//   - all_reduce of N parts of S bytes (f32) against one memcpy of S bytes in the same process.
// Measures, never asserts.
//   bench_data_parallel [rounds (3)]
//   bench_data_parallel --child makemore|mlp|allreduce N   (one measurement, printed as "us X")
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Device;
using ravel::DType;
using ravel::Tensor;
namespace nn = ravel::nn;

namespace {

using Clock = std::chrono::steady_clock;

std::vector<Device> mesh_of(int n) {
  std::vector<Device> m;
  for (int i = 0; i < n; ++i) m.emplace_back("tbb_cpu", i);
  return m;
}

// Median microseconds per call of `body` over `reps` calls after `warmup`.
template <class F>
double median_us(int warmup, int reps, F&& body) {
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    body();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One Jit-captured SGD step of `model` on a batch split over the mesh; returns us per step.
template <class Model>
double step_us(Model& model, int n, const Tensor& x, const Tensor& y, int reps) {
  std::vector<Tensor*> params = model.parameters();
  if (n > 1)
    for (Tensor* p : params) p->assign(p->replicate(mesh_of(n)));
  nn::SGD opt(params, 0.05);
  ravel::Jit step(
      [&](const std::vector<Tensor>& in) {
        Tensor loss = nn::cross_entropy(model(in[0]), in[1]);
        opt.zero_grad();
        loss.backward();
        opt.step({loss});
        opt.zero_grad();
        return std::vector<Tensor>{loss};
      },
      params);
  Tensor xs = n > 1 ? x.shard(mesh_of(n), 0) : x, ys = n > 1 ? y.shard(mesh_of(n), 0) : y;
  xs.realize();
  ys.realize();
  return median_us(10, reps, [&] { step({xs, ys})[0].item<float>(); });
}

struct Makemore {
  nn::Embedding emb{27, 10, 1};
  nn::Linear hidden{30, 200, 2}, out{200, 27, 3};
  Tensor operator()(const Tensor& c) const { return out(hidden(emb(c).reshape({c.size(0), 30})).tanh()); }
  std::vector<Tensor*> parameters() { return {&emb.weight, &hidden.weight, &hidden.bias, &out.weight, &out.bias}; }
};

struct Mlp {
  nn::MLP mlp{{784, 512, 512, 10}, nn::Activation::ReLU, 4};
  Tensor operator()(const Tensor& x) const { return mlp(x); }
  std::vector<Tensor*> parameters() { return mlp.parameters(); }
};

Tensor labels(int64_t n, int64_t classes) {
  return (Tensor::rand({n}, 9) * double(classes)).cast(DType::I64).realize();
}

int child(const std::string& what, int n) {
  double us = 0;
  if (what == "makemore") {
    Makemore m;
    us = step_us(m, n, labels(64 * 3, 27).reshape({64, 3}), labels(64, 27), 301);
  } else if (what == "mlp") {
    Mlp m;
    us = step_us(m, n, Tensor::rand({256, 784}, 8).realize(), labels(256, 10), 31);
  } else if (what == "allreduce") {
    // n parts of 16 MiB each (f32), reduced onto every device, against one memcpy of 16 MiB.
    const int64_t elems = 4 << 20;
    Tensor parts = Tensor::rand({n * elems}, 7).shard(mesh_of(n), 0);
    parts.realize();
    const double reduce_us = median_us(2, 9, [&] {
      Tensor r = ravel::all_reduce(parts);
      r.realize();
      for (const Device& d : mesh_of(n)) ravel::synchronize(d);
    });
    std::vector<float> a(static_cast<size_t>(elems), 1.0f), b(static_cast<size_t>(elems));
    const double copy_us = median_us(2, 9, [&] {
      std::memcpy(b.data(), a.data(), a.size() * sizeof(float));
      asm volatile("" : : "r"(b.data()) : "memory");
    });
    std::printf("us %.1f memcpy_us %.1f\n", reduce_us, copy_us);
    return 0;
  }
  std::printf("us %.1f\n", us);
  return 0;
}

// Runs `--child what n` with RAVEL_TBB_DEVICES=n; returns its output line.
std::string run_child(const char* self, const std::string& what, int n) {
  int fd[2];
  if (pipe(fd) != 0) return "";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    setenv("RAVEL_TBB_DEVICES", std::to_string(n).c_str(), 1);
    execl(self, self, "--child", what.c_str(), std::to_string(n).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fd[1]);
  std::string out;
  char buf[256];
  ssize_t k;
  while ((k = read(fd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(k));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc == 4 && std::string(argv[1]) == "--child") return child(argv[2], std::atoi(argv[3]));
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  const std::vector<int> counts = {1, 2, 4};
  std::map<std::string, std::map<int, std::vector<double>>> t;  // workload -> devices -> us per round
  std::map<int, std::vector<double>> allreduce_ratio;
  for (int r = 0; r < rounds; ++r)
    for (int n : counts) {
      for (const char* w : {"makemore", "mlp"}) {
        double us = 0;
        std::sscanf(run_child(argv[0], w, n).c_str(), "us %lf", &us);
        t[w][n].push_back(us);
      }
      if (n > 1) {
        double us = 0, copy = 0;
        std::sscanf(run_child(argv[0], "allreduce", n).c_str(), "us %lf memcpy_us %lf", &us, &copy);
        allreduce_ratio[n].push_back(us > 0 ? copy / us : 0);
      }
    }
  auto spread = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    char s[96];
    std::snprintf(s, sizeof s, "%.2f (%.2f-%.2f)", v[v.size() / 2], v.front(), v.back());
    return std::string(s);
  };
  std::printf("data-parallel steps, us per step (median of %d interleaved rounds, min-max); ratio = N devices / 1 device, same total threads\n", rounds);
  for (const auto& [w, by_n] : t)
    for (int n : counts) {
      std::vector<double> ratio;
      for (size_t r = 0; r < by_n.at(n).size(); ++r) ratio.push_back(by_n.at(n)[r] / by_n.at(1)[r]);
      std::printf("  %-9s %d device(s): %s us, time ratio %s\n", w.c_str(), n, spread(by_n.at(n)).c_str(), spread(ratio).c_str());
    }
  std::printf("all_reduce of N x 16 MiB f32 parts: speed relative to one memcpy of 16 MiB (memcpy time / all_reduce time)\n");
  for (const auto& [n, v] : allreduce_ratio) std::printf("  %d devices: %s\n", n, spread(v).c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_data_parallel: %s\n", e.what());
  return 1;
}
