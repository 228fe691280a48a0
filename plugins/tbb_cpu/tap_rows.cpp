// Note [Tap sums]
// A depthwise convolution reaches this plugin as one elementwise program (the core's Note
// [Depthwise convolution as taps]): y = ((x_0 * w_0 + x_1 * w_1) + x_2 * w_2) + ... + b, where
// each x_t is the input read through a shifted, masked view (the padding is the mask) and each
// w_t, b is one value per row (stride 0 along the innermost axis: a channel's weight), maybe
// followed by an activation. The block evaluator runs it one instruction at a time over blocks
// that split the rows of 28 into segments: every masked LOAD copies each row's valid span into a
// slot, every weight fills one; 5.4 ms for 8 taps at 32x64x28x28 (the contraction it replaced,
// with its pad copy: 2.2). Here it runs plane by plane (the last two axes: a channel's image),
// the sum in registers: for each 16 lanes of an output row, each tap is one masked load (lanes
// outside the view's valid span read as zero, as the ABI's LOAD does, and are never addressed),
// one multiply by the tap's weight (broadcast once per plane) and one add; the row is stored
// once. An activation after the sum (relu) runs over the plane with the array loops of its
// instructions, in place in the output. The adds happen in the program's order and multiply
// and add are not contracted, so the values are bitwise the block evaluator's (tests:
// nn_conv_groups' relu_rides_in_the_convolution_kernel against fusion policy none).
// Taken for f32 programs whose instructions are: LOADs, products of a row LOAD (stride 1 along
// the innermost axis) and a per-row LOAD, one chain of ADDs of those products, plain row LOADs
// and per-row LOADs (the bias), then a tail that reads only the chain's sum, CONSTs, LOADs
// the chain does not read (copied plane by plane) and itself; with a masked row LOAD or at least
// three products, rows of at most kMaxRow elements, the output f32 with stride 1 along the row
// and no input's buffer, at least two evaluator blocks (a smaller kernel runs inline) and two
// planes per thread (the planes are the tasks).
#include "evaluator.hpp"
#include "parallel.hpp"
#include "tap_planes.hpp"

#include <tbb/task_arena.h>

#include <ravel/backend.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace tbbcpu {
namespace {

constexpr int64_t kMaxRow = 1024;

// One term of the chain: row[j] * scalar, row[j], or scalar (row < 0 / scalar < 0: absent).
struct Term {
  int32_t row = -1, scalar = -1;  // input indices
};

// The plane (outer index idx[0, outer)) of view v, rows x width, into dst as a dense typed array:
// stride 1 (a run per row) or 0 (one value per row) along the row; what lies outside the view's
// valid box reads as zero (all-zero bytes, as for every dtype).
void load_plane(const View& v, const int64_t* idx, int outer, int64_t rows, int64_t width, void* dst) {
  const int64_t es = static_cast<int64_t>(rvl::dtype_size(v.dtype));
  std::byte* out = static_cast<std::byte*>(dst);
  bool ok = true;
  uint64_t o = static_cast<uint64_t>(v.offset);
  for (int d = 0; d < outer; ++d) {
    ok &= idx[d] >= v.lo[d] && idx[d] < v.hi[d];
    o += static_cast<uint64_t>(idx[d]) * static_cast<uint64_t>(v.stride[d]);
  }
  const int row_axis = outer, col_axis = outer + 1;
  for (int64_t h = 0; h < rows; ++h, out += width * es) {
    const bool row_ok = ok && h >= v.lo[row_axis] && h < v.hi[row_axis];
    const int64_t a = row_ok ? std::clamp<int64_t>(v.lo[col_axis], 0, width) : 0;
    const int64_t b = row_ok ? std::clamp<int64_t>(v.hi[col_axis], a, width) : 0;
    std::memset(out, 0, static_cast<size_t>(a * es));
    std::memset(out + b * es, 0, static_cast<size_t>((width - b) * es));
    if (a >= b) continue;
    const uint64_t row = o + static_cast<uint64_t>(h) * static_cast<uint64_t>(v.stride[row_axis]);
    const std::byte* src = v.data + static_cast<int64_t>(row * static_cast<uint64_t>(es));
    if (v.stride[col_axis] == 1) {
      std::memcpy(out + a * es, src + a * es, static_cast<size_t>((b - a) * es));
    } else {
      for (int64_t j = a; j < b; ++j) std::memcpy(out + j * es, src, static_cast<size_t>(es));
    }
  }
}

}  // namespace

