// The collectives across a GPU plugin's own devices (all_reduce, ABI 1.9; reduce_scatter and
// all_gather, ABI 1.12) as steps such a plugin already runs: peer copies and one fold program
// per device (Note [Collective plans]).
#pragma once

#include <ravel/validate_collective.hpp>

#include <cstdint>
#include <vector>

namespace rvl::lower {

// Note [Collective plans]
// HIP and Level Zero run the three collectives with the same two kinds of step, ordered by
// their own barriers: copies onto device k (hipMemcpyPeerAsync, buffer_copy_peer's path), into
// scratch blocks of device k or straight into its output, then, for the two reductions, one
// generated kernel on device k, the fold of n parts in the ABI's order (Note [Fold programs]).
// What moves where is the same for both plugins, so it is decided here, once:
//   all_reduce      device k copies every other input whole into a scratch block and folds the
//                   n parts (its own input read in place) into its output. An output may be its
//                   input, so no fold may start before every device has copied every input
//                   (barrier_between).
//   reduce_scatter  device k copies chunk k of every other input (count elements from k*count)
//                   into a scratch block and folds them with chunk k of its own input, read in
//                   place, into its output. No output shares a byte with an input (the ABI), so
//                   no device's fold can disturb another's copies: no barrier between. Each
//                   device receives (n-1)/n of an input, the ring's volume per device.
//   all_gather      device k copies input j (its own included) into slot j of its output: no
//                   scratch, no fold.
//   n == 1          a copy of the first count elements into the output; a plugin skips a copy
//                   whose source and destination are the same bytes (all_reduce in place).
// The plugin adds the barrier in (work queued before the call on every stream first) and out
// (work queued after it waits), as for its peer copies.
struct CollectivePlan {
  struct Copy {
    int32_t from = 0;        // the input (device index in the call) copied
    uint64_t from_byte = 0;  // offset into that input
    int32_t scratch = -1;    // destination: scratch block index on this device; -1: its output
    uint64_t to_byte = 0;    // offset into the destination
    uint64_t bytes = 0;
  };
  struct Operand {
    int32_t scratch = -1;  // a scratch block of this device; -1: this device's own input
    int64_t element = 0;   // first element read (elements of the collective's dtype)
  };
  struct Share {
    std::vector<Copy> copies;   // onto this device, in order
    std::vector<Operand> fold;  // the fold's parts in the ABI's order; empty: no fold
  };
  uint64_t scratch_bytes = 0;  // the size of every scratch block
  int32_t scratch_blocks = 0;  // scratch blocks per device
  bool barrier_between = false;
  std::vector<Share> shares;  // one per device of the call, in its order
};

// The plan for n >= 1 devices and count elements of element_size bytes (count as backend.h
// means it for `kind`; validated by validate_collective, so no product overflows).
CollectivePlan plan_collective(validate::CollectiveKind kind, int32_t n, uint64_t count, uint64_t element_size);

}  // namespace rvl::lower
