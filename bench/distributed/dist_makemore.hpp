// The makemore training step of ravel-bench (tools/ravel_bench/workloads.cpp: 3-character
// context, embedding 27x10, tanh hidden 200, cross-entropy over 27, SGD lr 0.1) data-parallel
// over the ranks, for bench_dist_peer; and makemore_mlp, the same step widened as dp.sh's MLP
// (embedding 27x32, hidden 1024) with 64 KiB gradient buckets (five, begun during the backward
// pass: Note [Gradient buckets]; the PyTorch peer uses DDP's bucket_cap_mb of the same size). Every rank draws the same global batch of random contexts
// and trains on its rows [r B / R, (r + 1) B / R); its loss is scaled by its share of the batch,
// DataParallel sums the gradients (makemore: one bucket), and every rank applies the same update. The step
// is one Jit capture, replayed (the all-reduce inside, as examples/makemore's data-parallel step).
// Checked once: the first step's loss summed over the ranks against a forward pass over the whole
// batch in double on the host. Rank 0 prints one JSON line; each repetition is one step, after a
// barrier, timed on rank 0.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "ravel/distributed.hpp"
#include "ravel/ravel.hpp"

namespace dist_makemore {

namespace dist = ravel::distributed;
using ravel::DType;
using ravel::Tensor;

constexpr int64_t kVocab = 27, kBlock = 3;

// The host's forward pass in double: the mean loss over all rows.
inline double host_loss(const std::vector<double>& ctx, const std::vector<double>& tgt, const std::vector<double> (&p)[5],
                        int64_t batch, int64_t kEmbed, int64_t kHid) {
  double loss = 0;
  for (int64_t r = 0; r < batch; ++r) {
    std::vector<double> h(kHid), logit(kVocab);
    for (int64_t j = 0; j < kHid; ++j) {
      double z = p[2][j];
      for (int64_t k = 0; k < kBlock; ++k)
        for (int64_t e = 0; e < kEmbed; ++e) z += p[0][int64_t(ctx[r * kBlock + k]) * kEmbed + e] * p[1][(k * kEmbed + e) * kHid + j];
      h[j] = std::tanh(z);
    }
    double mx = -1e300, sum = 0;
    for (int64_t v = 0; v < kVocab; ++v) {
      logit[v] = p[4][v];
      for (int64_t j = 0; j < kHid; ++j) logit[v] += h[j] * p[3][j * kVocab + v];
      mx = std::max(mx, logit[v]);
    }
    for (int64_t v = 0; v < kVocab; ++v) sum += std::exp(logit[v] - mx);
    loss += (std::log(sum) + mx - logit[int64_t(tgt[r])]) / double(batch);
  }
  return loss;
}

inline Tensor uniform_init(ravel::Shape s, uint64_t seed) { return Tensor::rand(std::move(s), seed) * 2.0 - 1.0; }

}  // namespace dist_makemore

// `wide`: makemore_mlp (embedding 32, hidden 1024, 64 KiB buckets); else makemore's step.
inline int run_makemore(int64_t batch, int warmup, int reps, bool wide = false) {
  using namespace dist_makemore;
  const int64_t kEmbed = wide ? 32 : 10, kHid = wide ? 1024 : 200;
  const char* name = wide ? "makemore_mlp" : "makemore";
  const int rank = dist::rank(), size = dist::world_size();
  if (batch % size != 0) {
    if (rank == 0)
      std::printf("{\"workload\": \"%s\", \"size\": [%lld], \"unavailable\": \"the batch is not divisible by %d ranks\"}\n",
                  name, static_cast<long long>(batch), size);
    return 0;
  }
  const int64_t lo = batch * rank / size, hi = batch * (rank + 1) / size, rows = hi - lo;
  const Tensor ctx = (Tensor::rand({batch, kBlock}, 41) * double(kVocab)).cast(DType::I64).realize();
  const Tensor tgt = (Tensor::rand({batch}, 42) * double(kVocab)).cast(DType::I64).realize();
  const Tensor my_ctx = ctx.slice(0, lo, hi).contiguous().realize(), my_tgt = tgt.slice(0, lo, hi).contiguous().realize();
  std::vector<Tensor> p = {Tensor::randn({kVocab, kEmbed}, 43).realize(),
                           (uniform_init({kBlock * kEmbed, kHid}, 44) * 0.18).contiguous().realize(),
                           (uniform_init({kHid}, 45) * 0.18).contiguous().realize(),
                           (uniform_init({kHid, kVocab}, 46) * 0.07).contiguous().realize(),
                           (uniform_init({kVocab}, 47) * 0.07).contiguous().realize()};
  std::vector<double> hp[5];
  for (int i = 0; i < 5; ++i) hp[i] = p[i].to_vector<double>();
  const double want = host_loss(ctx.cast(DType::F64).to_vector<double>(), tgt.cast(DType::F64).to_vector<double>(), hp, batch,
                                kEmbed, kHid);
  dist::DataParallel::Config buckets;
  if (wide) buckets.bucket_bytes = 64 << 10;
  dist::DataParallel ddp({}, buckets);
  const double share = double(rows) / double(batch);
  ravel::Jit jit([&](const std::vector<Tensor>& in) {
    Tensor emb = in[0].flatten().one_hot(kVocab).matmul(p[0]).reshape({rows, kBlock * kEmbed});
    Tensor h = (emb.matmul(p[1]) + p[2]).tanh();
    Tensor loss = ravel::nn::cross_entropy(h.matmul(p[3]) + p[4], in[1]) * share;
    std::vector<Tensor> g = ddp.reduce_gradients(ravel::gradients(loss, p), 1.0);
    std::vector<Tensor> out;
    for (int i = 0; i < 5; ++i) out.push_back(p[i] - g[i] * 0.1);
    out.push_back(loss);
    ravel::realize(out);
    for (int i = 0; i < 5; ++i) p[i] = Tensor().assign(out[i]);
    return std::vector<Tensor>{out.back()};
  }, std::vector<Tensor*>{&p[0], &p[1], &p[2], &p[3], &p[4]});
  // The check: the first step's loss (before its update), summed over the ranks.
  const Tensor first = jit({my_ctx, my_tgt})[0];
  const double got = dist::all_reduce(first.reshape({1})).item<float>();
  if (std::abs(got - want) > 1e-4 * std::max(1.0, std::abs(want))) {
    std::fprintf(stderr, "bench_dist_peer: %s loss %.6f, the host's %.6f\n", name, got, want);
    return 1;
  }
  std::vector<double> ms;
  for (int r = 0; r < warmup + reps; ++r) {
    dist::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    jit({my_ctx, my_tgt})[0].realize();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r >= warmup) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  if (rank == 0)
    std::printf("{\"workload\": \"%s\", \"size\": [%lld], \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, "
                "\"reps\": %d, \"checked\": true, \"threads\": \"%d ranks, DataParallel in a Jit%s\"}\n",
                name, static_cast<long long>(batch), ms[ms.size() / 2], ms.front(), ms.back(), reps, size,
                wide ? ", 64 KiB buckets" : "");
  return 0;
}
