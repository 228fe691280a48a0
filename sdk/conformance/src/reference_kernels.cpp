// Reference evaluation of whole kernels: programs (with reductions) and contractions.
// One element at a time from its multi-index; accumulators are f64 / wrapping int64.
#include <ravel/conformance/reference.hpp>
#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace rvl::ref {
namespace {

int64_t address(const rvl_view& v, int rank, const int64_t* idx) {
  int64_t a = v.offset;
  for (int d = 0; d < rank; ++d) a += idx[d] * v.strides[d];
  return a;
}

bool valid(const rvl_view& v, int rank, const int64_t* idx) {
  for (int d = 0; d < rank; ++d)
    if (idx[d] < v.valid_lo[d] || idx[d] >= v.valid_hi[d]) return false;
  return true;
}

// Calls fn(idx) for every index of `shape` in row-major order.
void for_each_index(int rank, const int64_t* shape, const std::function<void(const int64_t*)>& fn) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= shape[d];
  for (int64_t lin = 0; lin < total; ++lin) {
    int64_t idx[RVL_MAX_RANK] = {};
    int64_t rest = lin;
    for (int d = rank - 1; d >= 0; --d) idx[d] = rest % shape[d], rest /= shape[d];
    fn(idx);
  }
}

// The value of the last instruction at `idx`. `accs` gives ACC: one value whatever its arg
// (contraction and 1.10 reduction epilogues), or, in a chain of reductions (ABI 1.11), value arg.
// `regs` is the caller's scratch, reused from element to element: a vector made per element
// put nearly all of a sanitizer build's conformance time in the allocator (10x the plain build).
Value evaluate(const rvl_instruction* code, int32_t n, const rvl_operand* inputs, int rank,
               const std::vector<const HostBuffer*>& bufs, const int64_t* idx, const std::vector<Value>& accs,
               std::vector<Value>& regs) {
  regs.assign(static_cast<size_t>(n), Value{});
  for (int j = 0; j < n; ++j) {
    const rvl_instruction& in = code[j];
    switch (static_cast<rvl_op>(in.op)) {
      case RVL_OP_LOAD: {
        const rvl_view& v = inputs[in.arg].view;
        regs[j] = valid(v, rank, idx) ? bufs.at(in.arg)->get(address(v, rank, idx))
                                      : normalize(in.dtype, Value{});
        break;
      }
      case RVL_OP_CONST: regs[j] = constant(in.dtype, in.value); break;
      case RVL_OP_ACC: regs[j] = accs.at(accs.size() == 1 ? 0 : static_cast<size_t>(in.arg)); break;
      case RVL_OP_COUNT_: break;  // rejected by validation
      case RVL_OP_CAST:
      RVL_OP_CASES_COMPUTED {
        const Value none{};
        regs[j] = apply(in.op, in.dtype, code[in.src[0]].dtype, regs[in.src[0]],
                        in.src[1] >= 0 ? regs[in.src[1]] : none,
                        in.src[2] >= 0 ? regs[in.src[2]] : none);
      }
    }
  }
  return regs[n - 1];
}

// Wide accumulation: f64 for floats, wrapping int64 for integers, or/and for bool.
Value combine_wide(int32_t rop, int32_t dt, Value x, Value y) {
  if (is_float(dt)) {
    if (rop == RVL_REDUCE_SUM) return fval(x.f + y.f);
    if (rop == RVL_REDUCE_PROD) return fval(x.f * y.f);
    if (std::isnan(x.f)) return x;
    if (std::isnan(y.f)) return y;
    return fval(x.f < y.f ? y.f : x.f);
  }
  if (dt == RVL_DTYPE_BOOL) {
    if (rop == RVL_REDUCE_PROD) return ival(x.i && y.i);
    return ival(x.i || y.i);
  }
  const uint64_t a = static_cast<uint64_t>(x.i), b = static_cast<uint64_t>(y.i);
  if (rop == RVL_REDUCE_SUM) return ival(static_cast<int64_t>(a + b));
  if (rop == RVL_REDUCE_PROD) return ival(static_cast<int64_t>(a * b));
  if (dt == RVL_DTYPE_U64) return ival(a > b ? x.i : y.i);  // u64 held as its bits
  return ival(x.i > y.i ? x.i : y.i);
}

