// Kernel validation: everything the ABI says a plugin must check before running anything
// (the SDK's ravel_validate library, declared in <ravel/validate.hpp>).
//
// Every check throws rvl::Error(INVALID_ARGUMENT) with a message naming the offending part and
// what was expected. Address arithmetic uses checked int64 operations: a view whose extreme
// address cannot even be computed is rejected as absurd rather than overflowing.
//
// Messages are formatted only on the failure path: this runs on every kernel launch, so a
// passing validation builds no string and allocates nothing but the returned input list
// (operand names live on the stack, see name.hpp; instruction names are made by a lambda).
#include <ravel/validate.hpp>

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

#include "name.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>

namespace rvl::validate {
namespace {

using std::to_string;

std::string dt_str(int32_t dt) { return rvl::dtype_name(dt); }

void check_shape(const char* what, int32_t rank, const int64_t* shape) {
  if (rank < 0 || rank > RVL_MAX_RANK)
    rvl::invalid(std::string(what) + ": rank " + to_string(rank) + " out of range, expected 0.." +
                 to_string(RVL_MAX_RANK));
  int64_t total = 1;
  bool overflow = false;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] < 0)
      rvl::invalid(std::string(what) + ": shape[" + to_string(d) + "] is " + to_string(shape[d]) +
                   ", expected >= 0");
    overflow |= __builtin_mul_overflow(total, shape[d], &total);
  }
  // A zero extent makes the space empty whatever the other extents are.
  if (overflow && std::find(shape, shape + rank, int64_t{0}) == shape + rank)
    rvl::invalid(std::string(what) + ": element count overflows int64");
}

// Checks an operand against the iteration space and returns its normalised View.
// `full_validity`: the view must cover the whole space (contraction A/B); `output`: additionally
// no mask at all, stride 0 on `reduced` axes and no aliasing of distinct elements.
View check_operand(const BufferLookup& lookup, const Name& name, const rvl_operand* op,
                   int32_t rank, const int64_t* shape, bool full_validity, bool output,
                   uint32_t reduced) {
  const char* what = name.c_str();
  rvl::require_struct(op, what);
  rvl::require_struct(&op->view, name.plus(" view").c_str());
  const BufferRef buf = lookup(op->buffer, what);
  if (!rvl::dtype_valid(op->dtype))
    rvl::invalid(std::string(what) + ": unknown dtype " + to_string(op->dtype));
  const rvl_view& v = op->view;
  const int64_t elems = static_cast<int64_t>(buf.size / rvl::dtype_size(op->dtype));

  View out;
  out.data = buf.data;
  out.dtype = op->dtype;
  out.offset = v.offset;
  bool space_empty = false;
  for (int d = 0; d < rank; ++d) {
    out.stride[d] = v.strides[d];
    if ((full_validity || output) && (v.valid_lo[d] > 0 || v.valid_hi[d] < shape[d]))
      rvl::invalid(std::string(what) + ": axis " + to_string(d) + " has validity [" +
                   to_string(v.valid_lo[d]) + ", " + to_string(v.valid_hi[d]) +
                   "), expected it to cover [0, " + to_string(shape[d]) + ")");
    if (output && (v.valid_lo[d] != 0 || v.valid_hi[d] != shape[d]))
      rvl::invalid(std::string(what) + ": outputs may not have a validity mask, axis " +
                   to_string(d) + " has [" + to_string(v.valid_lo[d]) + ", " +
                   to_string(v.valid_hi[d]) + "), expected [0, " + to_string(shape[d]) + ")");
    out.lo[d] = std::clamp<int64_t>(v.valid_lo[d], 0, shape[d]);
    out.hi[d] = std::clamp<int64_t>(v.valid_hi[d], 0, shape[d]);
    if (out.lo[d] >= out.hi[d]) out.empty = true;
    if (shape[d] == 0) space_empty = true;
    if (output && ((reduced >> d) & 1u) && v.strides[d] != 0)
      rvl::invalid(std::string(what) + ": reduced axis " + to_string(d) + " has stride " +
                   to_string(v.strides[d]) + ", expected 0");
  }
  if (out.empty) return out;  // nothing is ever addressed

  // Extreme addresses over the valid box, with overflow checks.
  int64_t lo_addr = v.offset, hi_addr = v.offset;
  bool overflow = false;
  for (int d = 0; d < rank; ++d) {
    int64_t a = 0, b = 0;
    overflow |= __builtin_mul_overflow(v.strides[d], out.lo[d], &a);
    overflow |= __builtin_mul_overflow(v.strides[d], out.hi[d] - 1, &b);
    overflow |= __builtin_add_overflow(lo_addr, std::min(a, b), &lo_addr);
    overflow |= __builtin_add_overflow(hi_addr, std::max(a, b), &hi_addr);
  }
  if (overflow)
    rvl::invalid(std::string(what) +
                 ": view address computation overflows int64 (absurd offset/strides)");
  if (lo_addr < 0 || hi_addr >= elems)
    rvl::invalid(std::string(what) + ": view reaches element " +
                 to_string(lo_addr < 0 ? lo_addr : hi_addr) + ", outside buffer of " +
                 to_string(elems) + " elements");

  if (output && !space_empty) {
    // Sufficient no-alias check: order the stored axes by |stride|; each must step past the
    // whole span covered by the smaller ones. Bounded by the buffer size, so no overflow.
    int axes[RVL_MAX_RANK];
    int n = 0;
    for (int d = 0; d < rank; ++d)
      if (!((reduced >> d) & 1u) && shape[d] > 1) axes[n++] = d;
    // Insertion sort by |stride| (n <= 8; std::sort trips a GCC 12 -Warray-bounds false alarm).
    for (int i = 1; i < n; ++i)
      for (int j = i; j > 0 && std::abs(v.strides[axes[j]]) < std::abs(v.strides[axes[j - 1]]); --j)
        std::swap(axes[j], axes[j - 1]);
    int64_t span = 1;
    for (int i = 0; i < n; ++i) {
      const int64_t s = std::abs(v.strides[axes[i]]);
      if (s < span)
        rvl::invalid(std::string(what) + ": overlapping output, axis " + to_string(axes[i]) +
                     " stride " + to_string(v.strides[axes[i]]) +
                     " aliases elements of the axes inside it (expected |stride| >= " +
                     to_string(span) + ")");
      span += s * (shape[axes[i]] - 1);
    }
  }
  return out;
}

