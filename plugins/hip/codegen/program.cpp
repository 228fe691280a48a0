// Kernel programs -> HIP C++: the elementwise kernel (grid-stride, vectorised when every view is
// dense) and the reduction kernel (block-level trees with warp shuffles). What to generate is
// decided by the shared lowering (<ravel/lowering/plan.hpp>); this file renders it.
//
// Note [Reduction kernels]
// lower::plan_reduction (Note [Reduction strategy]) makes a block of 256 threads TX outputs x
// TY reducers. Rendered here:
//  - row: the block's threads stride over one output's values (coalesced), then a warp-shuffle
//    tree in each warp, one partial per warp in shared memory, and a last shuffle tree; warp
//    width is the target's (32 on NVIDIA/RDNA, 64 on CDNA), so the tree needs no 32-bit
//    assumption;
//  - column (TX = 32, TY = 8) and serial (TX = 256, TY = 1): neighbouring threads own
//    neighbouring outputs, so every load is coalesced; the TY partials meet in a shared-memory
//    tree.
// Every thread executes every shuffle and __syncthreads (loops over outputs are block-uniform),
// which GPUs require and the CPU emulator relies on. Accumulation is in the output dtype
// (docs/abi.md 8); an empty reduced extent stores the identity. f16/bf16 programs arrive widened
// (Note [Halves in kernels] in <ravel/lowering/halves.hpp>): halves are loaded as their bits,
// computed and accumulated in f32, and rounded once where the output is stored (convert).
#include "codegen.hpp"
#include "ssa.hpp"

#include <ravel/lowering/halves.hpp>
#include <ravel/lowering/plan.hpp>

#include <algorithm>
#include <functional>

