// A row chain run row by row with every piece in vector registers (Note [Row chains in
// registers], row_chain_rows.cpp); row_chain.cpp plans the pieces and calls it first.
#pragma once

#include "kernel.hpp"

#include <ravel/backend.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tbbcpu {

// One piece of a chain after Note [Row-uniform hoisting]: its code over the space, and the
// programs over the rows of the values it reads (computed into value_out before its sweep).
struct RowsPiece {
  const std::vector<rvl_instruction>* code;
  float* acc;  // a part (a SUM): its per-row results; nullptr for the epilogue (writes p.out)
  std::vector<const std::vector<rvl_instruction>*> values;
  std::vector<std::byte*> value_out;
};

struct RowsPlan {
  std::vector<RowsPiece> pieces;     // the parts in order, then the epilogue
  int32_t base = 0;                  // LOAD arg >= base reads row_arrays[arg - base][row]
  std::vector<const std::byte*> row_arrays;
  std::vector<int32_t> row_dtypes;   // of row_arrays
  std::vector<const std::byte*> part_data;  // what a value program's LOAD k reads (part k)
  std::vector<int32_t> part_dtypes;
  int64_t rows = 0, R = 0, per = 1;  // rows, row length, rows per task
};

// Runs the chain when every piece qualifies (the Note); false, with nothing written, otherwise.
bool run_rows_in_registers(const Program& p, const RowsPlan& plan);

}  // namespace tbbcpu