// "instruction 4 (ADD)": formatted only when a check of that instruction fails.
std::string ins_str(const char* kind, int j, int32_t op) {
  return std::string(kind) + " " + to_string(j) + " (" + rvl::op_name(op) + ")";
}

// What ACC may read in an instruction list: nothing (n == 0); one value of dtypes[0] whatever
// its arg (contraction and 1.10 reduction epilogues: indexed false); or, in a chain of
// reductions (ABI 1.11), value arg for lo <= arg < n, of dtypes[arg].
struct AccRule {
  const int32_t* dtypes = nullptr;
  int32_t lo = 0, n = 0;
  bool indexed = false;
};
AccRule one_acc(const int32_t* dtype) { return {dtype, 0, 1, false}; }

// Validates an SSA instruction list.
void check_instructions(const char* kind, const rvl_instruction* ins, int32_t n,
                        const std::vector<View>& inputs, AccRule acc, int32_t out_dtype) {
  for (int j = 0; j < n; ++j) {
    const rvl_instruction& I = ins[j];
    if (!rvl::op_valid(I.op))
      rvl::invalid(std::string(kind) + " " + to_string(j) + ": unknown op code " +
                   to_string(I.op) + ", expected 0.." + to_string(RVL_OP_COUNT_ - 1));
    const auto w = [&] { return ins_str(kind, j, I.op); };
    if (!rvl::dtype_valid(I.dtype)) rvl::invalid(w() + ": unknown dtype " + to_string(I.dtype));
    const int arity = rvl::op_arity(I.op);
    int32_t sd[3] = {-1, -1, -1};
    for (int k = 0; k < 3; ++k) {
      if (k < arity) {
        if (I.src[k] < 0 || I.src[k] >= j)
          rvl::invalid(w() + ": source " + to_string(k) + " is " + to_string(I.src[k]) +
                       ", expected an earlier instruction in [0, " + to_string(j) +
                       ") (SSA order)");
        sd[k] = ins[I.src[k]].dtype;
      } else if (I.src[k] != -1) {
        rvl::invalid(w() + ": unused source " + to_string(k) + " is " + to_string(I.src[k]) +
                     ", expected -1");
      }
    }
    const int32_t dt = I.dtype;
    auto bad_dtype = [&](const std::string& expected) {
      rvl::invalid(w() + ": wrong dtype " + dt_str(dt) + " (sources " + dt_str(sd[0]) + ", " +
                   dt_str(sd[1]) + ", " + dt_str(sd[2]) + "), expected " + expected);
    };
    const rvl::OpInfo& info = rvl::op_info(I.op);
    if (info.accepts == rvl::OpAccepts::None) {
      // The three source-less ops: what they produce is named by the instruction itself.
      if (I.op == RVL_OP_LOAD) {
        if (I.arg < 0 || I.arg >= static_cast<int32_t>(inputs.size()))
          rvl::invalid(w() + ": input index " + to_string(I.arg) + " out of range [0, " +
                       to_string(inputs.size()) + ")");
        if (inputs[I.arg].dtype != dt)
          rvl::invalid(w() + ": dtype " + dt_str(dt) + " differs from input " + to_string(I.arg) +
                       " dtype " + dt_str(inputs[I.arg].dtype));
      } else if (I.op == RVL_OP_ACC) {
        if (acc.n == 0)
          rvl::invalid(w() + ": ACC is only allowed in epilogues (contractions, reductions) and chains of reductions");
        if (acc.indexed && (I.arg < acc.lo || I.arg >= acc.n))
          rvl::invalid(w() + ": ACC index " + to_string(I.arg) + " out of range [" + to_string(acc.lo) + ", " +
                       to_string(acc.n) + ") (0: this program's reduction, k: stage k - 1, earlier stages only)");
        const int32_t want = acc.dtypes[acc.indexed ? I.arg : 0];
        if (dt != want) bad_dtype("the accumulator dtype " + dt_str(want));
      }
      continue;
    }
    // Every other op is checked from its table row alone: the sources share one dtype (SELECT:
    // a bool condition and two values of one dtype), which the row must accept, and the result
    // dtype follows the row's result rule.
    const bool select = info.accepts == rvl::OpAccepts::Select;
    const int32_t vdt = select ? sd[1] : sd[0];
    for (int k = select ? 2 : 1; k < arity; ++k)
      if (sd[k] != vdt) bad_dtype(std::string("sources of one dtype (") + rvl::op_accepts_text(I.op) + ")");
    if (select && sd[0] != RVL_DTYPE_BOOL) bad_dtype("a bool condition (source 0)");
    if (!rvl::op_accepts(I.op, vdt)) bad_dtype(std::string("sources of ") + rvl::op_accepts_text(I.op));
    const int32_t want = rvl::op_result_dtype(I.op, vdt);
    if (want >= 0 && dt != want) bad_dtype("the result dtype " + dt_str(want));
  }
  if (ins[n - 1].dtype != out_dtype)
    rvl::invalid(std::string("last ") + kind + " dtype " + dt_str(ins[n - 1].dtype) +
                 " differs from the output dtype " + dt_str(out_dtype));
}

