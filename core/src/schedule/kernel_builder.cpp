#include "schedule/kernel_builder.hpp"

#include <cstring>
#include <sstream>

#include "graph/invariant.hpp"
#include "ravel/error.hpp"

namespace ravel::detail {

rvl_operand make_operand(DType dtype, const StridedView& view) {
  rvl_operand op{};
  op.struct_size = sizeof(rvl_operand);
  op.buffer = nullptr;  // bound when the kernel runs (Note [Kernel cache])
  op.dtype = static_cast<int32_t>(dtype);
  op.view.struct_size = sizeof(rvl_view);
  op.view.offset = view.offset;
  for (int64_t d = 0; d < view.rank(); ++d) {
    op.view.strides[d] = view.strides[d];
    auto [lo, hi] = view.valid(d);
    op.view.valid_lo[d] = lo;
    op.view.valid_hi[d] = hi;
  }
  return op;
}

int32_t KernelBuilder::emit(rvl_op op, DType dtype, std::vector<int32_t> srcs) {
  rvl_instruction in{};
  in.op = op;
  in.dtype = static_cast<int32_t>(dtype);
  in.src[0] = in.src[1] = in.src[2] = -1;
  for (size_t i = 0; i < srcs.size(); ++i) in.src[i] = srcs[i];
  instrs_.push_back(in);
  return static_cast<int32_t>(instrs_.size() - 1);
}

int32_t KernelBuilder::load(Source s) {
  if (acc_ != nullptr && s.base.get() == acc_) return emit(RVL_OP_ACC, acc_->dtype, {});
  if (row_acc_ && (row_acc_->count(s.base.get()) || row_folded_->count(s.base.get()))) return row_value(s.base.get());
  if (s.view.shape != shape_) {
    // An epilogue runs over the contraction's [batch..., m, n], which may differ from the
    // node's shape by size-1 axes only (Note [Epilogue fusion]); such a reshape always composes.
    auto v = s.view.reshape(shape_);
    RAVEL_INVARIANT(v.has_value(), "iteration space and node shape differ by more than size-1 axes");
    s.view = std::move(*v);
  }
  if (s.base->kind == NodeKind::Const && !s.view.has_mask()) {
    int32_t i = emit(RVL_OP_CONST, s.base->dtype, {});
    if (is_float(s.base->dtype)) instrs_[i].value.f = s.base->value.f;
    else instrs_[i].value.i = s.base->value.i;
    return i;
  }
  // A padded Const is read from a one-element buffer (realize_const, runtime/execute.cpp).
  auto key = std::make_pair(s.base->id, s.view.str());
  if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
  inputs_.push_back(make_operand(s.base->dtype, s.view));
  bases_.push_back(s.base);
  views_.push_back(s.view);
  int32_t i = emit(RVL_OP_LOAD, s.base->dtype, {});
  instrs_[i].arg = static_cast<int32_t>(inputs_.size() - 1);
  loaded_[key] = i;
  return i;
}

int32_t KernelBuilder::value(const NodePtr& n) {
  // An alias of an inlined node (a custom_vjp result, an argument marker) is that node's value.
  if (n->kind == NodeKind::View && reads_base_in_place(*n) && inlined_ && inlined_->count(n->srcs[0].get()))
    return value(n->srcs[0]);
  if (n->kind != NodeKind::Alu || !inlined_ || !inlined_->count(n.get())) return load(n);
  if (auto it = emitted_.find(n.get()); it != emitted_.end()) return it->second;
  // Depth is bounded by the planner's max_instructions, so this recursion is shallow.
  std::vector<int32_t> ins;
  for (const auto& s : n->srcs) ins.push_back(value(s));
  const rvl_op op = abi_op(n->alu);
  if (op == RVL_OP_CMPLT || op == RVL_OP_CMPNE)
    for (int32_t& k : ins) k = rounded(k);  // Note [Comparisons see stored halves]
  int32_t i = emit(op, n->dtype, ins);
  emitted_[n.get()] = i;
  return i;
}

// Note [Comparisons see stored halves]
// A kernel computes half-typed values in f32 and rounds once, where it stores (docs/dtypes.md,
// "Half arithmetic"), so a node evaluated inside a kernel carries more precision than the same
// node stored by another kernel and loaded back. For arithmetic that is the intended excess
// precision (as XLA's), but a comparison would then see two values of one node: argmax is
// eq(x, max(x)), and when x = exp(h) is recomputed beside the stored (rounded) max, no element
// equals it and argmax returned the axis length (found by Fashion-MNIST under autocast); max
// pooling's gradient routes by the same test. So a half value computed in the kernel (not a
// LOAD or CONST, which are half values already; ACC included) is rounded to its dtype by an
// explicit CAST before a comparison reads it: the comparison then sees exactly what a stored
// node would hold, and since rounding is monotonic, round(max(v)) = max(round(v)) keeps the
// max and its argmax consistent whichever kernel computes each. Other uses keep the excess.
int32_t KernelBuilder::rounded(int32_t k) {
  const rvl_instruction& in = instrs_[static_cast<size_t>(k)];
  if (!is_half(static_cast<DType>(in.dtype)) || in.op == RVL_OP_LOAD || in.op == RVL_OP_CONST) return k;
  if (in.op == RVL_OP_CAST && in.src[0] >= 0 && instrs_[static_cast<size_t>(in.src[0])].dtype != in.dtype) return k;
  if (auto it = rounded_.find(k); it != rounded_.end()) return it->second;
  const int32_t r = emit(RVL_OP_CAST, static_cast<DType>(in.dtype), {k});
  rounded_[k] = r;
  return r;
}

int32_t KernelBuilder::row_value(const Node* n) {
  // The planner checked every read on the way (Note [Row chains in the planner]): a reduction
  // of the chain, or an Alu node over the reduced shape whose sources are constants and such
  // values, read in place. So this value depends on the row alone (the device may compute it
  // once per row, Note [Row-uniform hoisting] in plugins/tbb_cpu/row_uniform.hpp).
  if (auto it = emitted_.find(n); it != emitted_.end()) return it->second;
  int32_t i;
  if (auto a = row_acc_->find(n); a != row_acc_->end()) {
    i = emit(RVL_OP_ACC, n->dtype, {});
    instrs_[i].arg = a->second;
  } else {
    RAVEL_INVARIANT(n->kind == NodeKind::Alu, "a chain's row value is a reduction or an Alu node");
    std::vector<int32_t> ins;
    for (const auto& s : n->srcs) {
      Source src = resolve(s);
      const Node* b = src.base.get();
      if (b->kind == NodeKind::Const) {
        RAVEL_INVARIANT(!src.view.has_mask(), "a chain's row value reads a padded constant");
        int32_t c = emit(RVL_OP_CONST, b->dtype, {});
        if (is_float(b->dtype)) instrs_[c].value.f = b->value.f;
        else instrs_[c].value.i = b->value.i;
        ins.push_back(c);
      } else if (row_acc_->count(b) || row_folded_->count(b) || (inlined_ && inlined_->count(b))) {
        ins.push_back(row_value(b));
      } else {
        // A value of the reduced shape stored by its own kernel: loaded through its broadcast
        // over the rows (stride 0 on the reduced axes).
        RAVEL_INVARIANT(b->shape.size() == shape_.size(), "a chain's stored row value has the rows' rank");
        StridedView v = StridedView::contiguous(b->shape);
        v.shape = shape_;
        for (size_t d = 0; d < shape_.size(); ++d)
          if (b->shape[d] == 1) v.strides[d] = 0;
        ins.push_back(load(Source{src.base, std::move(v)}));
      }
    }
    const rvl_op op = abi_op(n->alu);
    if (op == RVL_OP_CMPLT || op == RVL_OP_CMPNE)
      for (int32_t& k : ins) k = rounded(k);  // Note [Comparisons see stored halves]
    i = emit(op, n->dtype, ins);
  }
  emitted_[n] = i;
  return i;
}

std::string KernelBuilder::describe(const std::vector<rvl_instruction>* code) const {
  const std::vector<rvl_instruction>& instrs = code ? *code : instrs_;
  std::ostringstream out;
  for (size_t i = 0; i < inputs_.size(); ++i)
    out << "    in" << i << ": " << dtype_name(static_cast<DType>(inputs_[i].dtype)) << " " << views_[i].str()
        << " of node " << bases_[i]->id << "\n";
  for (size_t i = 0; i < instrs.size(); ++i) {
    const auto& in = instrs[i];
    out << "    %" << i << " = " << rvl::op_info(in.op).name << "." << dtype_name(static_cast<DType>(in.dtype));
    if (in.op == RVL_OP_LOAD) out << " in" << in.arg;
    if (in.op == RVL_OP_ACC && in.arg != 0) out << " " << in.arg;  // a chain's stage (ABI 1.11)
    if (in.op == RVL_OP_CONST) {
      if (is_float(static_cast<DType>(in.dtype))) out << " " << in.value.f;
      else out << " " << in.value.i;
    }
    for (int k = 0; k < 3 && in.src[k] >= 0; ++k) out << " %" << in.src[k];
    out << "\n";
  }
  return out.str();
}

const rvl_program& KernelBuilder::finish(const Node& out, rvl_reduce_op reduce, uint32_t axes) {
  StridedView ov = StridedView::contiguous(out.shape);
  // The iteration space has the reduced axes at full size; the output repeats along them.
  ov.shape = shape_;
  for (size_t d = 0; d < shape_.size(); ++d)
    if (axes & (1u << d)) ov.strides[d] = 0;
  program_ = rvl_program{};
  program_.struct_size = sizeof(rvl_program);
  program_.rank = static_cast<int32_t>(shape_.size());
  for (size_t d = 0; d < shape_.size(); ++d) program_.shape[d] = shape_[d];
  program_.n_inputs = static_cast<int32_t>(inputs_.size());
  program_.inputs = inputs_.data();
  program_.n_instructions = static_cast<int32_t>(instrs_.size());
  program_.instructions = instrs_.data();
  program_.reduce_op = reduce;
  program_.reduce_axes = axes;
  program_.output = make_operand(out.dtype, ov);
  return program_;
}

}  // namespace ravel::detail