// LOGSUMEXP (ABI 1.4) of the values of one output, deliberately not online: two passes in f64,
// the maximum first, then m + log(sum exp(x - m)); the special values as backend.h states them.
double logsumexp_two_pass(const std::vector<double>& xs) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : xs) {
    if (std::isnan(x)) return x;
    if (x > m) m = x;
  }
  if (std::isinf(m)) return m;  // +inf, or empty / all -inf: -inf
  double s = 0;
  for (double x : xs) s += std::exp(x - m);
  return m + std::log(s);
}

// One reduction over p's space of `code` (reduce op rop, accumulated in dtype rdt) into `out`
// through view ov: every kept index from its identity, in f64 / wrapping int64 (LOGSUMEXP: two
// passes in f64). accs(idx, values) sets ACC's values at a full index (empty: no ACC).
using AccsAt = std::function<void(const int64_t*, std::vector<Value>&)>;
const AccsAt no_accs = [](const int64_t*, std::vector<Value>& v) { v.clear(); };

void reduce_into(const rvl_program& p, const rvl_instruction* code, int32_t n, int32_t rop, int32_t rdt,
                 const std::vector<const HostBuffer*>& inputs, const rvl_view& ov, HostBuffer& out,
                 const AccsAt& accs) {
  const int R = p.rank;
  int64_t kept_shape[RVL_MAX_RANK], red_shape[RVL_MAX_RANK];
  for (int d = 0; d < R; ++d) {
    const bool reduced = (p.reduce_axes >> d) & 1u;
    kept_shape[d] = reduced ? 1 : p.shape[d];
    red_shape[d] = reduced ? p.shape[d] : 1;
  }
  std::vector<Value> regs, acc_values;
  const auto value_at = [&](const int64_t* kept, const int64_t* red) {
    int64_t idx[RVL_MAX_RANK];
    for (int d = 0; d < R; ++d) idx[d] = kept[d] + red[d];
    accs(idx, acc_values);
    return evaluate(code, n, p.inputs, R, inputs, idx, acc_values, regs);
  };
  if (rop == RVL_REDUCE_LOGSUMEXP) {
    for_each_index(R, kept_shape, [&](const int64_t* kept) {
      std::vector<double> xs;
      for_each_index(R, red_shape, [&](const int64_t* red) { xs.push_back(value_at(kept, red).f); });
      out.set(address(ov, R, kept), fval(logsumexp_two_pass(xs)));  // rounds once
    });
    return;
  }
  for_each_index(R, kept_shape, [&](const int64_t* kept) {
    Value acc = reduce_identity(rop, rdt);
    for_each_index(R, red_shape, [&](const int64_t* red) { acc = combine_wide(rop, rdt, acc, value_at(kept, red)); });
    out.set(address(ov, R, kept), acc);  // rounds / wraps once
  });
}

// The per-kept-index values of a reduction: contiguous over the kept axes, stride 0 along the
// reduced ones, so a full index addresses its row's value.
rvl_view kept_view(const rvl_program& p, int64_t* count) {
  rvl_view v{};
  v.struct_size = sizeof(rvl_view);
  int64_t kept = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    const bool reduced = (p.reduce_axes >> d) & 1u;
    v.strides[d] = reduced ? 0 : kept;
    v.valid_hi[d] = p.shape[d];
    if (!reduced) kept *= p.shape[d];
  }
  *count = kept;
  return v;
}

