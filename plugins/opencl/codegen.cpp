// OpenCL C from the shared lowering. Everything structural (extents, strides, offsets, validity
// ranges, instructions) is baked in as constants, as in the HIP backend, so a kernel is compiled
// once per structure and the driver folds the index arithmetic. Work-groups are kGroup items:
//  - element-wise: a grid-stride loop over the flat index of the simplified space;
//  - reductions (lower::plan_reduction without a column mode, Note [Reduction strategy]): serial
//    (an item per output walks its values in order) or row (a group per output, a tree in local
//    memory; OpenCL 1.2 has no sub-group shuffles); a row epilogue (ABI 1.10) is then run over
//    the output's row by the items that reduced it;
//  - contractions: an item per element of C accumulates over k (multiply_add: fma for floats),
//    then runs the epilogue where the element is stored.
// Loops around barriers are group-uniform, so every item reaches every barrier.
// f16/bf16: the instructions are widened (Note [Halves in kernels] in <ravel/lowering/halves.hpp>),
// values and accumulators are f32, and each output is rounded once where it is stored.
#include "codegen.hpp"

#include <ravel/backend.hpp>
#include <ravel/lowering/c_source.hpp>
#include <ravel/lowering/halves.hpp>
#include <ravel/lowering/plan.hpp>

#include <algorithm>
#include <numeric>