bool Evaluator::run_tap_sum() const {
  if (rank_ < 2 || out_.empty || out_.dtype != RVL_DTYPE_F32) return false;  // planes of rows
  const int in = rank_ - 1;
  const int64_t width = shape_[in];
  if (width < 1 || width > kMaxRow || out_.stride[in] != 1) return false;
  auto is_row = [&](int i) {
    const View& v = in_[i];
    return v.dtype == RVL_DTYPE_F32 && !v.empty && v.stride[in] == 1 && v.data != out_.data;
  };
  auto is_scalar = [&](int i) {
    const View& v = in_[i];
    if (v.dtype != RVL_DTYPE_F32 || v.empty || v.stride[in] != 0 || v.data == out_.data) return false;
    for (int d = 0; d < rank_; ++d)
      if (v.lo[d] > 0 || v.hi[d] < shape_[d]) return false;
    return true;
  };
  // Parse: the chain's terms in order, then the tail.
  std::vector<Term> terms;
  // 1 LOAD (a term's), 2 term, 3 chain, 4 CONST, 5 tail, 6 a LOAD the tail reads
  std::vector<int8_t> role(static_cast<size_t>(n_ins_), 0);
  std::vector<Term> as_term(static_cast<size_t>(n_ins_));
  int32_t chain = -1;  // the chain's last ADD (or its only term)
  bool in_tail = false, masked = false;
  for (int32_t j = 0; j < n_ins_; ++j) {
    const rvl_instruction& x = ins_[j];
    auto src = [&](int k) { return x.src[k]; };
    if (x.op == RVL_OP_CONST) {
      role[j] = 4;
      continue;
    }
    if (x.op == RVL_OP_ACC) return false;
    if (x.op == RVL_OP_LOAD) {
      // Any other LOAD can only be the tail's (the relu derivative's cotangent): checked below.
      const bool term = x.dtype == RVL_DTYPE_F32 && !in_tail && (is_row(x.arg) || is_scalar(x.arg));
      role[j] = term ? 1 : 6;
      if (term && is_row(x.arg)) as_term[j].row = x.arg;
      else if (term) as_term[j].scalar = x.arg;
      continue;
    }
    if (in_tail) {  // reads only the chain's sum, CONSTs, the LOADs the chain left and the tail
      for (int k = 0; k < 3; ++k) {
        const int32_t q = src(k);
        if (q < 0 || q == chain) continue;
        if (role[q] == 1) role[q] = 6;
        if (role[q] != 4 && role[q] != 5 && role[q] != 6) return false;
      }
      role[j] = 5;
      continue;
    }
    if (x.op == RVL_OP_MUL) {
      if (x.dtype != RVL_DTYPE_F32) return false;
      const int32_t a = src(0), b = src(1);
      if (a < 0 || b < 0 || role[a] != 1 || role[b] != 1 || a == b) return false;
      const Term& ta = as_term[a];
      const Term& tb = as_term[b];
      if (ta.row >= 0 && tb.scalar >= 0) as_term[j] = {ta.row, tb.scalar};
      else if (tb.row >= 0 && ta.scalar >= 0) as_term[j] = {tb.row, ta.scalar};
      else return false;
      role[a] = role[b] = 0;  // consumed
      role[j] = 2;
      continue;
    }
    if (x.op == RVL_OP_ADD && x.dtype == RVL_DTYPE_F32) {
      int32_t a = src(0), b = src(1);
      if (a < 0 || b < 0) return false;
      auto operand = [&](int32_t s) { return role[s] == 1 || role[s] == 2; };
      if (chain >= 0 && a != chain && b == chain) std::swap(a, b);  // a + b == b + a, bitwise
      if (chain >= 0 && a == chain && operand(b)) {
        terms.push_back(as_term[b]);
      } else if (chain < 0 && operand(a) && operand(b)) {
        terms.push_back(as_term[a]);
        terms.push_back(as_term[b]);
        role[a] = 0;
      } else {
        // Not the chain: then it starts the tail, if the chain is complete.
        if (chain < 0) return false;
        in_tail = true;
        --j;
        continue;
      }
      role[b] = 0;
      if (chain >= 0) role[chain] = 0;
      chain = j;
      role[j] = 3;
      continue;
    }
    if (chain < 0) return false;
    in_tail = true;
    --j;  // parse this instruction again as the tail's first
  }
  if (chain < 0 || terms.size() < 2) return false;
  // Every term's LOAD and product must have been consumed by the chain or be read by the tail;
  // the tail's LOADs are copied row by row (stride 1 or 0 along the row).
  for (int32_t j = 0; j < n_ins_; ++j) {
    if (role[j] == 2 || role[j] == 1) return false;
    if (role[j] != 6) continue;
    const View& v = in_[ins_[j].arg];
    if (v.empty || (v.stride[in] != 1 && v.stride[in] != 0) || v.data == out_.data) return false;
  }
  int n_products = 0;
  for (const Term& t : terms) {
    n_products += t.row >= 0 && t.scalar >= 0;
    if (t.row >= 0)
      for (int d = 0; d < rank_; ++d) masked |= in_[t.row].lo[d] > 0 || in_[t.row].hi[d] < shape_[d];
  }
  // Dense rows with one or two products (an affine map: x * scale + shift) run well as they do.
  if (!masked && n_products < 3) return false;
  const int32_t last = n_ins_ - 1;
  const bool has_tail = last != chain;
  if (has_tail && (role[last] != 5 || ins_[last].dtype != RVL_DTYPE_F32)) return false;
  std::vector<ArrayFn> fns(static_cast<size_t>(n_ins_), nullptr);
  std::vector<int32_t> slot_of(static_cast<size_t>(n_ins_), -1);  // the tail's and CONSTs' slots
  int32_t n_slots = 1;                                             // slot 0: the chain's sum (not dense)
  for (int32_t j = 0; j < n_ins_; ++j)
    if (has_tail && (role[j] == 4 || role[j] == 5 || role[j] == 6)) slot_of[j] = n_slots++;
  for (int32_t j = chain + 1; j < n_ins_; ++j) {
    if (role[j] != 5) continue;
    fns[j] = array_kernel(ins_[j].op, ins_[j].op == RVL_OP_WHERE ? ins_[j].dtype
                                      : ins_[j].src[0] >= 0 ? ins_[ins_[j].src[0]].dtype : ins_[j].dtype);
    if (!fns[j]) return false;
  }
  bool products_first = terms[0].row >= 0 && terms[0].scalar >= 0;
  for (size_t i = 1, seen_scalar = 0; i < terms.size(); ++i) {
    const bool product = terms[i].row >= 0 && terms[i].scalar >= 0, scalar = terms[i].row < 0;
    products_first &= seen_scalar ? scalar : product || scalar;
    seen_scalar |= scalar;
  }
  int products = 0;
  for (const Term& t : terms) {
    if (t.row >= 0 && t.scalar >= 0) ++products;
    // One value per plane: stride 0 along the plane's rows too; rows stepping alike.
    if (t.scalar >= 0 && rank_ >= 2 && in_[t.scalar].stride[in - 1] != 0) products_first = false;
    if (t.row >= 0 && rank_ >= 2 && in_[t.row].stride[in - 1] != in_[terms[0].row].stride[in - 1]) products_first = false;
  }
  const TapPlaneFn plane_fn = select_tap_plane(products_first, products);
  // Work in planes: the rows of the last two axes (a channel's image), R rows of `width`.
  const int64_t per_plane = shape_[in - 1], plane_elems = per_plane * width;
  if (has_tail && plane_elems > (int64_t{1} << 14)) return false;
  const int64_t planes = total_ / std::max<int64_t>(plane_elems, 1);
  // Planes are the tasks: a few large ones (a rank-2 program is one plane) would leave threads
  // idle, where the block evaluator splits any kernel.
  if (planes < 2 * std::max(1, tbb::this_task_arena::max_concurrency())) return false;
  const int outer = in - 1;  // axes [0, outer) index the plane
  const int n_terms = static_cast<int>(terms.size());
  auto row_stride = [&](const View& v) { return v.stride[in - 1]; };
  auto body = [&](const tbb::blocked_range<int64_t>& range) {
    PlaneTerm pt[RVL_MAX_INPUTS];
    // The tail's values per instruction (8 bytes per element covers every dtype); slot 0: the sum.
    // (Left uninitialised: every slot is written before it is read.)
    const std::unique_ptr<uint64_t[]> slots(has_tail ? new uint64_t[static_cast<size_t>(n_slots * plane_elems)] : nullptr);
    auto slot = [&](int32_t j) { return slots.get() + static_cast<size_t>(slot_of[j]) * plane_elems; };
    if (has_tail)
      for (int32_t j = 0; j < n_ins_; ++j)
        if (role[j] == 4) fill_const(slot(j), ins_[j].dtype, ins_[j].value, plane_elems);
    for (int64_t plane = range.begin(); plane != range.end(); ++plane) {
      int64_t idx[RVL_MAX_RANK] = {};
      for (int64_t d = outer - 1, rest = plane; d >= 0; --d) {
        idx[d] = rest % shape_[d];
        rest /= shape_[d];
      }
      auto at = [&](const View& v, bool& ok) {  // offset of the plane's row 0; ok: valid on the outer axes
        uint64_t o = static_cast<uint64_t>(v.offset);
        ok = true;
        for (int d = 0; d < outer; ++d) {
          ok &= idx[d] >= v.lo[d] && idx[d] < v.hi[d];
          o += static_cast<uint64_t>(idx[d]) * static_cast<uint64_t>(v.stride[d]);
        }
        return o;
      };
      for (int i = 0; i < n_terms; ++i) {
        const Term& t = terms[static_cast<size_t>(i)];
        PlaneTerm& r = pt[i];
        r.has_row = t.row >= 0;
        r.has_scalar = t.scalar >= 0;
        if (t.row >= 0) {
          const View& v = in_[t.row];
          bool ok;
          const uint64_t o = at(v, ok);
          r.p = reinterpret_cast<uintptr_t>(v.data) + o * sizeof(float);
          r.p_step = row_stride(v) * static_cast<int64_t>(sizeof(float));
          r.h_lo = ok ? v.lo[in - 1] : 0;
          r.h_hi = ok ? v.hi[in - 1] : 0;
          r.a = std::clamp<int64_t>(v.lo[in], 0, width);
          r.b = std::clamp<int64_t>(v.hi[in], r.a, width);
        }
        if (t.scalar >= 0) {
          const View& v = in_[t.scalar];
          bool ok;  // always: per-row values are fully valid (is_scalar)
          r.s = reinterpret_cast<const float*>(v.data) + static_cast<int64_t>(at(v, ok));
          r.s_step = row_stride(v);
        }
      }
      int64_t oo = out_.offset;
      for (int d = 0; d < outer; ++d) oo += idx[d] * out_.stride[d];
      float* const dst = reinterpret_cast<float*>(out_.data) + oo;
      const int64_t out_step = row_stride(out_);
      if (!has_tail) {
        plane_fn(pt, n_terms, per_plane, width, dst, out_step);
        continue;
      }
      // A dense output plane holds the sum and then the last instruction's values (each array
      // loop reads element i before it writes it); otherwise they are copied in row by row.
      const bool dense = out_step == width;
      float* const sum = dense ? dst : reinterpret_cast<float*>(slots.get());
      plane_fn(pt, n_terms, per_plane, width, sum, width);
      for (int32_t j = 0; j < n_ins_; ++j)
        if (role[j] == 6) load_plane(in_[ins_[j].arg], idx, outer, per_plane, width, slot(j));
      for (int32_t j = chain + 1; j < n_ins_; ++j) {
        if (role[j] != 5) continue;
        const void* src[3] = {nullptr, nullptr, nullptr};
        for (int k = 0; k < 3; ++k) {
          const int32_t q = ins_[j].src[k];
          if (q >= 0) src[k] = q == chain ? static_cast<const void*>(sum) : slot(q);
        }
        fns[j](j == last && dense ? static_cast<void*>(dst) : slot(j), src[0], src[1], src[2], plane_elems);
      }
      if (dense) continue;
      const float* res = reinterpret_cast<const float*>(slot(last));
      for (int64_t h = 0; h < per_plane; ++h)
        std::memcpy(dst + h * out_step, res + h * width, static_cast<size_t>(width) * sizeof(float));
    }
  };
  // Tasks of >= 16 Ki elements: each sets up its scratch once for several planes.
  parallel_for_work(0, planes, std::max<int64_t>(1, (int64_t{1} << 14) / plane_elems), total_ * n_terms, body);
  return true;
}

}  // namespace tbbcpu
