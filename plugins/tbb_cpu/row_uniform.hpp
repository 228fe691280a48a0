// Row-uniform hoisting for chains of row reductions (row_chain.cpp).
//
// Note [Row-uniform hoisting]
// In layer norm's epilogue, (x - ACC1 / n) * rsqrt(ACC0 / n + eps) * g + b, nine of the
// seventeen instructions depend on the row alone (ACC, CONST and arithmetic on them), yet the
// block evaluator computes every instruction for every element: most of the kernel's time went
// to recomputing one rsqrt per row R times. Here an instruction list over the full space, whose
// per-row values are the LOADs with arg in [row_lo, row_hi), is split: each row-uniform
// instruction that a per-element one reads (the frontier; never a bare CONST or per-row LOAD,
// which cost nothing) becomes a program over the rows alone, computed once per row into a
// buffer, and a LOAD of that buffer (arg first_new + h) in the list, whose dead instructions are
// then dropped. Exact: the same operations on the same values, only evaluated fewer times.
#pragma once

#include <ravel/backend.h>

#include <cstdint>
#include <vector>

namespace tbbcpu {

struct RowUniform {
  std::vector<rvl_instruction> code;  // over the full space; LOAD first_new + h reads value h
  // Value h: a program over the rows whose LOAD k reads the per-row values of arg row_lo + k.
  std::vector<std::vector<rvl_instruction>> values;
};

RowUniform hoist_row_uniform(const std::vector<rvl_instruction>& code, int32_t row_lo, int32_t row_hi,
                             int32_t first_new);

}  // namespace tbbcpu
