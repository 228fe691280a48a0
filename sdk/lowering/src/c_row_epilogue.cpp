// The row epilogue of a reduction (ABI 1.10) in C-family source, shared by HIP and OpenCL C.
//
// Note [Row epilogues on GPUs]
// softmax is e^(x - logsumexp(x)) and layer norm's output (x - mean) * rstd: with the epilogue the
// host hands the reduction and the elementwise work over the same rows to one program. A GPU
// kernel reduces an output's row as before; then the items that reduced it (a work-group for a
// row reduction, one item for a serial one, a column of items for a column one) hold its value
// and walk the row again, evaluating the epilogue at each element and storing it, so the reduced
// value never goes through memory and the row is read right after it was reduced (from cache
// where it fits). ACC is the reduction's value as stored in acc_dtype: a half result is rounded
// to its bits and widened back, so the epilogue sees exactly what the two-kernel form would read.

#include <ravel/backend.hpp>
#include <ravel/lowering/c_source.hpp>
#include <ravel/lowering/halves.hpp>

namespace rvl::lower::c {

std::string row_epilogue(const Dialect& d, const validate::Program& p, const Space& s, const std::string& idx_t,
                         const std::string& first, const std::string& step, const std::string& acc,
                         const std::string& indent, const std::vector<std::string>& stage_accs) {
  const std::vector<rvl_instruction> code = widen_halves(p.epilogue, p.n_epilogue);
  const std::vector<std::string> idx = index_names(s.extent.size());
  SsaInput in(code.data(), static_cast<int32_t>(code.size()),
              [&](int32_t a) { return load(d, s.views[size_t(a)], "in" + std::to_string(a), idx, s.extent); },
              rvl::dtype_is_half(p.acc_dtype) ? convert(d, RVL_DTYPE_F32, p.acc_dtype, acc) : acc);
  if (!p.stages.empty()) {
    std::vector<std::string> names{acc};
    names.insert(names.end(), stage_accs.begin(), stage_accs.end());
    in.accs = chain_accs(d, p, names);
  }
  std::string b = indent + "for (" + idx_t + " re = " + first + "; re < " + std::to_string(s.n_red) +
                  "; re += " + step + ") {\n";
  b += decompose(idx_t, "re", s.axes(true), s.extent, indent + "  ");
  const std::string v = emit_ssa(d, b, in, indent + "  ");
  b += indent + "  out[" + address(s.out(), idx) + "] = " + convert(d, p.out.dtype, code.back().dtype, v) + ";\n";
  return b + indent + "}\n";
}

}  // namespace rvl::lower::c
