// tbb_cpu's all_reduce (ABI 1.9, backend.h): a collective across the plugin's own devices.
//
// Note [Host all-reduce]
// tbb_cpu's devices share one address space, so an all-reduce needs no copies at all: device k
// reduces chunk k of every input, reading the inputs where they are, and writes that chunk into
// every device's output. Each element of each input is read once and each output element written
// once, and the n devices work at once on their own chunks (the composition of peer copies and
// adds moves 160 MiB on one thread at a time for 2 x 16 MiB, against memcpy's 32:
// docs/performance.md §6). Within a chunk the work goes in blocks of kBlock elements: the block
// is folded in a scratch block (parts in order 0, 1, ..., n-1, the order the ABI fixes, so a
// float sum is bitwise the core's fold) while it is in cache, then stored into every output
// (Note [Streaming the results]).
// In place (outputs[k] == inputs[k]) is safe: a block of input k is read only by the chunk's
// owner, and only before that block of any output is written.
// Ordering: with every device queued, one task per queue pushed atomically (push_group), the n
// tasks meet on an atomic counter before they read (every earlier task of every device has run)
// and again after they wrote (no later task of any device starts before all chunks are done):
// Note [Peer copies]'s two-sided barrier with n sides. Without queues the call runs the n chunks
// at once on the caller's oneTBB threads, and returns when all are done. Mixed (device 0 on the
// launching thread, RAVEL_TBB_ASYNC=caller): the queued devices are drained first, then the same.
#include "devices.hpp"
#include "dtype_ops.hpp"
#include "half_convert.hpp"
#include "members.hpp"

#include <tbb/parallel_for.h>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

namespace tbbcpu {

namespace {

constexpr int64_t kBlock = 4096;  // elements folded at a time: n parts' blocks stay in L2

struct Job {
  int32_t n = 0;
  int32_t dtype = 0;
  int32_t op = 0;
  int64_t count = 0;
  std::vector<const std::byte*> in;
  std::vector<std::byte*> out;
  std::vector<Device*> devices;
};

template <int DT> inline ctype<DT> s_min(ctype<DT> a, ctype<DT> b) {
  if constexpr (is_float_v<DT>) return -s_max<DT>(-a, -b);  // the core's minimum: NaN propagates
  else return b < a ? b : a;
}

template <int DT, int OP> inline ctype<DT> combine(ctype<DT> a, ctype<DT> b) {
  if constexpr (OP == RVL_ALL_REDUCE_SUM) return s_add<DT>(a, b);
  else if constexpr (OP == RVL_ALL_REDUCE_PROD) return s_mul<DT>(a, b);
  else if constexpr (OP == RVL_ALL_REDUCE_MAX) return s_max<DT>(a, b);
  else return s_min<DT>(a, b);
}

// acc[i] = x[i] op y[i] over one block (a plain loop GCC vectorises; x may be acc, y never is).
template <int DT, int OP>
void fold_block(ctype<DT>* acc, const ctype<DT>* x, const ctype<DT>* __restrict y, int64_t len) {
  for (int64_t i = 0; i < len; ++i) acc[i] = combine<DT, OP>(x[i], y[i]);
}

// Note [Streaming the results]: this machine's memory bandwidth is what an all-reduce of large
// parts spends (one core's memcpy saturates it: two memcpys at once take twice as long), so the
// results skip the cache: each block is folded in a scratch block that stays in L1, then written
// to every output with non-temporal stores, which spare the read-for-ownership of every output
// line (a third of the traffic otherwise): 2 x 16 MiB went from 0.45-0.54x memcpy to 0.75-0.93x.
// Parts below kStreamBytes keep ordinary stores, whose lines the next kernel reads from cache
// (L2 is 4 MiB a core here): with a 1 MiB threshold the data-parallel MLP step, whose gradient
// bucket is 2.7 MB, took 5.7-6.1 ms against 5.1-5.4 with the composition; with 8 MiB, 5.2 ms
// (docs/performance.md §6, 2026-12-06).
constexpr uint64_t kStreamBytes = 8u << 20;

void store_block(std::byte* dst, const std::byte* src, size_t bytes, bool stream) {
#if defined(__SSE2__)
  if (stream && reinterpret_cast<uintptr_t>(dst) % 16 == 0 && bytes % 16 == 0) {
    for (size_t i = 0; i < bytes; i += 64) {
      const size_t m = std::min<size_t>(64, bytes - i);
      for (size_t q = 0; q < m; q += 16)
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + q), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + q)));
    }
    return;
  }
#else
  (void)stream;
#endif
  std::memcpy(dst, src, bytes);
}

void store_fence(bool stream) {
#if defined(__SSE2__)
  if (stream) _mm_sfence();  // the streamed lines are visible before the chunk counts as done
#else
  (void)stream;
#endif
}

