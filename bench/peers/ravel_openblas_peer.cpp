// GEMM library peers for ravel-bench (docs/bench.md, "Peers"): times matmul with the f32 GEMM a
// CPU user would otherwise call. Built twice from this file:
//   ravel-peer-openblas  cblas_sgemm (OpenBLAS; threads: OPENBLAS_NUM_THREADS)
//   ravel-peer-onednn    dnnl_sgemm (oneDNN, RAVEL_PEER_ONEDNN; threads: OpenMP's), and conv2d
//                        through oneDNN's convolution primitives (onednn_conv.cpp)
// Other workloads are reported unavailable. Speaks the peer line
// protocol: one JSON object per result line, with the library's thread settings ("threads").
//   ravel-peer-openblas --workload matmul --size MxKxN --warmup W --reps R
#ifdef RAVEL_PEER_ONEDNN
#define RAVEL_PEER_LIBRARY "oneDNN"
#define RAVEL_PEER_WORKLOADS "matmul and conv2d"
#include <dnnl.h>
#include <omp.h>

#include "onednn_conv.hpp"
#else
#define RAVEL_PEER_LIBRARY "OpenBLAS"
#define RAVEL_PEER_WORKLOADS "matmul"
#include <cblas.h>
// OpenBLAS extensions (not in every cblas.h a system may pick up first).
extern "C" int openblas_get_num_threads(void);
extern "C" char* openblas_get_config(void);
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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
#ifdef RAVEL_PEER_ONEDNN
  if (workload == "conv2d") return run_onednn_conv(dims, size_json, warmup, reps);
#endif
  if (workload != "matmul" || dims.size() != 3) {
    std::printf("{\"workload\": \"%s\", \"size\": [%s], \"unavailable\": \"the " RAVEL_PEER_LIBRARY " peer times " RAVEL_PEER_WORKLOADS " only\"}\n",
                workload.c_str(), size_json.c_str());
    return 0;
  }
  const long m = dims[0], k = dims[1], n = dims[2];
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (long i = 0; i < m * k; ++i) a[i] = float((i * 37) % 101) / 50.0f - 1.0f;
  for (long i = 0; i < k * n; ++i) b[i] = float((i * 53) % 103) / 51.0f - 1.0f;
  const char* wait = std::getenv("OMP_WAIT_POLICY");
#ifdef RAVEL_PEER_ONEDNN
  const dnnl_version_t* ver = dnnl_version();
  const std::string threads = "oneDNN " + std::to_string(ver->major) + "." + std::to_string(ver->minor) + ", OpenMP " +
                              std::to_string(omp_get_max_threads()) + " threads, OMP_WAIT_POLICY=" + (wait ? wait : "(unset)");
  // oneDNN's sgemm is row-major.
  auto gemm = [&] { dnnl_sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n); };
#else
  const std::string threads = "OpenBLAS " + std::to_string(openblas_get_num_threads()) + " threads (" +
                              openblas_get_config() + ")";
  (void)wait;
  auto gemm = [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n); };
#endif
  // Check one output row against a naive sum, so that the peer never times a wrong answer either.
  gemm();
  bool ok = true;
  for (long j = 0; j < n; ++j) {
    double acc = 0;
    for (long p = 0; p < k; ++p) acc += double(a[p]) * b[p * n + j];
    ok = ok && std::abs(acc - c[j]) <= 1e-3 * (1 + std::abs(acc));
  }
  if (!ok) {
    std::fprintf(stderr, "%s peer: sgemm result differs from the naive sum\n", argv[0]);
    return 1;
  }
  for (int i = 0; i < warmup; ++i) gemm();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    gemm();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  double med = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  std::printf("{\"workload\": \"matmul\", \"size\": [%s], \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, "
              "\"reps\": %d, \"checked\": true, \"threads\": \"%s\"}\n",
              size_json.c_str(), med, ms.front(), ms.back(), reps, threads.c_str());
  return 0;
}
