// The oneTBB plugin's liveness-based scratch slots (Note [Slot plan], plugins/tbb_cpu/slot_plan.hpp),
// on random SSA programs: each program is run once with one storage cell per instruction (the
// naive reference) and once through the planned slots, and every instruction must read the same
// values either way; no instruction's slot may be one of its sources'; equal CONSTs share a slot
// and exactly one of them owns (fills) it. The evaluator itself is checked end to end by
// ravel-conformance's fused programs, which now run on planned slots.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "slot_plan.hpp"

namespace {

uint64_t next(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return s >> 33;
}

rvl_instruction make_ins(int32_t op, int32_t a, int32_t b, int32_t c) {
  rvl_instruction I{};
  I.op = op;
  I.dtype = RVL_DTYPE_F64;
  I.src[0] = a, I.src[1] = b, I.src[2] = c;
  return I;
}

// Value of instruction j: LOAD -> arg, CONST -> its value, ADD -> a + b, WHERE -> a != 0 ? b : c
// (only the arithmetic's data flow matters here, not the op table's dtype rules).
double apply(const rvl_instruction& I, const double* v) {
  switch (I.op) {
    case RVL_OP_LOAD: return I.arg;
    case RVL_OP_CONST: return I.value.f;
    case RVL_OP_NEG: return -v[0];
    case RVL_OP_ADD: return v[0] + v[1];
    default: return v[0] != 0 ? v[1] : v[2];
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(planned_slots_compute_what_one_cell_per_instruction_computes) {
  uint64_t seed = 7;
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = 1 + static_cast<int>(next(seed) % (trial < 1900 ? 40 : 600));
    std::vector<rvl_instruction> ins;
    for (int j = 0; j < n; ++j) {
      // Sources mostly recent (short live ranges), sometimes far back (long ones), repeated
      // sources allowed (x + x).
      auto pick = [&] {
        const int back = next(seed) % 4 == 0 ? static_cast<int>(next(seed) % j) + 1 : 1 + static_cast<int>(next(seed) % std::min(j, 3));
        return j - back;
      };
      const int kind = j == 0 ? 0 : static_cast<int>(next(seed) % 6);
      if (kind == 0) {
        rvl_instruction I = make_ins(RVL_OP_LOAD, -1, -1, -1);
        I.arg = static_cast<int32_t>(next(seed) % 5);
        ins.push_back(I);
      } else if (kind == 1) {
        rvl_instruction I = make_ins(RVL_OP_CONST, -1, -1, -1);
        I.value.f = static_cast<double>(next(seed) % 3);  // repeats: shared slots
        ins.push_back(I);
      } else if (kind == 2) {
        ins.push_back(make_ins(RVL_OP_NEG, pick(), -1, -1));
      } else if (kind <= 4) {
        ins.push_back(make_ins(RVL_OP_ADD, pick(), pick(), -1));
      } else {
        ins.push_back(make_ins(RVL_OP_WHERE, pick(), pick(), pick()));
      }
    }
    std::vector<uint16_t> slot(n);
    bool owner[RVL_MAX_INSTRUCTIONS];
    const int n_slots = tbbcpu::plan_slots(ins.data(), n, slot.data(), owner);
    BOOST_TEST_REQUIRE(n_slots >= 1);
    BOOST_TEST_REQUIRE(n_slots <= n);

    std::vector<double> cell(n), mem(n_slots, -1e300);
    for (int j = 0; j < n; ++j) {
      BOOST_TEST_REQUIRE(slot[j] < n_slots);
      if (ins[j].op == RVL_OP_CONST && owner[j]) mem[slot[j]] = ins[j].value.f;  // make_scratch
    }
    for (int j = 0; j < n; ++j) {
      const rvl_instruction& I = ins[j];
      double ref[3] = {}, got[3] = {};
      for (int k = 0; k < 3; ++k)
        if (I.src[k] >= 0) {
          BOOST_TEST_REQUIRE(slot[I.src[k]] != slot[j]);  // the loops' __restrict
          ref[k] = cell[I.src[k]];
          got[k] = mem[slot[I.src[k]]];
          BOOST_TEST_REQUIRE(got[k] == ref[k], "trial " << trial << " instruction " << j << " source " << k);
        }
      cell[j] = apply(I, ref);
      if (I.op == RVL_OP_CONST) {
        BOOST_TEST_REQUIRE(mem[slot[j]] == I.value.f);  // filled once, never overwritten
      } else {
        BOOST_TEST_REQUIRE(!owner[j]);
        mem[slot[j]] = apply(I, got);
      }
    }
    BOOST_TEST_REQUIRE(mem[slot[n - 1]] == cell[n - 1]);  // the result is live at the end
  }
}

BOOST_AUTO_TEST_CASE(equal_constants_share_one_owned_slot) {
  std::vector<rvl_instruction> ins;
  for (double v : {1.0, 2.0, 1.0, 1.0}) {
    rvl_instruction I = make_ins(RVL_OP_CONST, -1, -1, -1);
    I.value.f = v;
    ins.push_back(I);
  }
  ins.push_back(make_ins(RVL_OP_ADD, 0, 1, -1));
  ins.push_back(make_ins(RVL_OP_ADD, 4, 3, -1));
  rvl_instruction f32 = make_ins(RVL_OP_CONST, -1, -1, -1);  // same bits, other dtype: own slot
  f32.dtype = RVL_DTYPE_F32;
  f32.value.f = 1.0;
  ins.push_back(f32);
  uint16_t slot[8];
  bool owner[RVL_MAX_INSTRUCTIONS];
  tbbcpu::plan_slots(ins.data(), static_cast<int>(ins.size()), slot, owner);
  BOOST_TEST(slot[0] == slot[2]);
  BOOST_TEST(slot[0] == slot[3]);
  BOOST_TEST(slot[0] != slot[1]);
  BOOST_TEST(slot[6] != slot[0]);
  BOOST_TEST(owner[0]);
  BOOST_TEST(owner[1]);
  BOOST_TEST(!owner[2]);
  BOOST_TEST(!owner[3]);
  BOOST_TEST(owner[6]);
  BOOST_TEST(slot[4] != slot[5]);  // 4 is read by 5
}
