// Data parallelism over tbb_cpu devices (docs/sharding.md; docs/performance.md, "Sharded tensors"):
//   - the makemore step (batch 64) and the MLP step (784-512-512-10, batch 256), each a Jit-captured
//     SGD step with the batch split over N devices (1, 2, 4) and the parameters replicated; every
//     N runs in its own process with RAVEL_TBB_DEVICES=N, so the machine's cores are split over
//     the devices and every row uses the same total threads; rounds interleave the device counts;
//   - all_reduce of N parts of S bytes (f32) against one memcpy of S bytes in the same process.
// Measures, never asserts.
//   bench_data_parallel [rounds (3)]
//   bench_data_parallel --child makemore|mlp|allreduce N   (one measurement, printed as "us X")
//   bench_data_parallel --collectives [rounds (5)]
//       reduce_scatter and all_gather of 2 x 16 MiB f32 parts, the plugin's members (ABI 1.12)
//       against the composition (RAVEL_PLUGIN_COLLECTIVES=1 / 0, alternated in one process) and
//       one memcpy of 16 MiB; one child process per round (RAVEL_TBB_DEVICES=2)
//   bench_data_parallel --peer N|memcpy --workload W --size S --warmup W --reps R
//       a ravel-bench peer (docs/bench.md, "Peers"; configs/bench/data-parallel.json): W is
//       makemore or mlp (S = the global batch) or all_reduce (S = f32 elements per device), run
//       in a child process with RAVEL_TBB_DEVICES=N; "memcpy" times one memcpy of the bytes an
//       all_reduce reduces per device (4 S), the limit the all_reduce row is compared with.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>
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

// Microseconds per call of `body` over `reps` calls after `warmup`, sorted.
template <class F>
std::vector<double> times_us(int warmup, int reps, F&& body) {
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    body();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t;
}

template <class F>
double median_us(int warmup, int reps, F&& body) {
  const std::vector<double> t = times_us(warmup, reps, body);
  return t[t.size() / 2];
}

// The protocol's result line for times `t` (us, sorted).
void print_result(const std::string& workload, int64_t size, const std::vector<double>& t, const std::string& threads) {
  std::printf("{\"workload\": \"%s\", \"size\": [%lld], \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, "
              "\"reps\": %zu, \"checked\": false, \"threads\": \"%s\"}\n",
              workload.c_str(), static_cast<long long>(size), t[t.size() / 2] / 1e3, t.front() / 1e3, t.back() / 1e3,
              t.size(), threads.c_str());
}

