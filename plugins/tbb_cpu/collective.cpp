// tbb_cpu's collectives across the plugin's own devices: all_reduce (ABI 1.9), reduce_scatter
// and all_gather (ABI 1.12, backend.h); their arguments go through the SDK's shared rules
// (<ravel/validate_collective.hpp>) before anything runs.
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
//
// Note [Host reduce-scatter and all-gather]
// The other two collectives are the two halves of Note [Host all-reduce], with the same launch
// (one task per device, meeting before and after) and the same in-place reads of the other
// devices' buffers. reduce_scatter: device k folds chunk k of every input (parts in order, halves
// rounded per step) straight into its own output, so every input element is read once and every
// output element written once. all_gather: device k stores its input at chunk k of every output,
// block by block, so each input is read once and each output byte written once (the first
// version had device k fill its own output from every input, n reads of each input: 2 x 16
// MiB ran at 0.80-0.86x memcpy against 0.99-1.05x now, interleaved; docs/performance.md §6). Both
// stream their stores past the cache from 8 MiB of output per device (Note [Streaming the
// results]). Neither has an in-place form (backend.h): the validator refuses any overlap, so no
// device ever reads what another writes.
#include "devices.hpp"
#include "dtype_ops.hpp"
#include "half_convert.hpp"
#include "members.hpp"

#include <ravel/validate_collective.hpp>
#include <tbb/parallel_for.h>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

namespace tbbcpu {

namespace {

constexpr int64_t kBlock = 4096;  // elements folded at a time: n parts' blocks stay in L2

// A fold: n inputs combined in order, the result stored into every output (all_reduce: n of
// them; one device's part of a reduce_scatter: one).
struct Job {
  int32_t n = 0;  // inputs folded
  int32_t dtype = 0;
  int32_t op = 0;
  int64_t count = 0;
  bool stream = false;  // Note [Streaming the results]
  std::vector<const std::byte*> in;
  std::vector<std::byte*> out;
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
  const bool stream = j.stream;
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
    for (std::byte* o : j.out) store_block(o + off, reinterpret_cast<const std::byte*>(acc), bytes, stream);
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
    for (size_t k = 1; k < j.out.size(); ++k) std::memcpy(j.out[k] + off, j.out[0] + off, bytes);
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

// The n-sided barrier of a collective (Note [Host all-reduce]): body(k) runs device k's share,
// all at once. Queued devices: one task per queue, pushed atomically, meeting before and after;
// otherwise the queued devices are drained and the n shares run on the caller's oneTBB threads.
void launch(const std::vector<Device*>& devices, std::function<void(int32_t)> body) {
  const auto n = static_cast<int32_t>(devices.size());
  bool all_queued = true;
  for (Device* d : devices) all_queued = all_queued && d->queue != nullptr;
  if (all_queued && n > 1) {
    auto meeting = std::make_shared<Meeting>(n);
    auto shared = std::make_shared<std::function<void(int32_t)>>(std::move(body));
    std::vector<std::pair<DeviceQueue*, DeviceQueue::Task>> group;
    for (int32_t k = 0; k < n; ++k)
      group.emplace_back(devices[k]->queue.get(), [shared, meeting, k] {
        meeting->meet(meeting->arrived);
        (*shared)(k);  // already in device k's arena
        meeting->meet(meeting->finished);
      });
    DeviceQueue::push_group(std::move(group));
    return;
  }
  for (Device* d : devices)
    if (d->queue) d->queue->drain();  // their earlier work first (an error stays for the next sync)
  // Now, on the calling thread and oneTBB's workers in the caller's arena, not the devices':
  // another host thread may be running a kernel in device k's arena (a Jit replay by device,
  // Note [Host steps in lanes] in the core), and a call waiting for a slot there while that
  // thread waits for this collective would never return.
  tbb::parallel_for(int32_t{0}, n, [&](int32_t k) { body(k); });
}

// The shared argument rules, with this plugin's handles.
rvl::validate::Collective validated(rvl::validate::CollectiveKind kind, int32_t n, rvl_stream* const* streams,
                                    const rvl_buffer* const* inputs, rvl_buffer* const* outputs, uint64_t count,
                                    int32_t dtype, int32_t op) {
  return rvl::validate::validate_collective(
      kind, n, current_device_count(), streams, inputs, outputs, count, dtype, op,
      [](const rvl_buffer* b, const char* what) {
        const rvl_buffer* live = lookup_buffer(b, what);
        return rvl::validate::CollectiveMemory{live->data, live->size, live->device};
      },
      [](const rvl_stream* s, int32_t device, const char* what) { stream_device(s, device, what); });
}

std::vector<Device*> devices_of(const rvl::validate::Collective& c) {
  std::vector<Device*> out;
  for (int32_t d : c.devices) out.push_back(&device_at(d));
  return out;
}

// Device k's share of an all-gather: input k stored at chunk k of every output, a block at a
// time, so the block is read once (then from cache) however many outputs it goes to.
void gather_from(const rvl::validate::Collective& c, int32_t k) {
  const auto bytes = static_cast<int64_t>(c.count * c.element_size);
  const bool stream = static_cast<uint64_t>(bytes) * static_cast<uint64_t>(c.n) >= kStreamBytes;
  constexpr int64_t kCopyBlock = 256 * 1024;  // bytes a task copies: stays in L2 for the n stores
  const int64_t blocks = (bytes + kCopyBlock - 1) / kCopyBlock;
  auto copy = [&](int64_t first, int64_t last) {  // blocks [first, last) of input k
    for (int64_t q = first; q < last; ++q) {
      const int64_t lo = q * kCopyBlock, len = std::min(kCopyBlock, bytes - lo);
      for (int32_t j = 0; j < c.n; ++j)
        store_block(c.out[j].data + k * bytes + lo, c.in[k].data + lo, static_cast<size_t>(len), stream);
    }
    store_fence(stream);
  };
  if (blocks <= 2) return copy(0, blocks);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, blocks), [&](const tbb::blocked_range<int64_t>& r) { copy(r.begin(), r.end()); });
}

}  // namespace

