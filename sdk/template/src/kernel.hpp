// Validated, normalised kernels: what validate.cpp produces and program.cpp/contraction.cpp run.
//
// Invariants once a Program/Contraction exists (established by validate.cpp):
//  - every View addresses only elements inside its buffer for every index of its valid box;
//  - lo/hi are clamped to [0, extent], so "valid" is simply lo[d] <= i[d] < hi[d];
//  - `empty` views have an empty valid box: every element reads as 0, nothing is addressed;
//  - instructions are in SSA order with op/dtype combinations checked, the last one's dtype is the
//    output dtype; output views have full validity, stride 0 on reduced axes, and no aliasing.
#pragma once

#include <ravel/backend.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tmpl {

struct View {
  std::byte* data = nullptr;  // buffer base address
  int32_t dtype = 0;
  bool empty = false;
  int64_t offset = 0;
  int64_t stride[RVL_MAX_RANK] = {};
  int64_t lo[RVL_MAX_RANK] = {};
  int64_t hi[RVL_MAX_RANK] = {};
};

struct Program {
  int32_t rank = 0;
  int64_t shape[RVL_MAX_RANK] = {};
  std::vector<View> inputs;
  const rvl_instruction* ins = nullptr;  // borrowed from the caller for the duration of the call
  int32_t n_ins = 0;
  int32_t reduce_op = RVL_REDUCE_NONE;
  uint32_t reduce_axes = 0;
  View out;
};

struct Contraction {
  int32_t dtype = 0;
  int32_t batch_rank = 0;
  int64_t batch_shape[RVL_MAX_RANK] = {};
  int64_t m = 0, n = 0, k = 0;
  View a, b;             // rank batch_rank + 2, [batch.., M, K] and [batch.., K, N]
  Program epilogue;      // iteration space [batch.., M, N]; output is C; n_ins == 0: no epilogue
};

Program validate_program(const rvl_program* p);
Contraction validate_contraction(const rvl_contraction* c);

void run_program(const Program& p);
void run_contraction(const Contraction& c);

}  // namespace tmpl
