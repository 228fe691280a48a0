// Contractions -> a tiled GEMM kernel with the epilogue fused.
//
// Note [GEMM kernel]
// One block of 256 threads computes a BM x BN tile of C for one batch index (grid z strides
// over batches). Per BK-slice of K it stages A[BM x BK] and B[BK x BN] in shared memory (each
// thread loads BM*BK/256 elements, consecutive threads along whichever axis of the operand is
// contiguous, so both layouts of A and B load coalesced and transposed operands need no copy),
// then each thread accumulates a TM x TN register block from registers (outer products).
// Register rows/columns are split in groups of four, half a tile apart, so a warp's shared
// memory reads hit distinct banks. The tile is lower::gemm_tile's with register blocking:
// 128x128x8 with 8x8 per thread for big f32 problems, 64x64x8 with 4x4 otherwise. Strides, offsets and batch strides (0 = broadcast) are
// baked in. Floats accumulate with FMA (docs/hip.md). The epilogue is the program's SSA with ACC =
// the accumulator, evaluated where each C element is stored; C's view is any non-aliasing view.
//
// Note [Half GEMM]
// f16 and bf16 operands are widened to f32 as the tiles are staged (each element converted once
// per block that reads it, in the global->shared copy that exists anyway), the shared tiles, the
// register blocks and the accumulators are f32 with f32 FMA, the epilogue is the widened program
// (Note [Halves in kernels]) and C is rounded once where it is stored: the CPU's recipe
// (decision 45) and the reference's. No tensor cores (mma/wmma, MFMA) yet: a half GEMM runs at
// the f32 kernel's arithmetic speed and saves half of the operand bytes; matrix-core tiles are
// the next step for half GEMM speed and would keep this contract (f32 accumulate, one rounding).
#include "codegen.hpp"
#include "ssa.hpp"

#include <ravel/backend.hpp>
#include <ravel/lowering/halves.hpp>
#include <ravel/lowering/plan.hpp>

#include <algorithm>
#include <cstdlib>