rvl_error* all_reduce(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs, rvl_buffer* const* outputs,
                      uint64_t count, int32_t dtype, int32_t op) {
  return rvl::guard([&] {
    const auto c = validated(rvl::validate::CollectiveKind::AllReduce, n, streams, inputs, outputs, count, dtype, op);
    if (c.count == 0) return;
    auto j = std::make_shared<Job>();
    j->n = c.n, j->dtype = c.dtype, j->op = c.op, j->count = static_cast<int64_t>(c.count);
    j->stream = c.count * c.element_size >= kStreamBytes;
    for (int32_t k = 0; k < c.n; ++k) j->in.push_back(c.in[k].data), j->out.push_back(c.out[k].data);
    launch(devices_of(c), [j](int32_t k) { reduce_range(*j, chunk_start(*j, k), chunk_start(*j, k + 1)); });
  });
}

rvl_error* reduce_scatter(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                          rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op) {
  return rvl::guard([&] {
    const auto c = validated(rvl::validate::CollectiveKind::ReduceScatter, n, streams, inputs, outputs, count, dtype, op);
    if (c.count == 0) return;
    // Device k's share: chunk k of every input folded into output k (Note [Host reduce-scatter
    // and all-gather]).
    auto jobs = std::make_shared<std::vector<Job>>(c.n);
    const uint64_t chunk = c.count * c.element_size;
    for (int32_t k = 0; k < c.n; ++k) {
      Job& j = (*jobs)[k];
      j.n = c.n, j.dtype = c.dtype, j.op = c.op, j.count = static_cast<int64_t>(c.count);
      j.stream = chunk >= kStreamBytes;
      for (int32_t i = 0; i < c.n; ++i) j.in.push_back(c.in[i].data + chunk * static_cast<uint64_t>(k));
      j.out.push_back(c.out[k].data);
    }
    launch(devices_of(c), [jobs](int32_t k) { reduce_range((*jobs)[k], 0, (*jobs)[k].count); });
  });
}

rvl_error* all_gather(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs, rvl_buffer* const* outputs,
                      uint64_t count, int32_t dtype) {
  return rvl::guard([&] {
    auto c = std::make_shared<const rvl::validate::Collective>(
        validated(rvl::validate::CollectiveKind::AllGather, n, streams, inputs, outputs, count, dtype, 0));
    if (c->count == 0) return;
    launch(devices_of(*c), [c](int32_t k) { gather_from(*c, k); });
  });
}

}  // namespace tbbcpu
