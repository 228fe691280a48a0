// Hand-written loop peer for ravel-bench (docs/bench.md, "Peers"): the loops a performance-aware
// C++ programmer writes by hand with OpenMP, so that "Ravel >= 0.9x the hand loop" is measured in
// the same ravel-bench run as Ravel itself. Two builds of this one file (tools/ravel_bench):
//  * ravel-peer-loops, the limit: -O3 -march=native -ffast-math -fopenmp, so std::exp in
//    an `omp simd` loop becomes glibc's vector expf (libmvec) and every loop uses the machine's
//    widest vectors; the transpose is 64x64 tiles of 8x8 AVX register transposes
//    (RAVEL_LOOPS_NATIVE). Streaming (non-temporal) stores were tried for the elementwise and
//    softmax outputs and measured slower on the 2-core EPYC VM (docs/performance.md, "The limit as a peer"),
//    so they are not used.
//  * ravel-peer-loops-sse2: Ravel's own flags (the build type's, no -march, no -ffast-math) plus
//    -fopenmp and the plain loops: what the same programmer gets without tuning for the machine.
// The flags are printed in the result line ("threads", listed under ravel-bench's table).
//   ravel-peer-loops --workload NAME --size AxB --warmup W --reps R
// Workloads: elementwise (d = exp(a) * b + c), log_softmax (rows: max, exp-sum, x - shift),
// layer_norm (rows: sum, sum of squared deviations, normalise and scale), cross_entropy (rows:
// max, exp-sum, the picked logit; the mean of the row losses),
// softmax (rows: max, exp and sum, scale; a row
// stays in cache between its passes), sum_axis0 (rows streamed into a vector of column sums),
// sum_axis1 (a vectorised dot-like sum per row), transpose (32 x 32 blocks). Others: unavailable.
// Threads: OpenMP's (ravel-bench sets OMP_NUM_THREADS to every core and OMP_WAIT_POLICY=passive);
// the settings in effect are printed in the result line ("threads").
#include <omp.h>
#if defined(RAVEL_LOOPS_NATIVE) && defined(__AVX__)
#include <immintrin.h>
#define RAVEL_LOOPS_AVX 1
#endif
#ifndef RAVEL_LOOPS_FLAGS
#define RAVEL_LOOPS_FLAGS "(flags unknown)"
#endif

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

// 64-byte aligned storage (cache-line aligned rows for every build of the peer).
template <class T>
struct Aligned {
  using value_type = T;
  Aligned() = default;
  template <class U> Aligned(const Aligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64)); }
  void deallocate(T* p, size_t) { std::free(p); }
  bool operator==(const Aligned&) const { return true; }
};
using Floats = std::vector<float, Aligned<float>>;

Floats filled(size_t n, uint64_t seed) {
  Floats v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uniform(seed * 0x100000000ull + i);
  return v;
}

std::string env_or(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}

bool close(double got, double want, double tol) { return std::abs(got - want) <= tol * (1 + std::abs(want)); }