std::vector<View> check_inputs(const BufferLookup& lookup, const char* kind, int32_t n,
                               const rvl_operand* ops, int32_t rank, const int64_t* shape) {
  if (n < 0 || n > RVL_MAX_INPUTS)
    rvl::invalid(std::string(kind) + " count " + to_string(n) + " out of range, expected 0.." +
                 to_string(RVL_MAX_INPUTS));
  if (n > 0 && ops == nullptr)
    rvl::invalid(std::string(kind) + "s pointer is NULL but count is " + to_string(n));
  std::vector<View> views;
  views.reserve(n);
  for (int i = 0; i < n; ++i)
    views.push_back(
        check_operand(lookup, Name(kind, i), &ops[i], rank, shape, false, false, 0));
  return views;
}

void check_count(const char* what, int32_t n, bool allow_zero, const void* ptr) {
  if (n < (allow_zero ? 0 : 1) || n > RVL_MAX_INSTRUCTIONS)
    rvl::invalid(std::string(what) + " count " + to_string(n) + " out of range, expected " +
                 (allow_zero ? "0" : "1") + ".." + to_string(RVL_MAX_INSTRUCTIONS));
  if (n > 0 && ptr == nullptr)
    rvl::invalid(std::string(what) + "s pointer is NULL but count is " + to_string(n));
}

}  // namespace

