// Kernel programs -> HIP C++: the elementwise kernel (grid-stride, vectorised when every view is
// dense) and the reduction kernel (block-level trees with warp shuffles).
//
// Note [Reduction kernels]
// After simplify(), outputs are the kept index space (O elements) and each output combines R
// values. A block of 256 threads is TX outputs x TY reducers:
//  - row mode (TX = 1, TY = 256) when the innermost axis is reduced (softmax rows, sum(-1)): the
//    block's threads stride over one output's values (coalesced), then a warp-shuffle tree in
//    each warp, one partial per warp in shared memory, and a last shuffle tree; warp width is the
//    target's (32 on NVIDIA/RDNA, 64 on CDNA), so the tree needs no 32-bit assumption;
//  - column mode (TX = 32, TY = 8, or TX = 256 for short reductions) when an outer axis is
//    reduced (sum(0)): neighbouring threads own neighbouring outputs, so every load is coalesced;
//    the TY partials meet in a shared-memory tree.
// Every thread executes every shuffle and __syncthreads (loops over outputs are block-uniform),
// which GPUs require and the CPU emulator relies on. Accumulation is in the output dtype
// (docs/abi.md 8); an empty reduced extent stores the identity.
#include "codegen.hpp"
#include "space.hpp"
#include "ssa.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace rvl::hip {

std::string hash_name(const std::string& kind, const std::string& body);  // kernel_name.cpp

namespace {

constexpr int kThreads = 256;

std::string params(const validate::Program& p) {
  std::string s;
  for (size_t k = 0; k < p.inputs.size(); ++k)
    s += std::string("const ") + ctype(p.inputs[k].dtype) + "* __restrict__ in" +
         std::to_string(k) + ", ";
  return s + ctype(p.out.dtype) + "* out";
}

// "const IDX i2 = t % 7; ..." decomposing `linear` over the listed axes (last fastest).
std::string decompose(const std::string& idx_t, const std::string& linear,
                      const std::vector<size_t>& axes, const std::vector<int64_t>& extent,
                      const std::string& indent) {
  if (axes.empty()) return "";
  if (axes.size() == 1)
    return indent + "const " + idx_t + " " + index_name(axes[0]) + " = " + linear + ";\n";
  std::string s = indent + "{ " + idx_t + " t_ = " + linear + ";\n";
  std::string decl;
  for (size_t j = axes.size(); j-- > 0;) {
    const std::string e = std::to_string(extent[axes[j]]);
    const std::string n = index_name(axes[j]);
    s += indent + "  " + n + "_ = " + (j == 0 ? "t_" : "t_ % " + e) + ";" +
         (j == 0 ? "" : " t_ /= " + e + ";") + "\n";
    decl += indent + idx_t + " " + n + "_;\n";
  }
  s += indent + "}\n";
  for (size_t axis : axes)
    s += indent + "const " + idx_t + " " + index_name(axis) + " = " + index_name(axis) + "_;\n";
  return decl + s;
}

std::vector<std::string> index_names(size_t rank) {
  std::vector<std::string> idx;
  for (size_t d = 0; d < rank; ++d) idx.push_back(index_name(d));
  return idx;
}

SsaInput ssa_for(const validate::Program& p, std::function<std::string(int32_t)> load_fn) {
  SsaInput in;
  in.ins = p.ins;
  in.n = p.n_ins;
  in.load = std::move(load_fn);
  in.outline = p.n_ins > 128;
  return in;
}

std::string header(const std::string& name, const validate::Program& p) {
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kThreads) + ") " +
         name + "(" + params(p) + ") {\n";
}

// Every input dense (stride 1, no padding, 4-aligned offset), broadcast (stride 0) or empty,
// and a dense 4-aligned output: four elements per thread and vector loads/stores.
// Long programs are compute-bound and would be unrolled four times: scalar code for them.
bool vectorisable(const Space& s, int32_t n_ins) {
  if (s.extent.size() != 1 || s.extent[0] < 8 || n_ins > 64) return false;
  const SpaceView& out = s.views.back();
  if (out.stride[0] != 1 || out.offset % 4 != 0) return false;
  for (const SpaceView& v : s.views) {
    if (v.empty) continue;
    if (v.lo[0] != 0 || v.hi[0] != s.extent[0]) return false;
    if (v.stride[0] != 0 && (v.stride[0] != 1 || v.offset % 4 != 0))
      return false;
  }
  return true;
}