template <int DT, int OP>
void reduce_typed(const Job& j, int64_t lo, int64_t hi) {
  using T = ctype<DT>;
  const size_t size = sizeof(T);
  const bool stream = static_cast<uint64_t>(j.count) * size >= kStreamBytes;
  alignas(64) T acc[kBlock];
  for (int64_t b = lo; b < hi; b += kBlock) {
    const int64_t len = std::min(kBlock, hi - b);
    const size_t bytes = static_cast<size_t>(len) * size, off = static_cast<size_t>(b) * size;
    const T* x0 = reinterpret_cast<const T*>(j.in[0]) + b;
    if (j.n == 1) {
      if (j.out[0] != j.in[0]) std::memcpy(j.out[0] + off, x0, bytes);
      continue;
    }
    // Every input's block is read before any output's block is written: in place is safe.
    fold_block<DT, OP>(acc, x0, reinterpret_cast<const T*>(j.in[1]) + b, len);
    for (int32_t k = 2; k < j.n; ++k) fold_block<DT, OP>(acc, acc, reinterpret_cast<const T*>(j.in[k]) + b, len);
    for (int32_t k = 0; k < j.n; ++k) store_block(j.out[k] + off, reinterpret_cast<const std::byte*>(acc), bytes, stream);
  }
  store_fence(stream);
}

// Halves: each step computed in f32 and rounded once (what two f16 ADDs of the core do).
template <int OP>
void reduce_half(const Job& j, int64_t lo, int64_t hi, bool bf16) {
  float acc[kBlock], x[kBlock];
  auto to_f32 = [bf16](float* d, const std::byte* s, int64_t len) {
    bf16 ? bf16_to_f32(d, reinterpret_cast<const uint16_t*>(s), len) : f16_to_f32(d, reinterpret_cast<const uint16_t*>(s), len);
  };
  auto to_half = [bf16](std::byte* d, const float* s, int64_t len) {
    bf16 ? f32_to_bf16(reinterpret_cast<uint16_t*>(d), s, len) : f32_to_f16(reinterpret_cast<uint16_t*>(d), s, len);
  };
  for (int64_t b = lo; b < hi; b += kBlock) {
    const int64_t len = std::min(kBlock, hi - b);
    const size_t off = static_cast<size_t>(b) * 2, bytes = static_cast<size_t>(len) * 2;
    to_f32(acc, j.in[0] + off, len);
    for (int32_t k = 1; k < j.n; ++k) {
      to_f32(x, j.in[k] + off, len);
      fold_block<RVL_DTYPE_F32, OP>(acc, acc, x, len);
      to_half(j.out[0] + off, acc, len);  // round this step's result
      if (k + 1 < j.n) to_f32(acc, j.out[0] + off, len);
    }
    if (j.n == 1 && j.out[0] != j.in[0]) std::memcpy(j.out[0] + off, j.in[0] + off, bytes);
    for (int32_t k = 1; k < j.n; ++k) std::memcpy(j.out[k] + off, j.out[0] + off, bytes);
  }
}

template <int OP>
void reduce_op(const Job& j, int64_t lo, int64_t hi) {
  if (j.dtype == RVL_DTYPE_F16 || j.dtype == RVL_DTYPE_BF16) return reduce_half<OP>(j, lo, hi, j.dtype == RVL_DTYPE_BF16);
  dispatch_dtype(j.dtype, [&](auto dt) { reduce_typed<decltype(dt)::value, OP>(j, lo, hi); });
}

// Elements [lo, hi) of every input folded into every output, on the calling thread's arena.
void reduce_range(const Job& j, int64_t lo, int64_t hi) {
  if (hi <= lo) return;
  auto body = [&](int64_t a, int64_t b) {
    switch (j.op) {
      case RVL_ALL_REDUCE_SUM: return reduce_op<RVL_ALL_REDUCE_SUM>(j, a, b);
      case RVL_ALL_REDUCE_PROD: return reduce_op<RVL_ALL_REDUCE_PROD>(j, a, b);
      case RVL_ALL_REDUCE_MAX: return reduce_op<RVL_ALL_REDUCE_MAX>(j, a, b);
      default: return reduce_op<RVL_ALL_REDUCE_MIN>(j, a, b);
    }
  };
  // Several threads in the device (more cores than devices): blocks spread over them.
  if (hi - lo <= 4 * kBlock) return body(lo, hi);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, (hi - lo + kBlock - 1) / kBlock),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      body(lo + r.begin() * kBlock, std::min(hi, lo + r.end() * kBlock));
                    });
}

// Chunk k of n: [count k / n, count (k + 1) / n), block-aligned so no two devices share a line.
int64_t chunk_start(const Job& j, int32_t k) {
  const int64_t blocks = (j.count + kBlock - 1) / kBlock;
  return std::min(j.count, blocks * k / j.n * kBlock);
}