namespace {
// The UNSUPPORTED error for a dtype outside the device's mask (validate.hpp).
void require_dtype(int32_t dt, uint32_t dtypes, const char* where) {
  if ((dtypes >> dt) & 1u) return;
  rvl::fail(RVL_STATUS_UNSUPPORTED, std::string("dtype ") + rvl::dtype_name(dt) + " (" + where +
                                        ") is not run by this device; its dtypes mask is " + to_string(dtypes));
}

void require_dtypes(const Program& p, uint32_t dtypes, const char* kind) {
  require_dtype(p.out.dtype, dtypes, kind);
  for (const View& v : p.inputs) require_dtype(v.dtype, dtypes, kind);
  for (int32_t j = 0; j < p.n_ins; ++j) require_dtype(p.ins[j].dtype, dtypes, kind);
}
}  // namespace

namespace {
// ABI 1.11: the stages of a chain (backend.h, rvl_reduce_stage). `accs` receives the stages'
// dtypes at [1, n_stages]; each stage's list may read ACC of the stages before it.
void check_stages(const rvl_program* p, Program& out, int32_t* accs) {
  const int32_t n = p->n_stages;
  if (n < 0 || n > RVL_MAX_REDUCE_STAGES)
    rvl::invalid("program: n_stages " + to_string(n) + " out of range, expected 0.." + to_string(RVL_MAX_REDUCE_STAGES));
  if (p->stages == nullptr) rvl::invalid("program: stages pointer is NULL but n_stages is " + to_string(n));
  if (p->reduce_op == RVL_REDUCE_NONE)
    rvl::invalid("program: reduction stages (n_stages " + to_string(n) + ") need a reduce_op");
  for (int32_t s = 0; s < n; ++s) {
    const rvl_reduce_stage& st = p->stages[s];
    const std::string name = "stage " + to_string(s);
    if (st.struct_size < RVL_REDUCE_STAGE_STRUCT_SIZE_1_11)
      rvl::invalid("program: " + name + " struct_size " + to_string(st.struct_size) + " < " +
                   to_string(RVL_REDUCE_STAGE_STRUCT_SIZE_1_11));
    if (st.reduce_op < RVL_REDUCE_SUM || st.reduce_op > RVL_REDUCE_LOGSUMEXP)
      rvl::invalid("program: " + name + " unknown reduce_op " + to_string(st.reduce_op) + ", expected 1..4");
    if (!rvl::dtype_valid(st.acc_dtype))
      rvl::invalid("program: " + name + " unknown acc_dtype " + to_string(st.acc_dtype));
    if (st.reduce_op == RVL_REDUCE_LOGSUMEXP && !rvl::dtype_is_float(st.acc_dtype))
      rvl::invalid("program: " + name + " reduce_op LOGSUMEXP needs a float acc_dtype, got " + dt_str(st.acc_dtype));
    check_count((name + " instruction").c_str(), st.n_instructions, false, st.instructions);
    int32_t last = st.acc_dtype;
    if (st.reduce_op == RVL_REDUCE_LOGSUMEXP && st.acc_dtype == RVL_DTYPE_F64 &&
        st.instructions[st.n_instructions - 1].dtype == RVL_DTYPE_F32)
      last = RVL_DTYPE_F32;  // the widening LOGSUMEXP, as the program's own (backend.h)
    check_instructions((name + " instruction").c_str(), st.instructions, st.n_instructions, out.inputs,
                       AccRule{accs, 1, 1 + s, true}, last);
    accs[1 + s] = st.acc_dtype;
    out.stages.push_back({st.instructions, st.n_instructions, st.reduce_op, st.acc_dtype});
  }
}

// What the device runs of a well-formed chain (after every form check: a malformed chain is
// INVALID_ARGUMENT whatever the device's mask).
void require_chain(const Program& out, int32_t reduce_op, uint32_t dtypes, uint32_t chain_ops) {
  for (const Program::Stage& st : out.stages) {
    require_dtype(st.acc_dtype, dtypes, "stage accumulator");
    for (int32_t j = 0; j < st.n_ins; ++j) require_dtype(st.ins[j].dtype, dtypes, "stage");
    if (!((chain_ops >> st.reduce_op) & 1u))
      rvl::fail(RVL_STATUS_UNSUPPORTED, "program: this device runs no chain of reductions with reduce_op " +
                                            to_string(st.reduce_op) + " (its reduce_chain_ops is " +
                                            to_string(chain_ops) + ")");
  }
  if (!((chain_ops >> reduce_op) & 1u))
    rvl::fail(RVL_STATUS_UNSUPPORTED, "program: this device runs no chain of reductions ending in reduce_op " +
                                          to_string(reduce_op) + " (its reduce_chain_ops is " +
                                          to_string(chain_ops) + ")");
}
}  // namespace

