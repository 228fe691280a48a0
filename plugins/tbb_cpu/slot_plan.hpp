// Note [Slot plan]
// The evaluator runs a program one block at a time, each instruction writing a typed array of
// block() values into a scratch slot. Giving every instruction its own slot made the working set
// n_ins x block x 8 bytes: the makemore step's 20-30 instruction programs over [64, 200] touched
// ~200 KiB per block, L2 rather than L1. Slots are therefore assigned by liveness, as a register
// allocator would: an instruction takes a free slot, and a slot is freed after the last
// instruction that reads it. Invariants:
//   * an instruction's slot is never one of its sources' (it is taken before they are freed):
//     the array loops' __restrict holds;
//   * CONST slots are filled once per scratch (make_scratch) and never reused; CONSTs of the
//     same dtype and bit pattern share one slot;
//   * the last instruction's slot is live when compute() returns (nothing follows it).
// A dead instruction (no readers, not the last) gets a slot that is freed at once.
#pragma once

#include <ravel/backend.h>

#include <cstdint>

namespace tbbcpu {

// Fills slot[0, n) for the SSA program ins[0, n); returns the number of slots used (<= n).
// owner[j] is true for the CONST instructions whose slot must be filled (the first of each
// shared value).
int plan_slots(const rvl_instruction* ins, int n, uint16_t* slot, bool* owner);

}  // namespace tbbcpu