// The n sides of a queued all-reduce meet twice on a counter (Note [Host all-reduce]).
struct Meeting {
  const int n;
  std::atomic<int> arrived{0}, finished{0};
  explicit Meeting(int parties) : n(parties) {}
  void meet(std::atomic<int>& count) const {
    if (count.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      count.notify_all();
      return;
    }
    for (int round = 0; round < 4000; ++round) {
      if (count.load(std::memory_order_acquire) == n) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    for (int seen = count.load(std::memory_order_acquire); seen != n; seen = count.load(std::memory_order_acquire))
      count.wait(seen, std::memory_order_acquire);
  }
};

Job validate(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs, rvl_buffer* const* outputs,
             uint64_t count, int32_t dtype, int32_t op) {
  const int32_t devices = current_device_count();
  if (n < 1 || n > devices)
    rvl::invalid("all_reduce: n = " + std::to_string(n) + "; expected 1 to " + std::to_string(devices) +
                 " (one buffer per device of this plugin)");
  if (inputs == nullptr || outputs == nullptr) rvl::invalid("all_reduce: the inputs or outputs array is NULL");
  if (op < RVL_ALL_REDUCE_SUM || op > RVL_ALL_REDUCE_MIN)
    rvl::invalid("all_reduce: op " + std::to_string(op) + " is not an rvl_all_reduce_op (SUM 1, MAX 2, PROD 3, MIN 4)");
  if (dtype < 0 || dtype >= RVL_DTYPE_COUNT_) rvl::invalid("all_reduce: dtype " + std::to_string(dtype) + " is not an rvl_dtype");
  const uint64_t size = rvl::dtype_size(dtype);
  if (count > UINT64_MAX / size / 2) rvl::invalid("all_reduce: count " + std::to_string(count) + " overflows");
  const uint64_t bytes = count * size;
  Job j;
  j.n = n, j.dtype = dtype, j.op = op, j.count = static_cast<int64_t>(count);
  std::set<int32_t> seen;
  for (int32_t k = 0; k < n; ++k) {
    const std::string which = "all_reduce input " + std::to_string(k);
    const rvl_buffer* in = lookup_buffer(inputs[k], which.c_str());
    const rvl_buffer* out = lookup_buffer(outputs[k], ("all_reduce output " + std::to_string(k) + " (on input " +
                                                       std::to_string(k) + "'s device " + std::to_string(in->device) + ")").c_str(),
                                          in->device);
    if (!seen.insert(in->device).second)
      rvl::invalid("all_reduce: device " + std::to_string(in->device) + " appears twice (input " + std::to_string(k) +
                   "); expected n distinct devices");
    if (in->size < bytes || out->size < bytes)
      rvl::invalid("all_reduce: " + std::to_string(count) + " elements of " + std::to_string(size) + " bytes need " +
                   std::to_string(bytes) + " bytes; input " + std::to_string(k) + " has " + std::to_string(in->size) +
                   ", output " + std::to_string(k) + " " + std::to_string(out->size));
    if (streams != nullptr) stream_device(streams[k], in->device, ("all_reduce stream " + std::to_string(k)).c_str());
    j.in.push_back(in->data);
    j.out.push_back(out->data);
    j.devices.push_back(&device_at(in->device));
  }
  return j;
}

}  // namespace

rvl_error* all_reduce(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs, rvl_buffer* const* outputs,
                      uint64_t count, int32_t dtype, int32_t op) {
  return rvl::guard([&] {
    auto j = std::make_shared<const Job>(validate(n, streams, inputs, outputs, count, dtype, op));
    if (j->count == 0) return;
    bool all_queued = true;
    for (Device* d : j->devices) all_queued = all_queued && d->queue != nullptr;
    if (all_queued && j->n > 1) {
      auto meeting = std::make_shared<Meeting>(j->n);
      std::vector<std::pair<DeviceQueue*, DeviceQueue::Task>> group;
      for (int32_t k = 0; k < j->n; ++k)
        group.emplace_back(j->devices[k]->queue.get(), [j, meeting, k] {
          meeting->meet(meeting->arrived);
          reduce_range(*j, chunk_start(*j, k), chunk_start(*j, k + 1));  // already in device k's arena
          meeting->meet(meeting->finished);
        });
      DeviceQueue::push_group(std::move(group));
      return;
    }
    for (Device* d : j->devices)
      if (d->queue) d->queue->drain();  // their earlier work first (an error stays for the next sync)
    // Now, on the calling thread and oneTBB's workers in the caller's arena, not the devices':
    // another host thread may be running a kernel in device k's arena (a Jit replay by device,
    // Note [Host steps in lanes] in the core), and a call waiting for a slot there while that
    // thread waits for this all-reduce would never return.
    tbb::parallel_for(int32_t{0}, j->n, [&](int32_t k) { reduce_range(*j, chunk_start(*j, k), chunk_start(*j, k + 1)); });
  });
}

}  // namespace tbbcpu
