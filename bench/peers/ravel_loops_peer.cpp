// Hand-written loop peer for ravel-bench (docs/bench.md, "Peers"): the loops a performance-aware
// C++ programmer writes by hand with OpenMP, so that "Ravel >= 0.9x the hand loop" is measured in
// the same ravel-bench run as Ravel itself. Built with the same flags as Ravel (the build type's,
// no -march, no -ffast-math) plus -fopenmp; std::exp as a user would call it.
//   ravel-peer-loops --workload NAME --size AxB --warmup W --reps R
// Workloads: elementwise (d = exp(a) * b + c), softmax (rows: max, exp and sum, scale; a row
// stays in cache between its passes), sum_axis0 (rows streamed into a vector of column sums),
// sum_axis1 (a vectorised dot-like sum per row), transpose (32 x 32 blocks). Others: unavailable.
// Threads: OpenMP's (ravel-bench sets OMP_NUM_THREADS to every core and OMP_WAIT_POLICY=passive);
// the settings in effect are printed in the result line ("threads").
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

float uniform(uint64_t i) {  // deterministic inputs in [-1, 1)
  uint64_t x = i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  x ^= x >> 29, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 32;
  return static_cast<float>(x >> 40) / static_cast<float>(1 << 23) - 1.0f;
}

std::vector<float> filled(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uniform(seed * 0x100000000ull + i);
  return v;
}

std::string env_or(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}

bool close(double got, double want, double tol) { return std::abs(got - want) <= tol * (1 + std::abs(want)); }

}  // namespace