// One Jit-captured SGD step of `model` on a batch split over the mesh; returns us per step.
template <class Model>
std::vector<double> step_times(Model& model, int n, const Tensor& x, const Tensor& y, int warmup, int reps) {
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
  return times_us(warmup, reps, [&] { step({xs, ys})[0].item<float>(); });
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

// The all_reduce of n parts of `elems` f32 elements each (one per device), replicated on every
// device; times in us.
std::vector<double> all_reduce_times(int n, int64_t elems, int warmup, int reps) {
  Tensor parts = Tensor::rand({n * elems}, 7).shard(mesh_of(n), 0);
  parts.realize();
  return times_us(warmup, reps, [&] {
    Tensor r = ravel::all_reduce(parts);
    r.realize();
    for (const Device& d : mesh_of(n)) ravel::synchronize(d);
  });
}

std::vector<double> memcpy_times(int64_t elems, int warmup, int reps) {
  std::vector<float> a(static_cast<size_t>(elems), 1.0f), b(static_cast<size_t>(elems));
  return times_us(warmup, reps, [&] {
    std::memcpy(b.data(), a.data(), a.size() * sizeof(float));
    asm volatile("" : : "r"(b.data()) : "memory");
  });
}

// reduce_scatter and all_gather over n devices, each part 16 MiB of f32, the plugin's path and
// the composition alternated rep by rep, and memcpy of 16 MiB: "name us" pairs of medians.
int collectives_child(int n) {
  constexpr int64_t elems = 4 << 20;
  Tensor parts = Tensor::rand({n * elems}, 7).shard(mesh_of(n), 0);
  parts.realize();
  auto run = [&](const char* setting, bool scatter) {
    setenv("RAVEL_PLUGIN_COLLECTIVES", setting, 1);
    const auto t0 = Clock::now();
    Tensor r = scatter ? ravel::reduce_scatter(parts) : ravel::all_gather(parts);
    r.realize();
    for (const Device& d : mesh_of(n)) ravel::synchronize(d);
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  std::map<std::string, std::vector<double>> t;
  // memcpy's buffers live across reps, touched before the first (no page faults in its times).
  std::vector<float> src(static_cast<size_t>(elems), 1.0f), dst(static_cast<size_t>(elems), 0.0f);
  for (int rep = 0; rep < 11; ++rep) {
    const bool warm = rep < 2;
    for (bool scatter : {true, false})
      for (const char* setting : {"1", "0"}) {
        const double us = run(setting, scatter);
        if (!warm) t[std::string(scatter ? "rs_" : "ag_") + (setting[0] == '1' ? "plugin" : "composed")].push_back(us);
      }
    // The devices' worker threads spin a while after their work; on 2 cores a memcpy right after
    // a collective shares its core with them (2.4-2.6 ms against 1.2 alone): let them sleep.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
    asm volatile("" : : "r"(dst.data()) : "memory");
    if (!warm) t["memcpy"].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  // And back to back, as the all_reduce row times it: its 32 MiB then stay in this VM's large
  // L3 (480 MiB here) between reps, and it runs about twice as fast as interleaved.
  t["memcpy_b2b"] = memcpy_times(elems, 2, 9);
  for (auto& [name, v] : t) {
    std::sort(v.begin(), v.end());
    std::printf("%s %.1f ", name.c_str(), v[v.size() / 2]);
  }
  std::printf("\n");
  return 0;
}

// One measurement in this process (RAVEL_TBB_DEVICES=n set by the parent): the times in us.
std::vector<double> measure(const std::string& what, int n, int64_t size, int warmup, int reps) {
  if (what == "makemore") {
    Makemore m;
    return step_times(m, n, labels(size * 3, 27).reshape({size, 3}), labels(size, 27), warmup, reps);
  }
  if (what == "mlp") {
    Mlp m;
    return step_times(m, n, Tensor::rand({size, 784}, 8).realize(), labels(size, 10), warmup, reps);
  }
  if (what == "all_reduce") return all_reduce_times(n, size, warmup, reps);
  throw ravel::ValueError("bench_data_parallel: unknown workload " + what);
}

int child(const std::string& what, int n) {
  if (what == "allreduce") {  // n parts of 16 MiB each (f32), against one memcpy of 16 MiB
    const std::vector<double> r = all_reduce_times(n, 4 << 20, 2, 9), c = memcpy_times(4 << 20, 2, 9);
    std::printf("us %.1f memcpy_us %.1f\n", r[r.size() / 2], c[c.size() / 2]);
    return 0;
  }
  const std::vector<double> t = measure(what, n, what == "mlp" ? 256 : 64, 10, what == "mlp" ? 31 : 301);
  const double steps = 10 + (what == "mlp" ? 31 : 301);
  std::printf("us %.1f kernels_per_step %.1f\n", t[t.size() / 2], double(ravel::cumulative_stats().kernels()) / steps);
  return 0;
}

// Runs this program with `args` and RAVEL_TBB_DEVICES=n; returns its standard output.
std::string run_child(const char* self, const std::vector<std::string>& args, int n) {
  int fd[2];
  if (pipe(fd) != 0) return "";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    setenv("RAVEL_TBB_DEVICES", std::to_string(n).c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(self)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(self, argv.data());
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

std::string run_child(const char* self, const std::string& what, int n) {
  return run_child(self, {"--child", what, std::to_string(n)}, n);
}

// ravel-bench's peer protocol (docs/bench.md, "Peers"):
//   --peer N|memcpy --workload W --size S --warmup W --reps R
int peer(const char* self, int argc, char** argv) {
  std::map<std::string, std::string> a;
  for (int i = 1; i + 1 < argc; i += 2) a[argv[i]] = argv[i + 1];
  const std::string who = a["--peer"], workload = a["--workload"];
  const int64_t size = std::atoll(a["--size"].c_str());  // one number: "64", or "4194304"
  const int warmup = std::max(0, std::atoi(a["--warmup"].c_str())), reps = std::max(1, std::atoi(a["--reps"].c_str()));
  auto unavailable = [&](const std::string& why) {
    std::printf("{\"workload\": \"%s\", \"size\": [%lld], \"unavailable\": \"%s\"}\n", workload.c_str(),
                static_cast<long long>(size), why.c_str());
    return 0;
  };
  if (size <= 0) return unavailable("the size must be one positive number");
  if (who == "memcpy") {
    if (workload != "all_reduce") return unavailable("the memcpy peer times all_reduce's bytes only");
    print_result(workload, size, memcpy_times(size, warmup, reps), "1 (glibc memcpy)");
    return 0;
  }
  const int n = std::atoi(who.c_str());
  if (n < 1 || n > 64) return unavailable("--peer expects a device count from 1 to 64 or memcpy, got " + who);
  if (workload != "makemore" && workload != "mlp" && workload != "all_reduce")
    return unavailable("data-parallel peers run makemore, mlp and all_reduce");
  if (workload == "all_reduce" && n < 2) return unavailable("an all_reduce needs 2 or more devices");
  std::fputs(run_child(self, {"--measure", workload, std::to_string(n), std::to_string(size), std::to_string(warmup),
                              std::to_string(reps)}, n).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc == 4 && std::string(argv[1]) == "--child") return child(argv[2], std::atoi(argv[3]));
  if (argc == 7 && std::string(argv[1]) == "--measure") {  // a peer's child (RAVEL_TBB_DEVICES set)
    const int n = std::atoi(argv[3]);
    const int64_t size = std::atoll(argv[4]);
    print_result(argv[2], size, measure(argv[2], n, size, std::atoi(argv[5]), std::atoi(argv[6])),
                 "RAVEL_TBB_DEVICES=" + std::to_string(n) + " (the cores split over the devices)");
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--peer") return peer(argv[0], argc, argv);
  if (argc == 3 && std::string(argv[1]) == "--collectives-child") return collectives_child(std::atoi(argv[2]));
  if (argc >= 2 && std::string(argv[1]) == "--collectives") {
    // Ratios per round (memcpy time / collective time, both in the same child), then medians.
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
    std::map<std::string, std::vector<double>> ratio, us;
    for (int r = 0; r < rounds; ++r) {
      std::map<std::string, double> m;
      std::istringstream in(run_child(argv[0], std::vector<std::string>{"--collectives-child", "2"}, 2));
      std::string name;
      double v = 0;
      while (in >> name >> v) m[name] = v;
      for (const auto& [k, x] : m) {
        us[k].push_back(x);
        if (k.rfind("memcpy", 0) != 0 && x > 0) {
          ratio[k].push_back(m["memcpy"] / x);
          ratio[k + " b2b"].push_back(m["memcpy_b2b"] / x);
        }
      }
    }
    auto med = [](std::vector<double> v, const char* fmt) {
      std::sort(v.begin(), v.end());
      char s[96];
      std::snprintf(s, sizeof s, fmt, v[v.size() / 2], v.front(), v.back());
      return std::string(s);
    };
    std::printf("2 devices, 16 MiB f32 per input part; medians of %d rounds (min-max); ratio = memcpy(16 MiB) time / time,\n"
                "against memcpy interleaved with the collectives and memcpy back to back (b2b)\n", rounds);
    for (const auto& [k, v] : us)
      std::printf("  %-12s %s us%s%s\n", k.c_str(), med(v, "%.0f (%.0f-%.0f)").c_str(),
                  ratio.count(k) ? (", ratio " + med(ratio[k], "%.2f (%.2f-%.2f)")).c_str() : "",
                  ratio.count(k + " b2b") ? (", b2b " + med(ratio[k + " b2b"], "%.2f (%.2f-%.2f)")).c_str() : "");
    return 0;
  }
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