Program validate_program(const rvl_program* p, const BufferLookup& lookup, uint32_t dtypes, uint32_t epilogue_ops,
                         uint32_t chain_ops) {
  // A host built against <= 1.8 passes the 1.0 size: the 1.10 members are read only when
  // struct_size covers them (RVL_HAS_MEMBER), so requiring sizeof here would refuse old hosts.
  rvl::require_struct(p, "program", RVL_PROGRAM_STRUCT_SIZE_1_0);
  Program out;
  check_shape("program", p->rank, p->shape);
  out.rank = p->rank;
  std::copy(p->shape, p->shape + p->rank, out.shape);
  if (p->reduce_op < RVL_REDUCE_NONE || p->reduce_op > RVL_REDUCE_LOGSUMEXP)
    rvl::invalid("program: unknown reduce_op " + to_string(p->reduce_op) + ", expected 0..4");
  // LOGSUMEXP (1.4) is defined on floats only (backend.h). Whether the device implements it is
  // the plugin's business (rvl_device_properties.reduce_ops): this checks the kernel's form.
  const bool has_epilogue = RVL_HAS_MEMBER(p, rvl_program, acc_dtype) && p->n_epilogue != 0;
  if (p->reduce_op == RVL_REDUCE_LOGSUMEXP && !has_epilogue && !rvl::dtype_is_float(p->output.dtype))
    rvl::invalid("program: reduce_op LOGSUMEXP needs a float output (f32 or f64), got dtype " +
                 to_string(p->output.dtype));
  if (p->rank < 32 && (p->reduce_axes >> p->rank) != 0)
    rvl::invalid("program: reduce_axes " + to_string(p->reduce_axes) +
                 " names an axis >= rank " + to_string(p->rank));
  if (p->reduce_op == RVL_REDUCE_NONE && p->reduce_axes != 0)
    rvl::invalid("program: reduce_axes set but reduce_op is NONE");
  out.reduce_op = p->reduce_op;
  out.reduce_axes = p->reduce_axes;
  // ABI 1.10: a row epilogue (backend.h). A host built against <= 1.8 has no such members.
  const bool epi = RVL_HAS_MEMBER(p, rvl_program, acc_dtype) && p->n_epilogue != 0;
  if (epi && p->reduce_op == RVL_REDUCE_NONE)
    rvl::invalid("program: an epilogue (n_epilogue " + to_string(p->n_epilogue) + ") needs a reduce_op");
  out.inputs = check_inputs(lookup, "input", p->n_inputs, p->inputs, p->rank, p->shape);
  // With an epilogue the output covers the whole iteration space: nothing is reduced into it.
  out.out = check_operand(lookup, Name("output"), &p->output, p->rank, p->shape, true, true,
                          epi ? 0u : p->reduce_axes);
  check_count("instruction", p->n_instructions, false, p->instructions);
  // The reduced value's dtype: the output's, or (with an epilogue) acc_dtype. LOGSUMEXP may
  // widen F32 values into an F64 result (backend.h); nothing else changes dtype.
  int32_t result_dtype = out.out.dtype;
  if (epi) {
    result_dtype = p->acc_dtype;
    if (!rvl::dtype_valid(result_dtype))
      rvl::invalid("program: unknown acc_dtype " + to_string(result_dtype));
  }
  if (p->reduce_op == RVL_REDUCE_LOGSUMEXP && !rvl::dtype_is_float(result_dtype))
    rvl::invalid("program: reduce_op LOGSUMEXP needs a float acc_dtype (f32 or f64), got dtype " +
                 to_string(result_dtype));
  int32_t last_dtype = result_dtype;
  if (p->reduce_op == RVL_REDUCE_LOGSUMEXP && result_dtype == RVL_DTYPE_F64 &&
      p->instructions[p->n_instructions - 1].dtype == RVL_DTYPE_F32)
    last_dtype = RVL_DTYPE_F32;
  // ABI 1.11: the chain's stages, read only when struct_size covers them.
  const bool chain = RVL_HAS_MEMBER(p, rvl_program, stages) && p->n_stages != 0;
  int32_t accs[1 + RVL_MAX_REDUCE_STAGES] = {result_dtype};
  if (chain) check_stages(p, out, accs);
  const int32_t n_accs = 1 + static_cast<int32_t>(out.stages.size());
  check_instructions("instruction", p->instructions, p->n_instructions, out.inputs,
                     chain ? AccRule{accs, 1, n_accs, true} : AccRule{}, last_dtype);
  out.ins = p->instructions;
  out.n_ins = p->n_instructions;
  if (epi) {
    check_count("epilogue instruction", p->n_epilogue, false, p->epilogue);
    check_instructions("epilogue instruction", p->epilogue, p->n_epilogue, out.inputs,
                       chain ? AccRule{accs, 0, n_accs, true} : one_acc(&result_dtype), out.out.dtype);
    out.epilogue = p->epilogue;
    out.n_epilogue = p->n_epilogue;
    out.acc_dtype = result_dtype;
    require_dtype(result_dtype, dtypes, "program accumulator");
    for (int32_t j = 0; j < p->n_epilogue; ++j) require_dtype(p->epilogue[j].dtype, dtypes, "program epilogue");
    if (!chain && !((epilogue_ops >> p->reduce_op) & 1u))
      rvl::fail(RVL_STATUS_UNSUPPORTED, "program: this device runs no row epilogue for reduce_op " +
                                            to_string(p->reduce_op) + " (its reduce_epilogue_ops is " +
                                            to_string(epilogue_ops) + ")");
  }
  require_dtypes(out, dtypes, "program");
  if (chain) require_chain(out, p->reduce_op, dtypes, chain_ops);
  return out;
}

