// Validated, normalised kernels: the SDK validator (<ravel/validate.hpp>, Ravel::validate)
// produces them, using this plugin's buffer registry (plugin.cpp); execute.cpp runs them.
// The invariants a validated View/Program/Contraction guarantees are listed in that header.
#pragma once

#include <ravel/validate.hpp>

namespace tmpl {

using rvl::validate::Contraction;
using rvl::validate::Program;
using rvl::validate::View;

void run_program(const Program& p);
void run_contraction(const Contraction& c);

}  // namespace tmpl