void elementwise(KernelSource& k, const validate::Program& p, const Space& s, const Target& t) {
  const std::string I = s.wide ? "long long" : "int";
  const int64_t n = product(s.extent);
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
    const std::string r = emit_ssa(b, ssa_for(p, [&](int32_t a) {
      return load(s.views[a], "in" + std::to_string(a), idx, s.extent);
    }), "    ");
    b += "    out[" + address(out, idx) + "] = " + r + ";\n  }\n";
    return b;
  };
  std::string body;
  int64_t work = n;
  if (vectorisable(s, p.n_ins)) {
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
    const std::string r = emit_ssa(body, ssa_for(p, [&](int32_t a) {
      const SpaceView& v = s.views[a];
      if (v.empty) return std::string("(") + ctype(v.dtype) + ")0";
      if (v.stride[0] == 0)
        return normalise(v.dtype, "in" + std::to_string(a) + "[" + std::to_string(v.offset) + "]");
      return normalise(v.dtype, "x" + std::to_string(a) + ".v[u]");
    }), "      ");
    body += "      r.v[u] = " + r + ";\n    }\n";
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

// What a reduction accumulates: one variable folded by combine() (SUM, MAX, PROD), or for
// LOGSUMEXP the (m, s) pair merged by rvl_lse_merge (prelude.cpp), kept in the values' dtype (f32
// values may have an f64 result: only m + log(s) is formed in f64). Every statement below is
// emitted once per variable, so the shuffle tree, the shared-memory stage and the column tree
// are the same code for both.
struct Accumulator {
  std::string type;
  std::vector<std::string> vars, init;
  std::function<std::string(const std::vector<std::string>&, const std::vector<std::string>&)> merge;
  std::string result;
};

Accumulator accumulator(const validate::Program& p) {
  const int32_t odt = p.out.dtype, vdt = p.ins[p.n_ins - 1].dtype;
  Accumulator a;
  if (p.reduce_op == RVL_REDUCE_LOGSUMEXP) {
    a.type = ctype(vdt);
    a.vars = {"am", "as"};
    a.init = {float_bits_literal(vdt, -HUGE_VAL), "(" + a.type + ")0"};
    a.merge = [](const std::vector<std::string>& l, const std::vector<std::string>& r) {
      return "rvl_lse_merge(" + l[0] + ", " + l[1] + ", " + r[0] + ", " + r[1] + ");";
    };
    a.result = std::string(odt != vdt ? "rvl_lse_result_wide" : "rvl_lse_result") + "(am, as)";
    return a;
  }
  a.type = ctype(odt);
  a.vars = {"acc"};
  a.init = {identity(p.reduce_op, odt)};
  const int32_t rop = p.reduce_op;
  a.merge = [rop, odt](const std::vector<std::string>& l, const std::vector<std::string>& r) {
    return l[0] + " = " + combine(rop, odt, l[0], r[0]) + ";";
  };
  a.result = "acc";
  return a;
}

void reduction(KernelSource& k, const validate::Program& p, const Space& s, const Target& t) {
  const std::string I = s.wide ? "long long" : "int";
  std::vector<size_t> kept, red;
  for (size_t d = 0; d < s.extent.size(); ++d) (s.reduced[d] ? red : kept).push_back(d);
  std::vector<int64_t> ke, re;
  for (size_t d : kept) ke.push_back(s.extent[d]);
  for (size_t d : red) re.push_back(s.extent[d]);
  const int64_t O = product(ke), R = product(re);
  const Accumulator A = accumulator(p);
  const std::string& T = A.type;
  const bool row = !s.reduced.empty() && s.reduced.back() && R >= 32;
  const int TX = row ? 1 : (R >= 64 ? 32 : kThreads), TY = kThreads / TX;
  const int ws = t.warp_size, nw = kThreads / ws;
  const int64_t nob = (O + TX - 1) / TX;
  const std::vector<std::string> idx = index_names(s.extent.size());
  const size_t nv = A.vars.size();
  // The accumulator's variables with a prefix and an index: sh_am[i], other_as, ...
  auto named = [&](const std::string& prefix, const std::string& index) {
    std::vector<std::string> out;
    for (const auto& v : A.vars) out.push_back(prefix + v + index);
    return out;
  };

  std::string b;
  for (size_t i = 0; i < nv; ++i)
    b += "  __shared__ " + T + " sh_" + A.vars[i] + "[" + std::to_string(row ? nw : TX * TY) + "];\n";
  b += "  const int tid = threadIdx.x, tx = tid % " + std::to_string(TX) + ", ty = tid / " +
       std::to_string(TX) + ";\n  (void)tx; (void)ty;\n";
  b += "  for (" + I + " ob = blockIdx.x; ob < " + std::to_string(nob) + "; ob += gridDim.x) {\n";
  b += "    const " + I + " o = ob * " + std::to_string(TX) + " + tx;\n";
  b += decompose(I, "o", kept, s.extent, "    ");
  for (size_t i = 0; i < nv; ++i) b += "    " + T + " " + A.vars[i] + " = " + A.init[i] + ";\n";
  b += "    if (o < " + std::to_string(O) + ") {\n";
  b += "      for (" + I + " r = ty; r < " + std::to_string(R) + "; r += " + std::to_string(TY) + ") {\n";
  b += decompose(I, "r", red, s.extent, "        ");
  const std::string v = emit_ssa(b, ssa_for(p, [&](int32_t a) {
    return load(s.views[a], "in" + std::to_string(a), idx, s.extent);
  }), "        ");
  // One element is the partial result (v) for SUM/MAX/PROD and (v, 1) for LOGSUMEXP.
  std::vector<std::string> one{v};
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
  std::vector<std::string> out_idx(s.extent.size());
  for (size_t d : kept) out_idx[d] = idx[d];
  b += "    if (o < " + std::to_string(O) + " && ty == 0) out[" + address(s.views.back(), out_idx) +
       "] = " + A.result + ";\n";
  b += "    __syncthreads();\n  }\n";
  k.name = hash_name("red", b);
  k.source = prelude(t) + header(k.name, p) + b + "}\n";
  k.summary += std::string(row ? " row" : " column") + " O=" + std::to_string(O) +
               " R=" + std::to_string(R);
  k.grid[0] = uint64_t(std::min<int64_t>(std::max<int64_t>(nob, 1), int64_t(t.compute_units) * 16));
}

}  // namespace

