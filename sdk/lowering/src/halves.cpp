// Note [Halves in kernels] (halves.hpp): the f32 rewrite of kernel bodies touching f16/bf16.
#include <ravel/backend.hpp>
#include <ravel/half.hpp>
#include <ravel/lowering/halves.hpp>

namespace rvl::lower {
namespace {

bool is_half(int32_t dt) { return dt == RVL_DTYPE_F16 || dt == RVL_DTYPE_BF16; }

bool any_half(const rvl_instruction* ins, int32_t n) {
  for (int32_t j = 0; j < n; ++j)
    if (is_half(ins[j].dtype)) return true;
  return false;
}

rvl_instruction make_cast(int32_t dt, int32_t src) {
  rvl_instruction i{};
  i.op = RVL_OP_CAST;
  i.dtype = dt;
  i.src[0] = src;
  i.src[1] = i.src[2] = -1;
  return i;
}

// The half nearest to x, as an f32 value (exact).
double rounded(int32_t dt, double x) {
  return dt == RVL_DTYPE_F16 ? rvl::f32_from_f16_bits(rvl::f16_bits_from(x))
                             : rvl::f32_from_bf16_bits(rvl::bf16_bits_from(x));
}

}  // namespace

int32_t compute_dtype(int32_t dt) { return is_half(dt) ? int32_t{RVL_DTYPE_F32} : dt; }

std::vector<rvl_instruction> widen_halves(const rvl_instruction* ins, int32_t n) {
  std::vector<rvl_instruction> code;
  std::vector<int32_t> at(static_cast<size_t>(n));  // old index -> index of its value in `code`
  for (int32_t j = 0; j < n; ++j) {
    rvl_instruction I = ins[j];
    const int arity = rvl::op_info(I.op).arity;
    for (int k = 0; k < arity; ++k) I.src[k] = at[static_cast<size_t>(I.src[k])];
    const int32_t dt = I.dtype;
    const bool last = j == n - 1;
    if (I.op == RVL_OP_LOAD && is_half(dt)) {
      code.push_back(I);
      code.push_back(make_cast(RVL_DTYPE_F32, static_cast<int32_t>(code.size()) - 1));
    } else if (I.op == RVL_OP_CONST && is_half(dt)) {
      I.dtype = RVL_DTYPE_F32;
      I.value.f = rounded(dt, I.value.f);
      code.push_back(I);
    } else if (I.op == RVL_OP_CAST && is_half(dt)) {
      code.push_back(I);  // rounds (its source may be anything: c::convert)
      if (!last) code.push_back(make_cast(RVL_DTYPE_F32, static_cast<int32_t>(code.size()) - 1));
    } else if (I.op == RVL_OP_CAST && code[static_cast<size_t>(I.src[0])].dtype == dt) {
      at[static_cast<size_t>(j)] = I.src[0];  // a half widened to f32 is already f32
      if (last) code.push_back(make_cast(dt, I.src[0]));  // keep the value last (a no-op cast)
      else continue;
    } else {
      I.dtype = compute_dtype(dt);
      code.push_back(I);
    }
    at[static_cast<size_t>(j)] = static_cast<int32_t>(code.size()) - 1;
  }
  return code;
}

validate::Program widened(const validate::Program& p, std::vector<rvl_instruction>& storage) {
  if (!any_half(p.ins, p.n_ins) && !any_half(p.epilogue, p.n_epilogue)) {
    bool half_load = false;
    for (const validate::View& v : p.inputs) half_load |= is_half(v.dtype);
    if (!half_load) return p;
  }
  storage = widen_halves(p.ins, p.n_ins);
  validate::Program w = p;
  w.ins = storage.data();
  w.n_ins = static_cast<int32_t>(storage.size());
  return w;
}

}  // namespace rvl::lower