// Softmax (or, with `log`, log_softmax) of every 7th-or-so row of x, in double, against y.
bool softmax_rows_match(const Floats& x, const Floats& y, long rows, long cols, bool log) {
  for (long r = 0; r < rows; r += std::max(1L, rows / 7)) {
    const float* xr = x.data() + r * cols;
    double m = -INFINITY, s = 0;
    for (long j = 0; j < cols; ++j) m = std::max(m, double(xr[j]));
    for (long j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
    for (long j = 0; j < cols; j += 13) {
      const double want = log ? xr[j] - m - std::log(s) : std::exp(xr[j] - m) / s;
      if (!close(y[r * cols + j], want, 1e-4)) return false;
    }
  }
  return true;
}

#ifdef RAVEL_LOOPS_AVX
// The 8x8 block at src (row stride ss) transposed into dst (row stride ds): 24 shuffles, no gathers.
void transpose8x8(const float* src, long ss, float* dst, long ds) {
  __m256 r[8], t[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + k * ss);
  for (int k = 0; k < 8; k += 2) t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]), t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  for (int k = 0; k < 8; k += 4) {
    r[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(dst + k * ds, _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
    _mm256_storeu_ps(dst + (k + 4) * ds, _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
  }
}
#endif

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
                              env_or("OMP_WAIT_POLICY", "(unset)") + "; " + RAVEL_LOOPS_FLAGS;
  auto unavailable = [&](const char* why) {
    std::printf("{\"workload\": \"%s\", \"size\": [%s], \"unavailable\": \"%s\"}\n", workload.c_str(),
                size_json.c_str(), why);
    return 0;
  };

  std::function<void()> run;
  std::function<bool()> check;  // after one run: the result against a naive double computation
  Floats a, b, c, d;
  if (workload == "elementwise" && dims.size() == 1) {
    const long n = dims[0];
    a = filled(n, 1), b = filled(n, 2), c = filled(n, 3), d.assign(n, 0);
    run = [&, n] {
      const float *x = a.data(), *y = b.data(), *z = c.data();
      float* out = d.data();
      // Native: vector expf (libmvec). Streaming the output (through an L1 buffer, so the stores
      // are non-temporal) was measured slower here (docs/performance.md, "The limit as a peer"), so not used.
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
    check = [&, rows, cols] { return softmax_rows_match(a, d, rows, cols, false); };
  } else if (workload == "log_softmax" && dims.size() == 2) {
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
        for (long j = 0; j < cols; ++j) s += std::exp(x[j] - m);
        const float shift = m + std::log(s);
#pragma omp simd
        for (long j = 0; j < cols; ++j) y[j] = x[j] - shift;
      }
    };
    check = [&, rows, cols] { return softmax_rows_match(a, d, rows, cols, true); };
  } else if (workload == "cross_entropy" && dims.size() == 2) {
    // The mean over the rows of log sum e^(x - m) + (m - x[t]), one row at a time while it is in
    // L1/L2: the max, the sum of exponentials, then the picked logit (Ravel's nn::cross_entropy,
    // docs/architecture.md decision 67). Targets are int64, spread over the classes.
    const long rows = dims[0], cols = dims[1];
    a = filled(rows * cols, 1), d.assign(1, 0);
    std::vector<long> t(rows);
    for (long r = 0; r < rows; ++r) t[r] = (r * 7919 + 13) % cols;
    run = [&, rows, cols, t] {
      double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
      for (long r = 0; r < rows; ++r) {
        const float* x = a.data() + r * cols;
        float m = -INFINITY;
#pragma omp simd reduction(max : m)
        for (long j = 0; j < cols; ++j) m = std::max(m, x[j]);
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (long j = 0; j < cols; ++j) s += std::exp(x[j] - m);
        total += std::log(s) + (m - x[t[r]]);
      }
      d[0] = float(total / double(rows));
    };
    check = [&, rows, cols, t] {
      double total = 0;
      for (long r = 0; r < rows; ++r) {
        const float* x = a.data() + r * cols;
        double m = -INFINITY, s = 0;
        for (long j = 0; j < cols; ++j) m = std::max(m, double(x[j]));
        for (long j = 0; j < cols; ++j) s += std::exp(x[j] - m);
        total += std::log(s) + m - x[t[r]];
      }
      return close(d[0], total / double(rows), 1e-5);
    };
  } else if (workload == "layer_norm" && dims.size() == 2) {
    // y = (x - mean) / sqrt(var + 1e-5) * g + b over each row, one row at a time while it is
    // in L1/L2: the sum, the sum of squared deviations, then the write (docs/architecture.md decision 48).
    const long rows = dims[0], cols = dims[1];
    a = filled(rows * cols, 1), b = filled(cols, 2), c = filled(cols, 3), d.assign(rows * cols, 0);
    run = [&, rows, cols] {
#pragma omp parallel for schedule(static)
      for (long r = 0; r < rows; ++r) {
        const float* x = a.data() + r * cols;
        const float *g = b.data(), *bb = c.data();
        float* y = d.data() + r * cols;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (long j = 0; j < cols; ++j) s += x[j];
        const float mean = s / float(cols);
        float q = 0;
#pragma omp simd reduction(+ : q)
        for (long j = 0; j < cols; ++j) q += (x[j] - mean) * (x[j] - mean);
        const float rstd = 1.0f / std::sqrt(q / float(cols) + 1e-5f);
#pragma omp simd
        for (long j = 0; j < cols; ++j) y[j] = (x[j] - mean) * rstd * g[j] + bb[j];
      }
    };
    check = [&, rows, cols] {
      for (long r = 0; r < rows; r += 7) {
        const float* x = a.data() + r * cols;
        double s = 0, q = 0;
        for (long j = 0; j < cols; ++j) s += x[j];
        const double mean = s / double(cols);
        for (long j = 0; j < cols; ++j) q += (x[j] - mean) * (x[j] - mean);
        const double rstd = 1.0 / std::sqrt(q / double(cols) + 1e-5);
        for (long j = 0; j < cols; j += 3)
          if (!close(d[r * cols + j], (x[j] - mean) * rstd * b[j] + c[j], 1e-4)) return false;
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
#ifdef RAVEL_LOOPS_AVX
      // 64x64 tiles (16 KiB in, 16 KiB out: both in L1), each as 8x8 AVX register transposes.
      constexpr long T = 64;
#pragma omp parallel for collapse(2) schedule(static)
      for (long i0 = 0; i0 < cols; i0 += T)
        for (long j0 = 0; j0 < rows; j0 += T) {
          const long i1 = std::min(cols, i0 + T), j1 = std::min(rows, j0 + T);
          long i = i0;
          for (; i + 8 <= i1; i += 8) {
            long j = j0;
            for (; j + 8 <= j1; j += 8) transpose8x8(&a[j * cols + i], cols, &d[i * rows + j], rows);
            for (; j < j1; ++j)
              for (long k = i; k < i + 8; ++k) d[k * rows + j] = a[j * cols + k];
          }
          for (; i < i1; ++i)
            for (long j = j0; j < j1; ++j) d[i * rows + j] = a[j * cols + i];
        }
      return;
#endif
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
    return unavailable("the hand-loop peer times elementwise, softmax, log_softmax, layer_norm, cross_entropy, sum_axis0, sum_axis1 and transpose");
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