KernelSource generate_program(const validate::Program& p, const Target& t) {
  KernelSource k;
  for (const validate::View& v : p.inputs) k.param_types.push_back(std::string("const ") + ctype(v.dtype) + "*");
  k.param_types.push_back(std::string(ctype(p.out.dtype)) + "*");
  std::vector<const validate::View*> views;
  for (const validate::View& v : p.inputs) views.push_back(&v);
  views.push_back(&p.out);
  const Space s = simplify(p.rank, p.shape, p.reduce_axes, views);
  k.summary = std::to_string(p.n_ins) + " instructions, " + std::to_string(p.inputs.size()) +
              " inputs, rank " + std::to_string(p.rank) + " -> " + std::to_string(s.extent.size());
  bool kept_empty = false;
  for (size_t d = 0; d < s.extent.size(); ++d) kept_empty |= !s.reduced[d] && s.extent[d] == 0;
  for (int32_t d = 0; d < p.rank; ++d) kept_empty |= p.shape[d] == 0 && !((p.reduce_axes >> d) & 1u);
  if (kept_empty) {  // nothing is stored (not even identities): no launch
    k.grid[0] = 0;
    return k;
  }
  if (p.reduce_op == RVL_REDUCE_NONE) elementwise(k, p, s, t);
  else reduction(k, p, s, t);
  return k;
}

}  // namespace rvl::hip