namespace rvl::hip {

using lower::hash_name;

namespace {

constexpr int kThreads = 256;

std::string params(const validate::Program& p) {
  std::string s;
  for (size_t k = 0; k < p.inputs.size(); ++k)
    s += std::string("const ") + ctype(p.inputs[k].dtype) + "* __restrict__ in" +
         std::to_string(k) + ", ";
  return s + ctype(p.out.dtype) + "* out";
}

std::string header(const std::string& name, const validate::Program& p) {
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kThreads) + ") " +
         name + "(" + params(p) + ") {\n";
}

// The program's last value (f32 where a widened program has a half output) as the output's dtype.
std::string store(int32_t out_dtype, const validate::Program& p, const std::string& value) {
  return c::convert(c::kHip, out_dtype, p.ins[p.n_ins - 1].dtype, value);
}

void elementwise(KernelSource& k, const validate::Program& p, const Space& s, const Target& t) {
  const std::string I = s.wide ? "long long" : "int";
  const int64_t n = s.n_out;
  const std::vector<std::string> idx = index_names(s.extent.size());
  std::vector<size_t> all(s.extent.size());
  for (size_t d = 0; d < all.size(); ++d) all[d] = d;
  const size_t nin = p.inputs.size();
  const SpaceView& out = s.views.back();
  auto scalar_loop = [&](const std::string& start) {
    std::string b = "  for (" + I + " g = " + start + " + (" + I + ")blockIdx.x * " +
                    std::to_string(kThreads) + " + threadIdx.x; g < " + std::to_string(n) +
                    "; g += (" + I + ")gridDim.x * " + std::to_string(kThreads) + ") {\n";
    b += decompose(I, "g", all, s.extent, "    ");
    const std::string r = emit_ssa(b, SsaInput(p.ins, p.n_ins, [&](int32_t a) {
      return load(s.views[a], "in" + std::to_string(a), idx, s.extent);
    }), "    ");
    b += "    out[" + address(out, idx) + "] = " + store(out.dtype, p, r) + ";\n  }\n";
    return b;
  };
  std::string body;
  int64_t work = n;
  if (lower::vector_width(s, p.n_ins) == 4) {
    const int64_t nq = n / 4;
    work = nq;
    body += "  for (" + I + " q = (" + I + ")blockIdx.x * " + std::to_string(kThreads) +
            " + threadIdx.x; q < " + std::to_string(nq) + "; q += (" + I + ")gridDim.x * " +
            std::to_string(kThreads) + ") {\n";
    for (size_t a = 0; a < nin; ++a) {
      const SpaceView& v = s.views[a];
      if (v.empty || v.stride[0] == 0) continue;
      body += "    const rvl_vec4<" + std::string(ctype(v.dtype)) + "> x" + std::to_string(a) +
              " = *(const rvl_vec4<" + ctype(v.dtype) + ">*)(in" + std::to_string(a) + " + " +
              std::to_string(v.offset) + " + 4 * q);\n";
    }
    body += "    rvl_vec4<" + std::string(ctype(out.dtype)) + "> r;\n";
    body += "#pragma unroll\n    for (int u = 0; u < 4; ++u) {\n";
    const std::string r = emit_ssa(body, SsaInput(p.ins, p.n_ins, [&](int32_t a) {
      const SpaceView& v = s.views[a];
      if (v.empty) return std::string("(") + ctype(v.dtype) + ")0";
      if (v.stride[0] == 0)
        return normalise(v.dtype, "in" + std::to_string(a) + "[" + std::to_string(v.offset) + "]");
      return normalise(v.dtype, "x" + std::to_string(a) + ".v[u]");
    }), "      ");
    body += "      r.v[u] = " + store(out.dtype, p, r) + ";\n    }\n";
    body += "    *(rvl_vec4<" + std::string(ctype(out.dtype)) + ">*)(out + " +
            std::to_string(out.offset) + " + 4 * q) = r;\n  }\n";
    if (n % 4) body += scalar_loop(std::to_string(nq * 4));
    k.summary += " vec4";
  } else {
    body += scalar_loop("0");
  }
  k.name = hash_name("ew", body);
  k.source = prelude(t) + header(k.name, p) + body + "}\n";
  const int64_t blocks = std::max<int64_t>(1, (work + kThreads - 1) / kThreads);
  k.grid[0] = uint64_t(std::min<int64_t>(blocks, int64_t(t.compute_units) * 32));
}

// The accumulator (lower::Accumulator) as text: one variable folded by combine() (SUM, MAX,
// PROD), or LOGSUMEXP's (m, s) merged by rvl_lse_merge_T (lower::c::helpers). Every statement is
// emitted once per variable, so the shuffle tree, the shared-memory stage and the column tree
// are the same code for both. A chain's reductions (ABI 1.11) get a prefix each (c0_acc, ...).
struct Accumulator {
  std::string type;
  std::vector<std::string> vars, init;
  std::function<std::string(const std::vector<std::string>&, const std::vector<std::string>&)> merge;
  std::string result;
};

// One reduction of the chain (the program's own when it has no stages); its value has dtype
// R.value_dtype (the output's, or acc_dtype with a row epilogue or in a stage).
Accumulator accumulator(const c::ChainReduction& R, const std::string& prefix) {
  const int32_t odt = lower::compute_dtype(R.value_dtype), rop = R.reduce_op;
  const lower::Accumulator plan = lower::accumulator(rop, odt, R.list_dtype);
  Accumulator a;
  a.type = ctype(plan.dtype);
  a.vars = plan.lse ? std::vector<std::string>{prefix + "am", prefix + "as"} : std::vector<std::string>{prefix + "acc"};
  for (int i = 0; i < plan.count(); ++i) a.init.push_back(literal(plan.dtype, plan.init[i]));
  a.merge = [=](const std::vector<std::string>& l, const std::vector<std::string>& r) {
    if (!plan.lse) return l[0] + " = " + combine(rop, odt, l[0], r[0]) + ";";
    const std::string T = ctype(plan.dtype);
    return "{ const rvl_lse_" + T + " t_ = rvl_lse_merge_" + T + "(" + l[0] + ", " + l[1] + ", " +
           r[0] + ", " + r[1] + "); " + l[0] + " = t_.m; " + l[1] + " = t_.s; }";
  };
  const std::string m = a.vars[0], sv = plan.lse ? a.vars[1] : "";
  a.result = !plan.lse ? m
             : plan.widening(odt) ? "rvl_lse_result_wide(" + m + ", " + sv + ")"
                                  : "rvl_lse_result_" + a.type + "(" + m + ", " + sv + ")";
  return a;
}

void reduction(KernelSource& k, const validate::Program& p, const validate::Program& given, const Space& s,
               const Target& t) {
  const std::string I = s.wide ? "long long" : "int";
  const std::vector<size_t> kept = s.axes(false), red = s.axes(true);
  const int64_t O = s.n_out, R = s.n_red;
  const bool epilogue = p.n_epilogue > 0;  // ABI 1.10 (Note [Row epilogues on GPUs])
  // ABI 1.11: a chain's stages first, then the program's own reduction (Note [Row chains on GPUs]).
  const std::vector<c::ChainReduction> chain = c::chain_reductions(given);
  std::vector<Accumulator> accs;
  for (size_t j = 0; j < chain.size(); ++j)
    accs.push_back(accumulator(chain[j], chain.size() > 1 ? "c" + std::to_string(j) + "_" : ""));
  const lower::ReducePlan plan = lower::plan_reduction(s, kThreads, true);
  const bool row = plan.kind == lower::ReducePlan::Kind::Row;
  const int TX = plan.tx, TY = plan.ty;
  const int ws = t.warp_size, nw = kThreads / ws;
  const int64_t nob = (O + TX - 1) / TX;
  const std::vector<std::string> idx = index_names(s.extent.size());

  std::string b;
  for (const Accumulator& A : accs)
    for (const std::string& v : A.vars)
      b += "  __shared__ " + A.type + " sh_" + v + "[" + std::to_string(row ? nw : TX * TY) + "];\n";
  b += "  const int tid = threadIdx.x, tx = tid % " + std::to_string(TX) + ", ty = tid / " +
       std::to_string(TX) + ";\n  (void)tx; (void)ty;\n";
  b += "  for (" + I + " ob = blockIdx.x; ob < " + std::to_string(nob) + "; ob += gridDim.x) {\n";
  b += "    const " + I + " o = ob * " + std::to_string(TX) + " + tx;\n";
  b += decompose(I, "o", kept, s.extent, "    ");
  // names[j]: the variable holding ACC j's value once every thread of the output has it
  // (j >= 1: stage j - 1; 0: the program's own, "accv", read by the epilogue only).
  std::vector<std::string> names(chain.size());
  for (size_t j = 0; j < chain.size(); ++j) {
    const c::ChainReduction& CR = chain[j];
    const Accumulator& A = accs[j];
    const std::string& T = A.type;
    const size_t nv = A.vars.size();
    // The accumulator's variables with a prefix and an index: sh_am[i], other_as, ...
    auto named = [&](const std::string& prefix, const std::string& index) {
      std::vector<std::string> out;
      for (const auto& v : A.vars) out.push_back(prefix + v + index);
      return out;
    };
    for (size_t i = 0; i < nv; ++i) b += "    " + T + " " + A.vars[i] + " = " + A.init[i] + ";\n";
    b += "    if (o < " + std::to_string(O) + ") {\n";
    b += "      for (" + I + " r = ty; r < " + std::to_string(R) + "; r += " + std::to_string(TY) + ") {\n";
    b += decompose(I, "r", red, s.extent, "        ");
    SsaInput in(CR.ins.data(), int32_t(CR.ins.size()), [&](int32_t a) {
      return load(s.views[a], "in" + std::to_string(a), idx, s.extent);
    });
    if (!p.stages.empty()) in.accs = c::chain_accs(c::kHip, p, names);
    const std::string v = emit_ssa(b, in, "        ");
    // One element is the partial result (v) for SUM/MAX/PROD and (v, 1) for LOGSUMEXP.
    // (A program ending in a CAST to a half yields its bits: widened again to accumulate in f32.)
    std::vector<std::string> one{nv == 2 ? v : c::convert(c::kHip, lower::compute_dtype(CR.value_dtype), CR.list_dtype, v)};
    if (nv == 2) one.push_back("(" + T + ")1");
    b += "        " + A.merge(A.vars, one) + "\n      }\n    }\n";
    if (row) {
      // The shuffles go into temporaries first: combine() may name an operand twice (integer MAX
      // is a ?:), and a shuffle must be executed by every lane, unconditionally.
      std::string tree = "    for (int d = " + std::to_string(ws / 2) + "; d > 0; d >>= 1) {\n";
      for (size_t i = 0; i < nv; ++i)
        tree += "      const " + T + " other_" + A.vars[i] + " = rvl_shfl_down(" + A.vars[i] + ", d);\n";
      tree += "      " + A.merge(A.vars, named("other_", "")) + "\n    }\n";
      b += tree;
      for (size_t i = 0; i < nv; ++i)
        b += "    if (tid % " + std::to_string(ws) + " == 0) sh_" + A.vars[i] + "[tid / " + std::to_string(ws) +
             "] = " + A.vars[i] + ";\n";
      b += "    __syncthreads();\n";
      for (size_t i = 0; i < nv; ++i)
        b += "    " + A.vars[i] + " = tid < " + std::to_string(nw) + " ? sh_" + A.vars[i] + "[tid] : " + A.init[i] + ";\n";
      b += tree;
    } else if (TY > 1) {
      const std::string here = "[ty * " + std::to_string(TX) + " + tx]";
      for (size_t i = 0; i < nv; ++i) b += "    sh_" + A.vars[i] + here + " = " + A.vars[i] + ";\n";
      b += "    __syncthreads();\n";
      b += "    for (int s = " + std::to_string(TY / 2) + "; s > 0; s >>= 1) {\n";
      b += "      if (ty < s) " + A.merge(named("sh_", here), named("sh_", "[(ty + s) * " + std::to_string(TX) + " + tx]")) +
           "\n      __syncthreads();\n    }\n";
      for (size_t i = 0; i < nv; ++i) b += "    " + A.vars[i] + " = sh_" + A.vars[i] + "[tx];\n";
    }
    const std::string value =
        c::convert(c::kHip, CR.value_dtype, lower::compute_dtype(CR.value_dtype), A.result);
    const bool last = j + 1 == chain.size();
    if (!last || epilogue) {
      // A row's result is in thread 0 only: shared memory hands it to the block (only thread 0
      // read sh_[0] in the tree). Columns' results are in every ty already.
      if (row) {
        for (size_t i = 0; i < nv; ++i) b += "    if (tid == 0) sh_" + A.vars[i] + "[0] = " + A.vars[i] + ";\n";
        b += "    __syncthreads();\n";
        for (size_t i = 0; i < nv; ++i) b += "    " + A.vars[i] + " = sh_" + A.vars[i] + "[0];\n";
      }
    }
    if (!last) {  // a stage: every thread keeps its value, rounded to its acc_dtype
      names[j + 1] = "accv" + std::to_string(j + 1);
      b += "    const " + std::string(ctype(CR.value_dtype)) + " " + names[j + 1] + " = " + value + ";\n";
    } else if (epilogue) {
      const std::vector<std::string> stage_names(names.begin() + 1, names.end());
      b += "    if (o < " + std::to_string(O) + ") {\n      const " + ctype(CR.value_dtype) + " accv = " + value + ";\n";
      b += c::row_epilogue(c::kHip, p, s, I, row ? "tid" : "ty", std::to_string(row ? kThreads : TY), "accv", "      ",
                           stage_names);
      b += "    }\n";
    } else {
      std::vector<std::string> out_idx(s.extent.size());
      for (size_t d : kept) out_idx[d] = idx[d];
      b += "    if (o < " + std::to_string(O) + " && ty == 0) out[" + address(s.views.back(), out_idx) + "] = " + value + ";\n";
    }
  }
  b += "    __syncthreads();\n  }\n";
  k.name = hash_name("red", b);
  k.source = prelude(t) + header(k.name, p) + b + "}\n";
  k.summary += std::string(" ") + lower::reduce_kind_name(plan.kind) + " O=" + std::to_string(O) +
               " R=" + std::to_string(R);
  k.grid[0] = uint64_t(std::min<int64_t>(std::max<int64_t>(nob, 1), int64_t(t.compute_units) * 16));
}

}  // namespace

KernelSource generate_program(const validate::Program& p, const Target& t) {
  KernelSource k;
  for (const validate::View& v : p.inputs) k.param_types.push_back(std::string("const ") + ctype(v.dtype) + "*");
  k.param_types.push_back(std::string(ctype(p.out.dtype)) + "*");
  const Space s = lower::simplify(p);
  k.summary = std::to_string(p.n_ins) + " instructions, " + std::to_string(p.inputs.size()) +
              " inputs, rank " + std::to_string(p.rank) + " -> " + std::to_string(s.extent.size());
  if (s.n_out == 0) {  // nothing is stored (not even identities): no launch
    k.grid[0] = 0;
    return k;
  }
  std::vector<rvl_instruction> wide;
  const validate::Program w = lower::widened(p, wide);
  if (p.reduce_op == RVL_REDUCE_NONE) elementwise(k, w, s, t);
  else reduction(k, w, p, s, t);
  return k;
}

}  // namespace rvl::hip
