// Liveness-based scratch slots for the block evaluator: Note [Slot plan] in slot_plan.hpp.
#include "slot_plan.hpp"

#include <cstring>

namespace tbbcpu {

int plan_slots(const rvl_instruction* ins, int n, uint16_t* slot, bool* owner) {
  // last[j]: the last instruction reading j (j itself when none reads it).
  int32_t last[RVL_MAX_INSTRUCTIONS];
  uint16_t free_list[RVL_MAX_INSTRUCTIONS];
  bool freed[RVL_MAX_INSTRUCTIONS];
  for (int j = 0; j < n; ++j) {
    last[j] = j;
    freed[j] = false;
    owner[j] = false;
    for (int k = 0; k < 3; ++k)
      if (ins[j].src[k] >= 0) last[ins[j].src[k]] = j;
  }
  int n_slots = 0, n_free = 0;
  auto release = [&](int i) {
    if (freed[i] || ins[i].op == RVL_OP_CONST) return;
    freed[i] = true;
    free_list[n_free++] = slot[i];
  };
  for (int j = 0; j < n; ++j) {
    const rvl_instruction& I = ins[j];
    if (I.op == RVL_OP_CONST) {
      int same = -1;  // looked for among the previous 256 instructions: linear time per program
      for (int i = j > 256 ? j - 256 : 0; i < j && same < 0; ++i)
        if (ins[i].op == RVL_OP_CONST && ins[i].dtype == I.dtype &&
            std::memcmp(&ins[i].value, &I.value, sizeof(I.value)) == 0)
          same = i;
      owner[j] = same < 0;
      slot[j] = same < 0 ? static_cast<uint16_t>(n_slots++) : slot[same];
      continue;
    }
    slot[j] = n_free > 0 ? free_list[--n_free] : static_cast<uint16_t>(n_slots++);
    for (int k = 0; k < 3; ++k)
      if (I.src[k] >= 0 && last[I.src[k]] == j) release(I.src[k]);
    if (last[j] == j && j + 1 < n) release(j);  // dead: nothing reads it
  }
  return n_slots;
}

}  // namespace tbbcpu