// ABI 1.11, a chain of reductions: each stage reduced in turn into its own buffer, read by the
// later ones through ACC k at the same kept index; then the program's own reduction (into the
// output, or, with an epilogue, into a buffer that ACC 0 reads), then the epilogue element by
// element. Deliberately separate passes, as the 1.10 epilogue above.
void run_chain(const rvl_program& p, const std::vector<const HostBuffer*>& inputs, HostBuffer& out) {
  const int R = p.rank;
  int64_t kept = 0;
  const rvl_view kv = kept_view(p, &kept);
  const bool epi = p.n_epilogue > 0;
  std::vector<HostBuffer> vals;  // [0]: the program's own (with an epilogue), [k]: stage k - 1
  vals.reserve(static_cast<size_t>(p.n_stages) + 1);
  vals.emplace_back(epi ? p.acc_dtype : p.output.dtype, kept);
  for (int32_t s = 0; s < p.n_stages; ++s) vals.emplace_back(p.stages[s].acc_dtype, kept);
  const AccsAt accs = [&](const int64_t* idx, std::vector<Value>& v) {
    v.clear();
    for (const HostBuffer& b : vals) v.push_back(b.get(address(kv, R, idx)));
  };
  for (int32_t s = 0; s < p.n_stages; ++s) {
    const rvl_reduce_stage& st = p.stages[s];
    reduce_into(p, st.instructions, st.n_instructions, st.reduce_op, st.acc_dtype, inputs, kv, vals[1 + s], accs);
  }
  if (!epi) {
    reduce_into(p, p.instructions, p.n_instructions, p.reduce_op, p.output.dtype, inputs, p.output.view, out, accs);
    return;
  }
  reduce_into(p, p.instructions, p.n_instructions, p.reduce_op, p.acc_dtype, inputs, kv, vals[0], accs);
  std::vector<Value> regs, acc_values;
  for_each_index(R, p.shape, [&](const int64_t* idx) {
    accs(idx, acc_values);
    out.set(address(p.output.view, R, idx), evaluate(p.epilogue, p.n_epilogue, p.inputs, R, inputs, idx, acc_values, regs));
  });
}

}  // namespace

void run_program(const rvl_program& p, const std::vector<const HostBuffer*>& inputs,
                 HostBuffer& out) {
  const int R = p.rank;
  const int32_t odt = p.output.dtype;
  const rvl_view& ov = p.output.view;
  if (RVL_HAS_MEMBER(&p, rvl_program, stages) && p.n_stages > 0) return run_chain(p, inputs, out);
  std::vector<Value> regs, acc(1);
  if (p.reduce_op == RVL_REDUCE_NONE) {
    acc.clear();
    for_each_index(R, p.shape, [&](const int64_t* idx) {
      out.set(address(ov, R, idx),
              evaluate(p.instructions, p.n_instructions, p.inputs, R, inputs, idx, acc, regs));
    });
    return;
  }
  // Reduction: accumulate every output from its identity over the reduced sub-space.
  int64_t kept_shape[RVL_MAX_RANK];
  for (int d = 0; d < R; ++d) kept_shape[d] = (p.reduce_axes >> d) & 1u ? 1 : p.shape[d];
  // ABI 1.10, a row epilogue: the reduction first, into its own acc_dtype buffer (one value
  // per kept index, in row-major order over kept_shape), then the epilogue at every index with
  // ACC its output's value, written through the full-space output view. Deliberately two
  // separate passes: the plain reduction below, then plain elementwise evaluation.
  if (RVL_HAS_MEMBER(&p, rvl_program, acc_dtype) && p.n_epilogue > 0) {
    int64_t kept = 1, kstride[RVL_MAX_RANK];
    for (int d = R - 1; d >= 0; --d) kstride[d] = kept, kept *= kept_shape[d];
    HostBuffer reduced(p.acc_dtype, kept);
    rvl_program q = p;
    q.n_epilogue = 0;
    q.output.dtype = p.acc_dtype;
    q.output.view = rvl_view{};
    q.output.view.struct_size = sizeof(rvl_view);
    for (int d = 0; d < R; ++d) {
      q.output.view.strides[d] = (p.reduce_axes >> d) & 1u ? 0 : kstride[d];
      q.output.view.valid_hi[d] = p.shape[d];
    }
    run_program(q, inputs, reduced);
    for_each_index(R, p.shape, [&](const int64_t* idx) {
      acc[0] = reduced.get(address(q.output.view, R, idx));
      out.set(address(ov, R, idx), evaluate(p.epilogue, p.n_epilogue, p.inputs, R, inputs, idx, acc, regs));
    });
    return;
  }
  reduce_into(p, p.instructions, p.n_instructions, p.reduce_op, odt, inputs, ov, out, no_accs);
}