namespace {

// ABI 1.8 (im2col block): the M, K and N groups of a multi-axis contraction. Each group's
// extents multiply to m, k or n; the view stride of a replaced axis is 0 (so check_operand has
// already bounded the batch part); the extreme element of each operand, batch part plus group
// terms, lies inside its buffer.
void check_groups(const rvl_contraction* c, Contraction& out, const BufferLookup& lookup) {
  struct Spec {
    const char* name;
    int32_t rank;
    const int64_t* shape;
    int64_t extent;
    Contraction::Group* dst;
  };
  const Spec specs[3] = {{"m", c->m_rank, c->m_shape, c->m, &out.m_group},
                         {"k", c->k_rank, c->k_shape, c->k, &out.k_group},
                         {"n", c->n_rank, c->n_shape, c->n, &out.n_group}};
  const int br = c->batch_rank;
  for (const Spec& s : specs) {
    if (s.rank == 0) continue;
    if (s.rank < 0 || s.rank > RVL_MAX_RANK)
      rvl::invalid(std::string("contraction: ") + s.name + "_rank " + to_string(s.rank) + " out of range, expected 0.." +
                   to_string(RVL_MAX_RANK));
    int64_t total = 1;
    for (int i = 0; i < s.rank; ++i) {
      if (s.shape[i] < 0)
        rvl::invalid(std::string("contraction: ") + s.name + "_shape[" + to_string(i) + "] is " +
                     to_string(s.shape[i]) + ", expected >= 0");
      if (__builtin_mul_overflow(total, s.shape[i], &total))
        rvl::invalid(std::string("contraction: ") + s.name + "_shape overflows int64");
    }
    if (total != s.extent)
      rvl::invalid(std::string("contraction: ") + s.name + "_shape multiplies to " + to_string(total) + ", expected " +
                   s.name + " = " + to_string(s.extent));
    s.dst->rank = s.rank;
    std::copy(s.shape, s.shape + s.rank, s.dst->shape);
  }
  std::copy(c->a_m_strides, c->a_m_strides + out.m_group.rank, out.m_group.stride[0]);
  std::copy(c->a_k_strides, c->a_k_strides + out.k_group.rank, out.k_group.stride[0]);
  std::copy(c->b_k_strides, c->b_k_strides + out.k_group.rank, out.k_group.stride[1]);
  std::copy(c->b_n_strides, c->b_n_strides + out.n_group.rank, out.n_group.stride[0]);
  if (!out.multi_axis() || c->m == 0 || c->n == 0 || c->k == 0) return;
  for (int d = 0; d < br; ++d)
    if (c->batch_shape[d] == 0) return;  // nothing is addressed
  // One operand: its view (row/col strides must be 0 where a group replaces them) plus groups.
  auto check = [&](const char* what, const View& v, const rvl_operand& op, int64_t row_extent, int64_t col_extent,
                   const Contraction::Group& row, int row_set, const Contraction::Group& col, int col_set) {
    for (int side = 0; side < 2; ++side) {
      const Contraction::Group& g = side == 0 ? row : col;
      if (g.rank > 0 && op.view.strides[br + side] != 0)
        rvl::invalid(std::string(what) + ": axis " + to_string(br + side) + " is replaced by a group but has stride " +
                     to_string(op.view.strides[br + side]) + ", expected 0");
    }
    if (v.empty) return;
    int64_t lo = v.offset, hi = v.offset;
    bool overflow = false;
    auto add = [&](int64_t stride, int64_t extent) {
      int64_t a = 0;
      overflow |= __builtin_mul_overflow(stride, extent - 1, &a);
      overflow |= __builtin_add_overflow(lo, std::min<int64_t>(a, 0), &lo);
      overflow |= __builtin_add_overflow(hi, std::max<int64_t>(a, 0), &hi);
    };
    for (int d = 0; d < br; ++d) add(v.stride[d], c->batch_shape[d]);  // full validity
    add(row.rank > 0 ? 0 : v.stride[br], row_extent);
    add(col.rank > 0 ? 0 : v.stride[br + 1], col_extent);
    for (int i = 0; i < row.rank; ++i) add(row.stride[row_set][i], row.shape[i]);
    for (int i = 0; i < col.rank; ++i) add(col.stride[col_set][i], col.shape[i]);
    const int64_t elems = static_cast<int64_t>(lookup(op.buffer, what).size / rvl::dtype_size(op.dtype));
    if (overflow) rvl::invalid(std::string(what) + ": group address computation overflows int64");
    if (lo < 0 || hi >= elems)
      rvl::invalid(std::string(what) + ": its groups reach element " + to_string(lo < 0 ? lo : hi) +
                   ", outside the buffer of " + to_string(elems) + " elements");
  };
  check("contraction operand A", out.a, c->a, c->m, c->k, out.m_group, 0, out.k_group, 0);
  check("contraction operand B", out.b, c->b, c->k, c->n, out.k_group, 1, out.n_group, 0);
}

}  // namespace