namespace rvl::hip {

namespace {
std::string S(int64_t x) { return std::to_string(x); }
}  // namespace

KernelSource generate_contraction(const validate::Contraction& c, const Target& t) {
  const int br = c.batch_rank;
  const validate::Program& e = c.epilogue;
  const int32_t T = c.dtype, W = lower::compute_dtype(T);  // W: what tiles and accumulators hold
  const std::string Ty = ctype(T), Wy = ctype(W), Oy = ctype(e.out.dtype);
  int64_t batch = 1;
  for (int d = 0; d < br; ++d) batch *= c.batch_shape[d];
  KernelSource k;
  k.param_types = {"const " + Ty + "*", "const " + Ty + "*"};
  for (const validate::View& v : e.inputs) k.param_types.push_back(std::string("const ") + ctype(v.dtype) + "*");
  k.param_types.push_back(Oy + "*");
  k.summary = "contraction " + std::string(rvl::dtype_name(T)) + " batch " + S(batch) + " M " +
              S(c.m) + " N " + S(c.n) + " K " + S(c.k) + ", epilogue of " + S(e.n_ins);
  if (batch == 0 || c.m == 0 || c.n == 0) return k;  // nothing is stored

  const lower::GemmTile tl = lower::gemm_tile(W, c.m, c.n, t.compute_units, true);
  const std::string I = lower::contraction_fits_32(c, tl) ? "int" : "long long";

  // Index names shared with the epilogue's views: batch axes i0.., then m and n.
  std::vector<std::string> idx;
  for (int d = 0; d < br; ++d) idx.push_back(index_name(d));
  idx.push_back("m");
  idx.push_back("n");
  std::vector<int64_t> cext(c.batch_shape, c.batch_shape + br);
  cext.push_back(c.m);
  cext.push_back(c.n);

  const int64_t sam = c.a.stride[br], sak = c.a.stride[br + 1];
  const int64_t sbk = c.b.stride[br], sbn = c.b.stride[br + 1];
  const bool a_kfast = std::llabs(sak) <= std::llabs(sam);
  const bool b_nfast = std::llabs(sbn) <= std::llabs(sbk);
  const int la = tl.bm * tl.bk / 256, lb = tl.bn * tl.bk / 256;

  std::string b;
  b += "  __shared__ " + Wy + " As[" + S(tl.bk) + "][" + S(tl.bm + 4) + "];\n";
  b += "  __shared__ " + Wy + " Bs[" + S(tl.bk) + "][" + S(tl.bn + 4) + "];\n";
  b += "  const int tid = threadIdx.x, tn = tid % " + S(tl.bn / tl.tn) + ", tm = tid / " +
       S(tl.bn / tl.tn) + ";\n";
  b += "  for (" + I + " bz = blockIdx.z; bz < " + S(batch) + "; bz += gridDim.z) {\n";
  if (br > 0) {
    b += "    " + I + " t_ = bz;\n";
    for (int d = br; d-- > 0;)
      b += "    const " + I + " " + idx[d] + " = t_ % " + S(c.batch_shape[d]) + "; t_ /= " +
           S(c.batch_shape[d]) + ";\n";
    b += "    (void)t_;\n";
  }
  auto base = [&](const validate::View& v) {
    std::string s = "(" + S(v.offset);
    for (int d = 0; d < br; ++d)
      if (v.stride[d] != 0) s += " + " + idx[d] + " * (" + S(v.stride[d]) + ")";
    return s + ")";
  };
  b += "    const " + I + " abase = " + base(c.a) + ", bbase = " + base(c.b) + ";\n";
  b += "    const " + I + " m0 = (" + I + ")blockIdx.y * " + S(tl.bm) + ", n0 = (" + I +
       ")blockIdx.x * " + S(tl.bn) + ";\n";
  b += "    " + Wy + " acc[" + S(tl.tm) + "][" + S(tl.tn) + "];\n";
  b += "#pragma unroll\n    for (int i = 0; i < " + S(tl.tm) + "; ++i)\n#pragma unroll\n"
       "      for (int j = 0; j < " + S(tl.tn) + "; ++j) acc[i][j] = (" + Wy + ")0;\n";
  b += "    for (" + I + " k0 = 0; k0 < " + S(c.k) + "; k0 += " + S(tl.bk) + ") {\n";
  // Stage A and B (zeros outside M, N, K).
  b += "#pragma unroll\n      for (int j = 0; j < " + S(la) + "; ++j) {\n";
  b += "        const int e = tid + j * 256;\n";
  b += a_kfast ? "        const int mm = e / " + S(tl.bk) + ", kk = e % " + S(tl.bk) + ";\n"
               : "        const int mm = e % " + S(tl.bm) + ", kk = e / " + S(tl.bm) + ";\n";
  b += "        const " + I + " gm = m0 + mm, gk = k0 + kk;\n";
  b += "        As[kk][mm] = (gm < " + S(c.m) + " && gk < " + S(c.k) + ") ? " +
       c::convert(c::kHip, W, T, normalise(T, "A[abase + gm * (" + S(sam) + ") + gk * (" + S(sak) + ")]")) +
       " : (" + Wy + ")0;\n";
  b += "      }\n";
  b += "#pragma unroll\n      for (int j = 0; j < " + S(lb) + "; ++j) {\n";
  b += "        const int e = tid + j * 256;\n";
  b += b_nfast ? "        const int nn = e % " + S(tl.bn) + ", kk = e / " + S(tl.bn) + ";\n"
               : "        const int nn = e / " + S(tl.bk) + ", kk = e % " + S(tl.bk) + ";\n";
  b += "        const " + I + " gn = n0 + nn, gk = k0 + kk;\n";
  b += "        Bs[kk][nn] = (gn < " + S(c.n) + " && gk < " + S(c.k) + ") ? " +
       c::convert(c::kHip, W, T, normalise(T, "B[bbase + gk * (" + S(sbk) + ") + gn * (" + S(sbn) + ")]")) +
       " : (" + Wy + ")0;\n";
  b += "      }\n      __syncthreads();\n";
  // Outer products from shared memory.
  const std::string mrow = "(i >> 2) * " + S(tl.bm / 2) + " + tm * 4 + (i & 3)";
  const std::string ncol = "(j >> 2) * " + S(tl.bn / 2) + " + tn * 4 + (j & 3)";
  b += "#pragma unroll\n      for (int kk = 0; kk < " + S(tl.bk) + "; ++kk) {\n";
  b += "        " + Wy + " ra[" + S(tl.tm) + "], rb[" + S(tl.tn) + "];\n";
  b += "#pragma unroll\n        for (int i = 0; i < " + S(tl.tm) + "; ++i) ra[i] = As[kk][" + mrow + "];\n";
  b += "#pragma unroll\n        for (int j = 0; j < " + S(tl.tn) + "; ++j) rb[j] = Bs[kk][" + ncol + "];\n";
  b += "#pragma unroll\n        for (int i = 0; i < " + S(tl.tm) + "; ++i)\n#pragma unroll\n"
       "          for (int j = 0; j < " + S(tl.tn) + "; ++j) acc[i][j] = " +
       multiply_add(T, "acc[i][j]", "ra[i]", "rb[j]") + ";\n";
  b += "      }\n      __syncthreads();\n    }\n";
  // Epilogue and store.
  b += "#pragma unroll\n    for (int i = 0; i < " + S(tl.tm) + "; ++i)\n#pragma unroll\n";
  b += "      for (int j = 0; j < " + S(tl.tn) + "; ++j) {\n";
  b += "        const " + I + " m = m0 + " + mrow + ", n = n0 + " + ncol + ";\n";
  b += "        if (m < " + S(c.m) + " && n < " + S(c.n) + ") {\n";
  std::vector<rvl_instruction> wide;
  const validate::Program we = lower::widened(e, wide);
  std::vector<SpaceView> ev(e.inputs.size() + 1);
  auto to_space = [&](const validate::View& v) { return SpaceView::of(v, size_t(br) + 2); };
  for (size_t a = 0; a < e.inputs.size(); ++a) ev[a] = to_space(e.inputs[a]);
  ev.back() = to_space(e.out);
  const SsaInput ssa(we.ins, we.n_ins, [&](int32_t a) { return load(ev[a], "in" + std::to_string(a), idx, cext); },
                     "acc[i][j]");
  const std::string r = emit_ssa(b, ssa, "          ");
  b += "          out[" + address(ev.back(), idx) + "] = " +
       c::convert(c::kHip, e.out.dtype, we.ins[we.n_ins - 1].dtype, r) + ";\n";
  b += "        }\n      }\n  }\n";

  std::string params = "const " + Ty + "* __restrict__ A, const " + Ty + "* __restrict__ B, ";
  for (size_t a = 0; a < e.inputs.size(); ++a)
    params += std::string("const ") + ctype(e.inputs[a].dtype) + "* __restrict__ in" +
              std::to_string(a) + ", ";
  params += Oy + "* out";
  k.name = lower::hash_name("gemm", params + b);
  k.source = prelude(t) + "extern \"C\" __global__ void __launch_bounds__(256) " + k.name + "(" +
             params + ") {\n" + b + "}\n";
  k.grid[0] = uint64_t((c.n + tl.bn - 1) / tl.bn);
  k.grid[1] = uint64_t((c.m + tl.bm - 1) / tl.bm);
  k.grid[2] = uint64_t(std::min<int64_t>(batch, 65535));
  k.summary += ", tile " + S(tl.bm) + "x" + S(tl.bn) + "x" + S(tl.bk);
  return k;
}

}  // namespace rvl::hip
