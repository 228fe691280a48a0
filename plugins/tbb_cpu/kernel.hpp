// Validated, normalised kernels: the SDK validator (<ravel/validate.hpp>, Ravel::validate)
// produces them, using this plugin's buffer registry (plugin.cpp); program.cpp/contraction.cpp run them.
// The invariants a validated View/Program/Contraction guarantees are listed in that header.
#pragma once

#include <ravel/validate.hpp>

#include <cstddef>

namespace tbbcpu {

using rvl::validate::Contraction;
using rvl::validate::Program;
using rvl::validate::View;

void run_program(const Program& p);
// A program that only lays its inputs end to end (a chain of WHEREs over masked LOADs), run as
// copies; false, with nothing done, for any other program (Note [Concatenations]).
bool run_concat(const Program& p);
void run_contraction(const Contraction& c);
// run_program / run_contraction, or for a kernel with f16/bf16 in it, its f32 rewrite
// (half_kernels.cpp, Note [Halves in f32]).
void run_kernel(const Program& p);
void run_kernel(const Contraction& c);
// A program with a row epilogue (ABI 1.10, row_epilogue.cpp; run_kernel sends it there).
void run_with_epilogue(const Program& p);
// No kept axis of extent > 1 after a reduced one of extent > 1 (row_epilogue.cpp): output o
// owns the linear range [o R, (o + 1) R) of the iteration space.
bool reduced_innermost(const Program& p);
// One value per output of p's reduction, at `data`, viewed over p's whole iteration space:
// contiguous over the kept axes, stride 0 along the reduced ones (row_epilogue.cpp).
View row_values(const Program& p, int32_t dtype, std::byte* data);
// A program with reduction stages (ABI 1.11, row_chain.cpp; run_kernel sends it there).
void run_chain(const Program& p);

// A row's LOGSUMEXP state between slices (lse_reduce.cpp, Note [Online log-sum-exp]); T is
// float or double. Start with m = -inf, s = 0.
struct LseRow {
  double m, s;
};
template <class T> void lse_row_fold(LseRow& row, const T* v, int64_t n);
template <class T> T lse_row_result(const LseRow& row);

}  // namespace tbbcpu
