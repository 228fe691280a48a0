// Validated, normalised kernels: the SDK validator (<ravel/validate.hpp>, Ravel::validate)
// produces them, using this plugin's buffer registry (plugin.cpp); program.cpp/contraction.cpp run them.
// The invariants a validated View/Program/Contraction guarantees are listed in that header.
#pragma once

#include <ravel/validate.hpp>

namespace tbbcpu {

using rvl::validate::Contraction;
using rvl::validate::Program;
using rvl::validate::View;

void run_program(const Program& p);
void run_contraction(const Contraction& c);

}  // namespace tbbcpu