// ABI 1.8 (im2col block): the offset of index i of a group (row-major over its shape), 0 for a
// 1.0-form axis (the view's own stride then counts it).
static int64_t group_offset(int32_t rank, const int64_t* shape, const int64_t* strides, int64_t i) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return off;
}

void run_contraction(const rvl_contraction& c, const HostBuffer& a, const HostBuffer& b,
                     const std::vector<const HostBuffer*>& epilogue_inputs, HostBuffer& out) {
  const int br = c.batch_rank, R = br + 2;
  int64_t shape[RVL_MAX_RANK] = {};
  for (int d = 0; d < br; ++d) shape[d] = c.batch_shape[d];
  shape[br] = c.m;
  shape[br + 1] = c.n;
  const int32_t dt = c.dtype;
  std::vector<Value> regs, epilogue_acc(1);
  for_each_index(R, shape, [&](const int64_t* idx) {
    Value acc = reduce_identity(RVL_REDUCE_SUM, dt);
    int64_t ia[RVL_MAX_RANK], ib[RVL_MAX_RANK];
    for (int d = 0; d < br; ++d) ia[d] = ib[d] = idx[d];
    ia[br] = idx[br];
    ib[br + 1] = idx[br + 1];
    const bool groups = RVL_HAS_MEMBER(&c, rvl_contraction, b_n_strides);
    const int64_t am = groups ? group_offset(c.m_rank, c.m_shape, c.a_m_strides, idx[br]) : 0;
    const int64_t bn = groups ? group_offset(c.n_rank, c.n_shape, c.b_n_strides, idx[br + 1]) : 0;
    for (int64_t k = 0; k < c.k; ++k) {
      ia[br + 1] = k;
      ib[br] = k;
      const int64_t ak = groups ? am + group_offset(c.k_rank, c.k_shape, c.a_k_strides, k) : 0;
      const int64_t bk = groups ? bn + group_offset(c.k_rank, c.k_shape, c.b_k_strides, k) : 0;
      const Value x = a.get(address(c.a.view, R, ia) + ak), y = b.get(address(c.b.view, R, ib) + bk);
      Value prod;
      if (is_float(dt)) prod = fval(x.f * y.f);
      else if (dt == RVL_DTYPE_BOOL) prod = ival(x.i && y.i);
      else prod = ival(static_cast<int64_t>(static_cast<uint64_t>(x.i) * static_cast<uint64_t>(y.i)));
      acc = combine_wide(RVL_REDUCE_SUM, dt, acc, prod);
    }
    // A half contraction accumulates in f32 and its epilogue sees that f32 value: the one
    // rounding to the half dtype happens when C is stored (docs/dtypes.md, "Half arithmetic").
    acc = normalize(rvl::dtype_is_half(dt) ? RVL_DTYPE_F32 : dt, acc);
    epilogue_acc[0] = acc;
    const Value r = c.n_epilogue > 0 ? evaluate(c.epilogue, c.n_epilogue, c.epilogue_inputs, R,
                                                epilogue_inputs, idx, epilogue_acc, regs)
                                     : acc;
    out.set(address(c.c.view, R, idx), r);
  });
}

}  // namespace rvl::ref