namespace rvl::ocl {
namespace {

namespace c = lower::c;
constexpr const c::Dialect& D = c::kOpenCL;

std::string S(int64_t x) { return std::to_string(x); }
const char* ty(int32_t dt) { return c::ctype(D, dt); }

std::string param(int32_t dtype, const std::string& name, bool is_const) {
  return std::string("__global ") + (is_const ? "const " : "") + ty(dtype) + "* restrict " + name;
}

std::string kernel(KernelSource& k, const std::string& kind, const std::string& params,
                   const std::string& body, int64_t work) {
  k.name = lower::hash_name(kind, params + body);
  k.source = c::helpers(D) + "__kernel __attribute__((reqd_work_group_size(" + S(kGroup) +
             ", 1, 1))) void " + k.name + "(" + params + ") {\n" + body + "}\n";
  k.groups = uint64_t(std::clamp<int64_t>((work + kGroup - 1) / kGroup, 1, 65536));
  return k.name;
}

std::string program_params(const validate::Program& p) {
  std::string s;
  for (size_t a = 0; a < p.inputs.size(); ++a) s += param(p.inputs[a].dtype, "in" + S(int64_t(a)), true) + ", ";
  return s + param(p.out.dtype, "out", false);
}

// LOGSUMEXP's (m, s) or one accumulator (lower::Accumulator), as statements.
struct Acc {
  lower::Accumulator plan;
  int32_t rop, odt;
  std::string type() const { return ty(plan.dtype); }
  std::vector<std::string> vars(const std::string& prefix, const std::string& index) const {
    if (!plan.lse) return {prefix + "acc" + index};
    return {prefix + "am" + index, prefix + "as" + index};
  }
  std::string merge(const std::vector<std::string>& l, const std::vector<std::string>& r) const {
    if (!plan.lse) return l[0] + " = " + c::combine(D, rop, odt, l[0], r[0]) + ";";
    return "{ const rvl_lse_" + type() + " t_ = rvl_lse_merge_" + type() + "(" + l[0] + ", " + l[1] +
           ", " + r[0] + ", " + r[1] + "); " + l[0] + " = t_.m; " + l[1] + " = t_.s; }";
  }
  int32_t out_dtype;  // the stored dtype (a half: the f32 result is rounded once)
  std::string result(const std::vector<std::string>& v) const {
    if (!plan.lse) return c::convert(D, out_dtype, odt, v[0]);
    // LOGSUMEXP over half values accumulates in f32 too and is rounded once here.
    return c::convert(D, out_dtype, odt,
                      std::string(plan.widening(odt) ? "rvl_lse_result_wide(" : "rvl_lse_result_" + type() + "(") +
                          v[0] + ", " + v[1] + ")");
  }
};

}  // namespace

KernelSource generate_program(const validate::Program& given) {
  KernelSource k;
  std::vector<rvl_instruction> wide;
  const validate::Program p = lower::widened(given, wide);
  const int32_t value_dt = p.ins[p.n_ins - 1].dtype;  // f32 where a half output is rounded
  const lower::Space s = lower::simplify(p);
  k.summary = S(p.n_ins) + " instructions, " + S(int64_t(p.inputs.size())) + " inputs, rank " +
              S(p.rank) + " -> " + S(int64_t(s.extent.size()));
  if (s.n_out == 0) return k;  // nothing is stored
  const std::string I = s.wide ? "long" : "int";
  const std::vector<std::string> idx = c::index_names(s.extent.size());
  auto load = [&](int32_t a) { return c::load(D, s.views[size_t(a)], "in" + S(a), idx, s.extent); };
  std::string b;
  if (p.reduce_op == RVL_REDUCE_NONE) {
    std::vector<size_t> all(s.extent.size());
    std::iota(all.begin(), all.end(), size_t(0));
    b += "  for (" + I + " g = (" + I + ")get_global_id(0); g < " + S(s.n_out) + "; g += (" + I +
         ")get_global_size(0)) {\n";
    b += c::decompose(I, "g", all, s.extent, "    ");
    const std::string r = c::emit_ssa(D, b, c::SsaInput(p.ins, p.n_ins, load), "    ");
    b += "    out[" + c::address(s.out(), idx) + "] = " + c::convert(D, p.out.dtype, value_dt, r) + ";\n  }\n";
    kernel(k, "ew", program_params(p), b, s.n_out);
    return k;
  }
  // With a row epilogue (ABI 1.10) the reduction's value has acc_dtype and is not stored: the
  // items that made it run the epilogue over its row (Note [Row epilogues on GPUs]). A chain
  // (ABI 1.11) reduces its stages first, each one's value kept by every item that owns the
  // output and read as ACC k by the later lists (Note [Row chains on GPUs]).
  const bool epilogue = p.n_epilogue > 0;
  const std::vector<c::ChainReduction> chain = c::chain_reductions(given);
  const lower::ReducePlan plan = lower::plan_reduction(s, kGroup, false);
  const bool row = plan.kind == lower::ReducePlan::Kind::Row;
  auto acc_of = [&](const c::ChainReduction& R) {
    const int32_t cdt = lower::compute_dtype(R.value_dtype);
    return Acc{lower::accumulator(R.reduce_op, cdt, R.list_dtype), R.reduce_op, cdt, R.value_dtype};
  };
  // A single reduction keeps its names (acc, sh_acc, ...); a chain's k-th is c<k>_acc, ...
  auto prefix = [&](size_t j) { return chain.size() > 1 ? "c" + S(int64_t(j)) + "_" : std::string(); };
  std::vector<std::string> out_idx(s.extent.size());
  for (size_t d : s.axes(false)) out_idx[d] = idx[d];
  if (row)
    for (size_t j = 0; j < chain.size(); ++j)
      for (const std::string& v : acc_of(chain[j]).vars("sh_" + prefix(j), "[" + S(kGroup) + "]"))
        b += "  __local " + acc_of(chain[j]).type() + " " + v + ";\n";
  b += "  const int tid = get_local_id(0);\n";
  b += row ? "  for (" + I + " o = (" + I + ")get_group_id(0); o < " + S(s.n_out) + "; o += (" + I +
                 ")get_num_groups(0)) {\n"
           : "  for (" + I + " o = (" + I + ")get_global_id(0); o < " + S(s.n_out) + "; o += (" + I +
                 ")get_global_size(0)) {\n";
  b += c::decompose(I, "o", s.axes(false), s.extent, "    ");
  // names[j]: the variable holding ACC j's value once it is known (j >= 1: stage j - 1).
  std::vector<std::string> names(chain.size());
  for (size_t j = 0; j < chain.size(); ++j) {
    const c::ChainReduction& R = chain[j];
    const Acc A = acc_of(R);
    const std::string pre = prefix(j);
    const std::vector<std::string> vars = A.vars(pre, "");
    for (int i = 0; i < A.plan.count(); ++i)
      b += "    " + A.type() + " " + vars[size_t(i)] + " = " + c::literal(D, A.plan.dtype, A.plan.init[i]) + ";\n";
    b += "    for (" + I + " r = " + (row ? "tid" : "0") + "; r < " + S(s.n_red) + "; r += " +
         (row ? S(kGroup) : "1") + ") {\n";
    b += c::decompose(I, "r", s.axes(true), s.extent, "      ");
    c::SsaInput in(R.ins.data(), int32_t(R.ins.size()), load);
    if (!p.stages.empty()) in.accs = c::chain_accs(D, p, names);
    const std::string v = c::emit_ssa(D, b, in, "      ");
    // One element: (v), or (v, 1) for LOGSUMEXP; a program ending in a CAST to a half yields its
    // bits, widened again to accumulate in f32.
    std::vector<std::string> one{A.plan.lse ? v : c::convert(D, A.odt, R.list_dtype, v)};
    if (A.plan.lse) one.push_back("(" + A.type() + ")1");
    b += "      " + A.merge(vars, one) + "\n    }\n";
    std::vector<std::string> value = vars;
    if (row) {
      // The barrier before the first store keeps the previous output's readers ahead of it.
      b += "    barrier(CLK_LOCAL_MEM_FENCE);\n";
      const std::vector<std::string> here = A.vars("sh_" + pre, "[tid]");
      for (int i = 0; i < A.plan.count(); ++i) b += "    " + here[size_t(i)] + " = " + vars[size_t(i)] + ";\n";
      b += "    barrier(CLK_LOCAL_MEM_FENCE);\n";
      b += "    for (int h = " + S(kGroup / 2) + "; h > 0; h >>= 1) {\n";
      b += "      if (tid < h) " + A.merge(here, A.vars("sh_" + pre, "[tid + h]")) + "\n";
      b += "      barrier(CLK_LOCAL_MEM_FENCE);\n    }\n";
      value = A.vars("sh_" + pre, "[0]");
    }
    if (j + 1 < chain.size()) {  // a stage: every item keeps its value, rounded to its acc_dtype
      names[j + 1] = "accv" + S(int64_t(j + 1));
      b += "    const " + std::string(ty(R.value_dtype)) + " " + names[j + 1] + " = " + A.result(value) + ";\n";
    } else if (epilogue) {
      const std::vector<std::string> stage_names(names.begin() + 1, names.end());
      b += "    const " + std::string(ty(R.value_dtype)) + " accv = " + A.result(value) + ";\n" +
           c::row_epilogue(D, p, s, I, row ? "tid" : "0", row ? S(kGroup) : "1", "accv", "    ", stage_names);
    } else {
      b += std::string(row ? "    if (tid == 0) " : "    ") + "out[" + c::address(s.out(), out_idx) +
           "] = " + A.result(value) + ";\n";
    }
  }
  b += "  }\n";
  k.summary += std::string(" ") + lower::reduce_kind_name(plan.kind) + " O=" + S(s.n_out) + " R=" + S(s.n_red);
  kernel(k, row ? "rrow" : "rser", program_params(p), b, row ? s.n_out * kGroup : s.n_out);
  return k;
}

KernelSource generate_contraction(const validate::Contraction& cn) {
  KernelSource k;
  const int br = cn.batch_rank;
  const validate::Program& e = cn.epilogue;
  const int32_t T = cn.dtype, W = lower::compute_dtype(T);  // halves accumulate in f32
  std::vector<int64_t> cext(cn.batch_shape, cn.batch_shape + br);
  int64_t batch = 1;
  for (int64_t x : cext) batch *= x;
  cext.push_back(cn.m);
  cext.push_back(cn.n);
  const int64_t work = batch * cn.m * cn.n;
  k.summary = "contraction " + std::string(rvl::dtype_name(T)) + " batch " + S(batch) + " M " +
              S(cn.m) + " N " + S(cn.n) + " K " + S(cn.k);
  if (work == 0) return k;
  const std::string I = lower::contraction_fits_32(cn, lower::kPlainTile) ? "int" : "long";
  // Index names shared with the epilogue's views: batch axes i0.., then m and n.
  std::vector<std::string> idx = c::index_names(size_t(br));
  idx.push_back("m");
  idx.push_back("n");
  auto view = [&](const validate::View& v) { return lower::SpaceView::of(v, size_t(br) + 2); };
  std::vector<size_t> batch_axes(size_t(br) + 2);
  std::iota(batch_axes.begin(), batch_axes.end(), size_t(0));
  std::string b = "  for (" + I + " g = (" + I + ")get_global_id(0); g < " + S(work) + "; g += (" +
                  I + ")get_global_size(0)) {\n";
  b += c::decompose(I, "g", batch_axes, cext, "    ");  // i0.., then i{br} = m, i{br+1} = n
  b += "    const " + I + " m = " + c::index_name(size_t(br)) + ", n = " + c::index_name(size_t(br) + 1) + ";\n";
  // A over [batch.., M, K] and B over [batch.., K, N]: the k axis takes the matrix's place.
  std::vector<std::string> aidx(idx.begin(), idx.end() - 1), bidx = aidx;
  aidx.back() = "m", aidx.push_back("kk");
  bidx.back() = "kk", bidx.push_back("n");
  b += "    " + std::string(ty(W)) + " acc = (" + ty(W) + ")0;\n";
  b += "    for (" + I + " kk = 0; kk < " + S(cn.k) + "; ++kk)\n      acc = " +
       c::multiply_add(D, W, "acc", c::convert(D, W, T, c::normalise(T, "A[" + c::address(view(cn.a), aidx) + "]")),
                       c::convert(D, W, T, c::normalise(T, "B[" + c::address(view(cn.b), bidx) + "]"))) + ";\n";
  std::vector<lower::SpaceView> ev;
  for (const validate::View& v : e.inputs) ev.push_back(view(v));
  std::vector<rvl_instruction> wide;
  const validate::Program we = lower::widened(e, wide);
  const c::SsaInput in(we.ins, we.n_ins, [&](int32_t a) { return c::load(D, ev[size_t(a)], "in" + S(a), idx, cext); },
                       "acc");
  const std::string r = c::emit_ssa(D, b, in, "    ");
  b += "    out[" + c::address(view(e.out), idx) + "] = " +
       c::convert(D, e.out.dtype, we.ins[we.n_ins - 1].dtype, r) + ";\n  }\n";
  std::string params = param(T, "A", true) + ", " + param(T, "B", true) + ", ";
  for (size_t a = 0; a < e.inputs.size(); ++a) params += param(e.inputs[a].dtype, "in" + S(int64_t(a)), true) + ", ";
  params += param(e.out.dtype, "out", false);
  kernel(k, "mm", params, b, work);
  return k;
}

}  // namespace rvl::ocl