Contraction validate_contraction(const rvl_contraction* c, const BufferLookup& lookup, uint32_t dtypes) {
  // One ACC instruction per dtype: the implicit epilogue when the host gives none.
  static const auto kAccOnly = [] {
    std::array<rvl_instruction, RVL_DTYPE_COUNT_> acc{};
    for (int32_t dt = 0; dt < RVL_DTYPE_COUNT_; ++dt) acc[dt] = {RVL_OP_ACC, dt, {-1, -1, -1}, 0, {0}};
    return acc;
  }();

  rvl::require_struct(c, "contraction");
  Contraction out;
  if (!rvl::dtype_valid(c->dtype))
    rvl::invalid("contraction: unknown dtype " + to_string(c->dtype));
  out.dtype = c->dtype;
  if (c->batch_rank < 0 || c->batch_rank > RVL_MAX_RANK - 2)
    rvl::invalid("contraction: batch_rank " + to_string(c->batch_rank) +
                 " out of range, expected 0.." + to_string(RVL_MAX_RANK - 2));
  const int br = c->batch_rank;
  check_shape("contraction batch", br, c->batch_shape);
  if (c->m < 0 || c->n < 0 || c->k < 0)
    rvl::invalid("contraction: m, n, k must be >= 0, got " + to_string(c->m) + ", " +
                 to_string(c->n) + ", " + to_string(c->k));
  out.batch_rank = br;
  std::copy(c->batch_shape, c->batch_shape + br, out.batch_shape);
  out.m = c->m; out.n = c->n; out.k = c->k;

  int64_t sa[RVL_MAX_RANK] = {}, sb[RVL_MAX_RANK] = {}, sc[RVL_MAX_RANK] = {};
  std::copy(c->batch_shape, c->batch_shape + br, sa);
  std::copy(c->batch_shape, c->batch_shape + br, sb);
  std::copy(c->batch_shape, c->batch_shape + br, sc);
  sa[br] = c->m; sa[br + 1] = c->k;
  sb[br] = c->k; sb[br + 1] = c->n;
  sc[br] = c->m; sc[br + 1] = c->n;
  check_shape("contraction C", br + 2, sc);
  check_shape("contraction A", br + 2, sa);
  check_shape("contraction B", br + 2, sb);
  out.a = check_operand(lookup, Name("contraction operand A"), &c->a, br + 2, sa, true, false, 0);
  out.b = check_operand(lookup, Name("contraction operand B"), &c->b, br + 2, sb, true, false, 0);
  Program& e = out.epilogue;
  e.rank = br + 2;
  std::copy(sc, sc + br + 2, e.shape);
  e.out = check_operand(lookup, Name("contraction operand C"), &c->c, br + 2, sc, true, true, 0);
  for (const auto* v : {&out.a, &out.b, &e.out})
    if (v->dtype != c->dtype)
      rvl::invalid("contraction: operand dtype " + dt_str(v->dtype) +
                   " differs from the contraction dtype " + dt_str(c->dtype));
  e.inputs = check_inputs(lookup, "epilogue input", c->n_epilogue_inputs, c->epilogue_inputs,
                          br + 2, sc);
  check_count("epilogue instruction", c->n_epilogue, true, c->epilogue);
  if (c->n_epilogue > 0) {
    check_instructions("epilogue instruction", c->epilogue, c->n_epilogue, e.inputs, one_acc(&c->dtype),
                       c->dtype);
    e.ins = c->epilogue;
    e.n_ins = c->n_epilogue;
  } else {
    e.ins = &kAccOnly[c->dtype];
    e.n_ins = 1;
  }
  require_dtype(c->dtype, dtypes, "contraction");
  require_dtypes(e, dtypes, "contraction epilogue");
  if (RVL_HAS_MEMBER(c, rvl_contraction, b_n_strides)) check_groups(c, out, lookup);
  return out;
}

}  // namespace rvl::validate