int main(int argc, char** argv) {
  std::string workload, size;
  int warmup = 1, reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--workload")) workload = argv[i + 1];
    else if (!std::strcmp(argv[i], "--size")) size = argv[i + 1];
    else if (!std::strcmp(argv[i], "--warmup")) warmup = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  std::vector<long> dims;
  for (size_t p = 0; p < size.size();) {
    size_t q = size.find('x', p);
    dims.push_back(std::atol(size.substr(p, q - p).c_str()));
    p = q == std::string::npos ? size.size() : q + 1;
  }
  std::string size_json;
  for (long d : dims) size_json += (size_json.empty() ? "" : ",") + std::to_string(d);
  const std::string threads = "OpenMP " + std::to_string(omp_get_max_threads()) + " threads, OMP_WAIT_POLICY=" +
                              env_or("OMP_WAIT_POLICY", "(unset)");
  auto unavailable = [&](const char* why) {
    std::printf("{\"workload\": \"%s\", \"size\": [%s], \"unavailable\": \"%s\"}\n", workload.c_str(),
                size_json.c_str(), why);
    return 0;
  };

  std::function<void()> run;
  std::function<bool()> check;  // after one run: the result against a naive double computation
  std::vector<float> a, b, c, d;
  if (workload == "elementwise" && dims.size() == 1) {
    const long n = dims[0];
    a = filled(n, 1), b = filled(n, 2), c = filled(n, 3), d.assign(n, 0);
    run = [&, n] {
      const float *x = a.data(), *y = b.data(), *z = c.data();
      float* out = d.data();
#pragma omp parallel for simd schedule(static)
      for (long i = 0; i < n; ++i) out[i] = std::exp(x[i]) * y[i] + z[i];
    };
    check = [&, n] {
      for (long i = 0; i < n; i += 997)
        if (!close(d[i], std::exp(double(a[i])) * b[i] + c[i], 1e-5)) return false;
      return true;
    };
  } else if (workload == "softmax" && dims.size() == 2) {
    const long rows = dims[0], cols = dims[1];
    a = filled(rows * cols, 1), d.assign(rows * cols, 0);
    run = [&, rows, cols] {
#pragma omp parallel for schedule(static)
      for (long r = 0; r < rows; ++r) {
        const float* x = a.data() + r * cols;
        float* y = d.data() + r * cols;
        float m = -INFINITY;
#pragma omp simd reduction(max : m)
        for (long j = 0; j < cols; ++j) m = std::max(m, x[j]);
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (long j = 0; j < cols; ++j) s += (y[j] = std::exp(x[j] - m));
        const float inv = 1.0f / s;
#pragma omp simd
        for (long j = 0; j < cols; ++j) y[j] *= inv;
      }
    };
    check = [&, rows, cols] {
      for (long r = 0; r < rows; r += std::max(1L, rows / 7)) {
        double m = -INFINITY, s = 0;
        for (long j = 0; j < cols; ++j) m = std::max(m, double(a[r * cols + j]));
        for (long j = 0; j < cols; ++j) s += std::exp(a[r * cols + j] - m);
        for (long j = 0; j < cols; j += 13)
          if (!close(d[r * cols + j], std::exp(a[r * cols + j] - m) / s, 1e-4)) return false;
      }
      return true;
    };
  } else if ((workload == "sum_axis0" || workload == "sum_axis1") && dims.size() == 2) {
    const long rows = dims[0], cols = dims[1];
    const bool axis0 = workload == "sum_axis0";
    a = filled(rows * cols, 1), d.assign(axis0 ? cols : rows, 0);
    if (axis0) {
      run = [&, rows, cols] {
        // Each thread owns a band of columns and streams every row's band into it.
#pragma omp parallel
        {
          const int t = omp_get_thread_num(), nt = omp_get_num_threads();
          const long c0 = cols * t / nt, c1 = cols * (t + 1) / nt;
          float* out = d.data();
          for (long j = c0; j < c1; ++j) out[j] = 0;
          for (long r = 0; r < rows; ++r) {
            const float* x = a.data() + r * cols;
#pragma omp simd
            for (long j = c0; j < c1; ++j) out[j] += x[j];
          }
        }
      };
    } else {
      run = [&, rows, cols] {
#pragma omp parallel for schedule(static)
        for (long r = 0; r < rows; ++r) {
          const float* x = a.data() + r * cols;
          float s = 0;
#pragma omp simd reduction(+ : s)
          for (long j = 0; j < cols; ++j) s += x[j];
          d[r] = s;
        }
      };
    }
    check = [&, rows, cols, axis0] {
      const long outs = axis0 ? cols : rows, len = axis0 ? rows : cols;
      for (long o = 0; o < outs; o += std::max(1L, outs / 11)) {
        double s = 0;
        for (long i = 0; i < len; ++i) s += axis0 ? a[i * cols + o] : a[o * cols + i];
        if (std::abs(d[o] - s) > 1e-4 * len) return false;
      }
      return true;
    };
  } else if (workload == "transpose" && dims.size() == 2) {
    const long rows = dims[0], cols = dims[1];
    a = filled(rows * cols, 1), d.assign(rows * cols, 0);
    run = [&, rows, cols] {
      constexpr long B = 32;
#pragma omp parallel for collapse(2) schedule(static)
      for (long i0 = 0; i0 < cols; i0 += B)
        for (long j0 = 0; j0 < rows; j0 += B)
          for (long i = i0; i < std::min(cols, i0 + B); ++i)
            for (long j = j0; j < std::min(rows, j0 + B); ++j) d[i * rows + j] = a[j * cols + i];
    };
    check = [&, rows, cols] {
      for (long i = 0; i < cols; i += 7)
        for (long j = 0; j < rows; j += 5)
          if (d[i * rows + j] != a[j * cols + i]) return false;
      return true;
    };
  } else {
    return unavailable("the hand-loop peer times elementwise, softmax, sum_axis0, sum_axis1 and transpose");
  }

  run();
  if (!check()) {
    std::fprintf(stderr, "loops peer: %s %s differs from the naive computation\n", workload.c_str(), size.c_str());
    return 1;
  }
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  std::printf("{\"workload\": \"%s\", \"size\": [%s], \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, "
              "\"reps\": %d, \"checked\": true, \"threads\": \"%s\"}\n",
              workload.c_str(), size_json.c_str(), med, ms.front(), ms.back(), reps, threads.c_str());
  return 0;
}
