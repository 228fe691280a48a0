// Note [Bias and relu in registers]
// A convolution's forward epilogue is ACC + bias[m] (C's rows are output channels: Note
// [Leading axes as a broadcast batch] in the core), and relu as the core writes it keeps NaN:
// WHERE(OR(CMPLT(0, v), CMPNE(v, v)), v, 0). The span path (gemm_window_span.cpp) ran it over a
// tile laid out as C with the evaluator's instruction passes (its bool steps keep it out of the
// fused loop), writing C's bytes into the tile and reading them back: relu(conv2d)'s forward was
// ~0.5 ms slower than conv2d's at 128x32x14x14 -> 64 (4.7 against 4.2 ms). Recognised here, the
// kernel applies it to its accumulators and stores C in place: v = acc + b (the same add, in the
// program's operand order), then relu as a compare "not less or equal, unordered" (true for
// v > 0 and for NaN) and a zero-masked move. Bit for bit the passes' result: v for v > 0 and for
// NaN (payload kept), +0.0 for v <= 0 (-0.0 included, as WHERE picks the constant +0.0).
// Accepted: v = ACC, ADD(ACC, bias) or ADD(bias, ACC), optionally followed by that relu, every
// instruction used, the bias a LOAD of f32 that varies along M only and has no mask, or a CONST. In a forward
// and backward the forward's epilogue is relu's derivative times the cotangent r instead,
// WHERE(CMPNE(y, 0), r, 0) over y = relu(v): y != 0 exactly where relu kept v (v > 0 or NaN),
// so the kernel stores r's bits there (a zero-masked load) and +0.0 elsewhere, again bit for bit.
// RAVEL_TBB_BIAS_RELU=0 keeps the tile and the passes.
#include "gemm_bias_relu.hpp"

#include "tuning_env.hpp"

#include <cmath>

