// Chains of row reductions (ABI 1.11) in C-family kernels: what HIP and OpenCL share.
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
