#include "kernel_plan.hpp"

#include <ravel/backend.hpp>

#include <cstring>

namespace rvl::l0 {

namespace {

// One axis of the normalised iteration space and, per view, its stride and validity range.
struct Axis {
  int64_t extent = 1;
  bool reduced = false;
  std::vector<int64_t> stride, lo, hi;  // per view (inputs..., then the output)
};

bool full(const Axis& a, size_t v) { return a.lo[v] == 0 && a.hi[v] == a.extent; }

// Drops extent-1 axes and merges `outer` into `inner` neighbours that every view walks densely
// without padding (Note [Generic kernels]). `views` says which entries of the per-view arrays
// are live (empty views take no part).
std::vector<Axis> normalise(std::vector<Axis> axes, const std::vector<bool>& live) {
  std::vector<Axis> kept;
  for (Axis& a : axes)
    if (a.extent != 1) kept.push_back(std::move(a));
  std::vector<Axis> out;
  for (Axis& a : kept) {
    if (!out.empty()) {
      Axis& o = out.back();
      bool ok = o.reduced == a.reduced && o.extent > 0 && a.extent > 0;
      for (size_t v = 0; ok && v < live.size(); ++v)
        ok = !live[v] || (o.stride[v] == a.stride[v] * a.extent && full(o, v) && full(a, v));
      if (ok) {
        o.extent *= a.extent;
        for (size_t v = 0; v < live.size(); ++v) {
          o.stride[v] = a.stride[v];
          o.lo[v] = 0;
          o.hi[v] = o.extent;
        }
        continue;
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

void put(std::string& key, const void* p, size_t n) { key.append(static_cast<const char*>(p), n); }
void put_i(std::string& key, int64_t v) { put(key, &v, sizeof v); }

void put_instructions(std::string& key, const std::vector<rvl_instruction>& ins) {
  put_i(key, int64_t(ins.size()));
  for (const rvl_instruction& i : ins) {
    const int64_t row[6] = {i.op, i.dtype, i.src[0], i.src[1], i.src[2],
                            i.op == RVL_OP_LOAD ? i.arg : 0};
    put(key, row, sizeof row);
    int64_t bits = 0;
    if (i.op == RVL_OP_CONST) std::memcpy(&bits, &i.value, sizeof bits);
    put_i(key, bits);
  }
}

void put_inputs(std::string& key, const std::vector<InputSig>& in) {
  put_i(key, int64_t(in.size()));
  for (const InputSig& s : in) put_i(key, s.dtype * 4 + (s.empty ? 2 : 0) + (s.masked ? 1 : 0));
}

// Appends a view record: offset, strides, and (masked) lo, hi over `axes` for view `v`.
void put_view(std::vector<int64_t>& meta, int64_t offset, const std::vector<Axis>& axes, size_t v,
              bool masked) {
  meta.push_back(offset);
  for (const Axis& a : axes) meta.push_back(a.stride[v]);
  if (!masked) return;
  for (const Axis& a : axes) meta.push_back(a.lo[v]);
  for (const Axis& a : axes) meta.push_back(a.hi[v]);
}

bool is_masked(const std::vector<Axis>& axes, size_t v) {
  for (const Axis& a : axes)
    if (!full(a, v)) return true;
  return false;
}

}  // namespace

std::string ProgramSig::key() const {
  std::string k = "P";
  put_i(k, kept);
  put_i(k, reduced);
  put_i(k, reduce_op);
  put_i(k, serial_reduce);
  put_i(k, out_dtype);
  put_inputs(k, inputs);
  put_instructions(k, ins);
  return k;
}

ProgramMeta::ProgramMeta(const ProgramSig& s) : rank(s.kept + s.reduced) {
  n_out = size_t(rank);
  n_red = n_out + 1;
  size_t at = n_red + 1;
  for (const InputSig& in : s.inputs) {
    input.push_back(at);
    if (in.empty) continue;
    at += 1 + size_t(rank) * (in.masked ? 3 : 1);
  }
  output = at;
  size = at + 1 + size_t(s.kept);
}

ProgramLaunch plan_program(const rvl::validate::Program& p) {
  const size_t n_in = p.inputs.size(), n_views = n_in + 1;
  std::vector<bool> live(n_views, true);
  for (size_t j = 0; j < n_in; ++j) live[j] = !p.inputs[j].empty;

  std::vector<Axis> axes;
  for (int pass = 0; pass < 2; ++pass)  // kept axes first, then reduced ones
    for (int d = 0; d < p.rank; ++d) {
      const bool reduced = (p.reduce_axes >> d) & 1u;
      if (reduced != (pass == 1)) continue;
      Axis a;
      a.extent = p.shape[d];
      a.reduced = reduced;
      for (size_t v = 0; v < n_views; ++v) {
        const rvl::validate::View& view = v < n_in ? p.inputs[v] : p.out;
        a.stride.push_back(v < n_in || !reduced ? view.stride[d] : 0);
        a.lo.push_back(v < n_in ? view.lo[d] : 0);
        a.hi.push_back(v < n_in ? view.hi[d] : p.shape[d]);
      }
      axes.push_back(std::move(a));
    }

  ProgramLaunch L;
  L.n_out = L.n_red = 1;
  for (const Axis& a : axes) (a.reduced ? L.n_red : L.n_out) *= a.extent;
  // An empty reduced space stores the identity everywhere: its axes are not needed.
  if (L.n_red == 0) {
    std::vector<Axis> k;
    for (Axis& a : axes)
      if (!a.reduced) k.push_back(std::move(a));
    axes = std::move(k);
  }
  axes = normalise(std::move(axes), live);

  ProgramSig& s = L.sig;
  for (const Axis& a : axes) (a.reduced ? s.reduced : s.kept) += 1;
  s.reduce_op = p.reduce_op;
  // Note [Reduction shapes]: a work-group per output wastes 63 of 64 work-items on a reduction
  // over 27 logits and needs a barrier tree per output; with many outputs or short reductions,
  // a work-item per output walking its reduced space sequentially keeps every lane busy.
  s.serial_reduce = p.reduce_op != RVL_REDUCE_NONE && (L.n_red <= 64 || L.n_out >= 16384);
  s.out_dtype = p.out.dtype;
  s.ins.assign(p.ins, p.ins + p.n_ins);
  for (size_t j = 0; j < n_in; ++j) {
    InputSig in;
    in.dtype = p.inputs[j].dtype;
    in.empty = p.inputs[j].empty;
    in.masked = !in.empty && is_masked(axes, j);
    s.inputs.push_back(in);
  }

  std::vector<int64_t>& m = L.meta;
  for (const Axis& a : axes) m.push_back(a.extent);
  m.push_back(L.n_out);
  m.push_back(L.n_red);
  for (size_t j = 0; j < n_in; ++j) {
    if (s.inputs[j].empty) continue;
    put_view(m, p.inputs[j].offset, axes, j, s.inputs[j].masked);
    L.inputs.push_back(p.inputs[j].data);
  }
  std::vector<Axis> kept_axes(axes.begin(), axes.begin() + s.kept);
  put_view(m, p.out.offset, kept_axes, n_in, false);
  L.out = p.out.data;
  return L;
}

// ---- contractions ---------------------------------------------------------------------------

std::string ContractionSig::key() const {
  std::string k = "C";
  put_i(k, dtype);
  put_i(k, batch_rank);
  put_inputs(k, epilogue);
  put_instructions(k, ins);
  return k;
}

ContractionMeta::ContractionMeta(const ContractionSig& s) : rank(s.batch_rank + 2) {
  m = size_t(s.batch_rank);
  n = m + 1;
  k = m + 2;
  tiles_m = m + 3;
  tiles_n = m + 4;
  n_tiles = m + 5;
  a = m + 6;
  b = a + 1 + size_t(rank);
  c = b + 1 + size_t(rank);
  size_t at = c + 1 + size_t(rank);
  for (const InputSig& in : s.epilogue) {
    input.push_back(at);
    if (in.empty) continue;
    at += 1 + size_t(rank) * (in.masked ? 3 : 1);
  }
  size = at;
}

ContractionLaunch plan_contraction(const rvl::validate::Contraction& c) {
  const rvl::validate::Program& ep = c.epilogue;
  const size_t n_in = ep.inputs.size();
  // Views: A, B, C, epilogue inputs. Axis d < batch_rank is a batch axis of all of them; the
  // last two axes differ per operand and are handled by the GEMM itself.
  std::vector<Axis> batch;
  for (int d = 0; d < c.batch_rank; ++d) {
    if (c.batch_shape[d] == 1) continue;  // contributes nothing
    Axis a;
    a.extent = c.batch_shape[d];
    batch.push_back(a);
    batch.back().stride = {c.a.stride[d], c.b.stride[d], ep.out.stride[d]};
    batch.back().lo = {0, 0, 0};
    batch.back().hi = {a.extent, a.extent, a.extent};
    for (size_t j = 0; j < n_in; ++j) {
      batch.back().stride.push_back(ep.inputs[j].stride[d]);
      batch.back().lo.push_back(ep.inputs[j].lo[d]);
      batch.back().hi.push_back(ep.inputs[j].hi[d]);
    }
  }
  const int br = c.batch_rank;
  ContractionLaunch L;
  ContractionSig& s = L.sig;
  s.dtype = c.dtype;
  s.batch_rank = int32_t(batch.size());
  s.ins.assign(ep.ins, ep.ins + ep.n_ins);
  // The two matrix axes of every epilogue view are [M, N]: axes br and br + 1.
  auto mn_masked = [&](const rvl::validate::View& v) {
    return v.lo[br] != 0 || v.hi[br] != c.m || v.lo[br + 1] != 0 || v.hi[br + 1] != c.n;
  };
  for (size_t j = 0; j < n_in; ++j) {
    InputSig in;
    in.dtype = ep.inputs[j].dtype;
    in.empty = ep.inputs[j].empty;
    in.masked = !in.empty && (is_masked(batch, 3 + j) || mn_masked(ep.inputs[j]));
    s.epilogue.push_back(in);
  }

  int64_t n_batch = 1;
  for (const Axis& a : batch) n_batch *= a.extent;
  const int64_t tm = (c.m + kGemmTile - 1) / kGemmTile, tn = (c.n + kGemmTile - 1) / kGemmTile;
  L.n_tiles = n_batch * tm * tn;

  std::vector<int64_t>& m = L.meta;
  for (const Axis& a : batch) m.push_back(a.extent);
  m.insert(m.end(), {c.m, c.n, c.k, tm, tn, L.n_tiles});
  auto put_operand = [&](const rvl::validate::View& v, size_t idx, int64_t s_row, int64_t s_col,
                         bool masked) {
    m.push_back(v.offset);
    for (const Axis& a : batch) m.push_back(a.stride[idx]);
    m.push_back(s_row);
    m.push_back(s_col);
    if (!masked) return;
    for (const Axis& a : batch) m.push_back(a.lo[idx]);
    m.push_back(v.lo[br]);
    m.push_back(v.lo[br + 1]);
    for (const Axis& a : batch) m.push_back(a.hi[idx]);
    m.push_back(v.hi[br]);
    m.push_back(v.hi[br + 1]);
  };
  put_operand(c.a, 0, c.a.stride[br], c.a.stride[br + 1], false);
  put_operand(c.b, 1, c.b.stride[br], c.b.stride[br + 1], false);
  put_operand(ep.out, 2, ep.out.stride[br], ep.out.stride[br + 1], false);
  for (size_t j = 0; j < n_in; ++j) {
    if (s.epilogue[j].empty) continue;
    const rvl::validate::View& v = ep.inputs[j];
    put_operand(v, 3 + j, v.stride[br], v.stride[br + 1], s.epilogue[j].masked);
    L.inputs.push_back(v.data);
  }
  L.a = c.a.data;
  L.b = c.b.data;
  L.c = ep.out.data;
  return L;
}

}  // namespace rvl::l0