namespace tbbcpu {

namespace {

constexpr int32_t kMaxIns = 16;  // the longest form: the select tail after bias and relu (14)

bool enabled() {
  static const bool on = tuning_choice("RAVEL_TBB_BIAS_RELU", "1", {"0", "1"}) == "1";
  return on;
}

bool is_zero_const(const rvl_instruction& I) {
  return I.op == RVL_OP_CONST && I.dtype == RVL_DTYPE_F32 && I.value.f == 0.0 && !std::signbit(I.value.f);
}

}  // namespace

BiasRelu match_bias_relu(const Contraction& c) {
  BiasRelu r;
  const Program& e = c.epilogue;
  const int32_t n = e.n_ins, br = c.batch_rank;
  if (!enabled() || c.dtype != RVL_DTYPE_F32 || n < 2 || n > kMaxIns) return r;
  const rvl_instruction* ins = e.ins;
  bool used[kMaxIns] = {};
  int32_t acc = -1;
  for (int32_t j = 0; j < n; ++j)
    if (ins[j].op == RVL_OP_ACC) {
      if (acc >= 0) return r;
      acc = j;
    }
  if (acc < 0 || ins[acc].dtype != RVL_DTYPE_F32) return r;
  used[acc] = true;
  int32_t v = acc;
  for (int32_t j = 0; j < n; ++j) {  // v = ADD(ACC, LOAD) or ADD(LOAD, ACC)
    const rvl_instruction& I = ins[j];
    if (I.op != RVL_OP_ADD || I.dtype != RVL_DTYPE_F32 || (I.src[0] != acc && I.src[1] != acc)) continue;
    const int32_t l = I.src[0] == acc ? I.src[1] : I.src[0];
    if (l < 0 || l >= n || ins[l].dtype != RVL_DTYPE_F32) return r;
    if (ins[l].op == RVL_OP_CONST) {  // one bias for every row (a bias of zeros folded to a constant)
      r.bias.assign(static_cast<size_t>(c.m), static_cast<float>(ins[l].value.f));
      r.bias_first = I.src[0] == l;
      used[j] = used[l] = true;
      v = j;
      break;
    }
    if (ins[l].op != RVL_OP_LOAD) return r;
    const View& b = e.inputs[static_cast<size_t>(ins[l].arg)];
    if (b.empty || b.dtype != RVL_DTYPE_F32) return r;
    for (int32_t d = 0; d < e.rank; ++d)
      if ((d != br && b.stride[d] != 0) || b.lo[d] != 0 || b.hi[d] != e.shape[d]) return r;
    r.bias.resize(static_cast<size_t>(c.m));
    const float* base = reinterpret_cast<const float*>(b.data);
    for (int64_t m = 0; m < c.m; ++m) r.bias[static_cast<size_t>(m)] = base[b.offset + m * b.stride[br]];
    r.bias_first = I.src[0] == l;
    used[j] = used[l] = true;
    v = j;
    break;
  }
  int32_t last = n - 1;
  // The select tail WHERE(CMPNE(y, 0), r, 0) (CMPNE's operands in either order), y the relu below.
  if (n >= 5) {
    const rvl_instruction& S = ins[last];
    if (S.op == RVL_OP_WHERE && S.dtype == RVL_DTYPE_F32 && S.src[0] >= 0 && S.src[1] >= 0 && S.src[2] >= 0 &&
        ins[S.src[0]].op == RVL_OP_CMPNE && ins[S.src[1]].op == RVL_OP_LOAD && is_zero_const(ins[S.src[2]])) {
      const rvl_instruction& N = ins[S.src[0]];
      const int32_t y = N.src[0] >= 0 && is_zero_const(ins[N.src[0]]) ? N.src[1] : N.src[0];
      const int32_t z = y == N.src[0] ? N.src[1] : N.src[0];
      const View& rv = e.inputs[static_cast<size_t>(ins[S.src[1]].arg)];
      if (y < 0 || y >= S.src[0] || z < 0 || !is_zero_const(ins[z]) || ins[S.src[1]].dtype != RVL_DTYPE_F32 ||
          rv.empty || rv.dtype != RVL_DTYPE_F32 || rv.stride[br + 1] != 1 || rv.data == e.out.data)
        return r;
      for (int32_t d = 0; d < e.rank; ++d)
        if (rv.lo[d] != 0 || rv.hi[d] != e.shape[d]) return r;
      used[last] = used[S.src[0]] = used[S.src[1]] = used[S.src[2]] = used[z] = true;
      r.select = true;
      r.r = rv;
      last = y;
    }
  }
  if (last != v) {  // WHERE(OR(CMPLT(0, v), CMPNE(v, v)), v, 0), the OR's operands in either order
    const rvl_instruction& W = ins[last];
    if (W.op != RVL_OP_WHERE || W.dtype != RVL_DTYPE_F32 || W.src[1] != v || W.src[2] < 0 || !is_zero_const(ins[W.src[2]]))
      return r;
    const int32_t o = W.src[0];
    if (o < 0 || o >= last || ins[o].op != RVL_OP_OR) return r;
    bool lt = false, ne = false;
    for (int k = 0; k < 2; ++k) {
      const int32_t s = ins[o].src[k];
      if (s < 0 || s >= o) return r;
      const rvl_instruction& S = ins[s];
      if (S.op == RVL_OP_CMPLT && S.src[1] == v && S.src[0] >= 0 && is_zero_const(ins[S.src[0]]) && !lt) {
        lt = true;
        used[S.src[0]] = true;
      } else if (S.op == RVL_OP_CMPNE && S.src[0] == v && S.src[1] == v && !ne) {
        ne = true;
      } else {
        return r;
      }
      used[s] = true;
    }
    if (!lt || !ne) return r;
    used[o] = used[last] = used[W.src[2]] = true;
    r.relu = true;
  }
  if (r.select && !r.relu) return BiasRelu{};
  for (int32_t j = 0; j < n; ++j)
    if (!used[j]) return BiasRelu{};
  r.on = r.relu || !r.bias.empty();
  return r;
}

}  // namespace tbbcpu
