// Note [Inline small kernels]
// A oneTBB parallel_for costs a few microseconds even when it ends up running one chunk (waking
// workers, spawning, joining), which is more than a small kernel's whole work: the makemore step
// is ~30 kernels on [64, 200]-sized data. So every kernel estimates its work (elements times
// instructions, or multiply-adds for a contraction) and runs on the calling thread below
// inline_work(); oneTBB only gets the kernels it pays for. No second thread pool either way.
// RAVEL_TBB_INLINE_WORK overrides the threshold (0: always parallel; measured: bench/README or
// docs/performance.md "Inline threshold"). The default, 2^19, keeps every elementwise kernel of
// the makemore step ([64, 200] x up to 28 instructions, ~360k) on the calling thread: on the
// shared 2-core machine, oneTBB's wake-ups and its workers' yield loops cost more than the
// second core gave back (docs/performance.md §0, "Makemore step, row-invariant loads, batched
// dot products, inline threshold").
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cstdint>
#include <cstdlib>

#include "tuning_env.hpp"

namespace tbbcpu {

inline int64_t inline_work() {
  static const int64_t w = tuning_int("RAVEL_TBB_INLINE_WORK", int64_t{1} << 19, 0, int64_t{1} << 62);
  return w;
}

// True when a kernel of `work` units should run on the calling thread.
inline bool run_inline(int64_t work) {
  return work < inline_work() || tbb::this_task_arena::max_concurrency() <= 1;
}

// tbb::parallel_for over [begin, end) with `grain`, or body(whole range) on this thread when the
// work is small (Note [Inline small kernels]).
template <class Body>
void parallel_for_work(int64_t begin, int64_t end, int64_t grain, int64_t work, const Body& body) {
  const tbb::blocked_range<int64_t> range(begin, end, grain > 0 ? grain : 1);
  if (run_inline(work)) {
    if (begin < end) body(range);
    return;
  }
  tbb::parallel_for(range, body);
}

}  // namespace tbbcpu
