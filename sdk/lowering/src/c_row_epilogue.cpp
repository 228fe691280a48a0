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
//
// Note [Row chains on GPUs]
// A chain (ABI 1.11: layer norm's sum of x, then sum of (x - mean)^2, then the row written) is
// the same walk repeated: the items that own an output reduce stage 0 over its row, make its
// value known to all of them (a work-group's tree root read by every item; one item's own
// value in a serial reduction), round it to the stage's acc_dtype, then reduce stage 1 reading
// it as ACC 1, and so on; the program's own reduction last, then its store or its epilogue.
// Each stage's value lives in a register of every item that needs it: nothing goes through
// global memory and the row is read once per stage, right after the previous read (from cache
// where it fits). chain_reductions() and chain_accs() are what HIP and OpenCL share: the lists
// widened, the dtypes, and which name each ACC index reads.
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

std::vector<ChainReduction> chain_reductions(const validate::Program& p) {
  std::vector<ChainReduction> out;
  auto add = [&](const rvl_instruction* ins, int32_t n, int32_t rop, int32_t value_dt) {
    ChainReduction r;
    r.ins = widen_halves(ins, n);
    r.reduce_op = rop;
    r.value_dtype = value_dt;
    r.list_dtype = r.ins.back().dtype;
    out.push_back(std::move(r));
  };
  for (const validate::Program::Stage& st : p.stages) add(st.ins, st.n_ins, st.reduce_op, st.acc_dtype);
  add(p.ins, p.n_ins, p.reduce_op, p.n_epilogue > 0 ? p.acc_dtype : p.out.dtype);
  return out;
}

std::vector<std::string> chain_accs(const Dialect& d, const validate::Program& p, const std::vector<std::string>& names) {
  std::vector<std::string> out(names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    if (names[k].empty()) continue;
    const int32_t dt = k == 0 ? p.acc_dtype : p.stages[k - 1].acc_dtype;
    out[k] = rvl::dtype_is_half(dt) ? convert(d, RVL_DTYPE_F32, dt, names[k]) : names[k];
  }
  return out;
}

}  // namespace rvl::lower::c
