#include <ravel/backend.hpp>
#include <ravel/lowering/parametric.hpp>

#include <cstring>

namespace rvl::lower {

namespace {

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

// Appends a view record: offset, strides over the first `rank` axes, and (masked) lo, hi.
void put_view(std::vector<int64_t>& meta, const SpaceView& v, size_t rank, bool masked) {
  meta.push_back(v.offset);
  meta.insert(meta.end(), v.stride.begin(), v.stride.begin() + rank);
  if (!masked) return;
  meta.insert(meta.end(), v.lo.begin(), v.lo.begin() + rank);
  meta.insert(meta.end(), v.hi.begin(), v.hi.begin() + rank);
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
  // Two programs differing only in their row epilogue or its ACC dtype are different kernels.
  put_i(k, acc_dtype);
  put_instructions(k, epilogue);
  put_i(k, int64_t(stages.size()));
  for (const StageSig& st : stages) {
    put_i(k, st.reduce_op);
    put_i(k, st.acc_dtype);
    put_instructions(k, st.ins);
  }
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
  size = at + 1 + size_t(s.has_epilogue() ? rank : s.kept);
}

ProgramLaunch plan_program(const rvl::validate::Program& p) {
  const Space sp = simplify(p, Order::KeptFirst);
  const size_t n_in = p.inputs.size();
  ProgramLaunch L;
  L.n_out = sp.n_out;
  L.n_red = sp.n_red;
  ProgramSig& s = L.sig;
  for (bool r : sp.reduced) (r ? s.reduced : s.kept) += 1;
  s.reduce_op = p.reduce_op;
  s.serial_reduce = p.reduce_op != RVL_REDUCE_NONE &&
                    plan_reduction(sp, kReduceGroup, false).kind == ReducePlan::Kind::Serial;
  s.out_dtype = p.out.dtype;
  s.ins.assign(p.ins, p.ins + p.n_ins);
  if (p.n_epilogue > 0) {
    s.epilogue.assign(p.epilogue, p.epilogue + p.n_epilogue);
    s.acc_dtype = p.acc_dtype;
  }
  for (const rvl::validate::Program::Stage& st : p.stages)
    s.stages.push_back({std::vector<rvl_instruction>(st.ins, st.ins + st.n_ins), st.reduce_op, st.acc_dtype});
  std::vector<int64_t>& m = L.meta;
  m = sp.extent;
  m.push_back(L.n_out);
  m.push_back(L.n_red);
  for (size_t j = 0; j < n_in; ++j) {
    const SpaceView& v = sp.views[j];
    s.inputs.push_back({v.dtype, v.empty, v.masked(sp.extent)});
    if (v.empty) continue;
    put_view(m, v, sp.extent.size(), s.inputs.back().masked);
    L.inputs.push_back(p.inputs[j].data);
  }
  // A row epilogue's output has the whole space (simplify kept its reduced strides).
  put_view(m, sp.out(), s.has_epilogue() ? sp.extent.size() : size_t(s.kept), false);
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
  const int br = c.batch_rank;
  // The batch axes of A, B, C and the epilogue inputs, simplified like a program's space (the
  // last two axes differ per operand and are the GEMM's own). A view over [batch.., M, N] reads
  // its batch part here; A and B are valid everywhere.
  std::vector<validate::View> batch_views{c.a, c.b};
  for (validate::View& v : batch_views)
    for (int d = 0; d < br; ++d) v.lo[d] = 0, v.hi[d] = c.batch_shape[d];
  std::vector<const validate::View*> views{&batch_views[0], &batch_views[1]};
  for (const validate::View& v : ep.inputs) views.push_back(&v);
  views.push_back(&ep.out);
  const Space sp = simplify(br, c.batch_shape, 0, views);

  ContractionLaunch L;
  ContractionSig& s = L.sig;
  s.dtype = c.dtype;
  s.batch_rank = int32_t(sp.extent.size());
  s.ins.assign(ep.ins, ep.ins + ep.n_ins);
  // The two matrix axes of every epilogue view are [M, N]: axes br and br + 1.
  auto mn_masked = [&](const rvl::validate::View& v) {
    return v.lo[br] != 0 || v.hi[br] != c.m || v.lo[br + 1] != 0 || v.hi[br + 1] != c.n;
  };
  for (size_t j = 0; j < n_in; ++j) {
    const rvl::validate::View& v = ep.inputs[j];
    s.epilogue.push_back({v.dtype, v.empty, !v.empty && (sp.views[2 + j].masked(sp.extent) || mn_masked(v))});
  }
  const GemmTile tile = gemm_tile(c.dtype, c.m, c.n, 0, false);
  const int64_t tm = (c.m + tile.bm - 1) / tile.bm, tn = (c.n + tile.bn - 1) / tile.bn;
  L.n_tiles = sp.n_out * tm * tn;

  std::vector<int64_t>& m = L.meta;
  m = sp.extent;
  m.insert(m.end(), {c.m, c.n, c.k, tm, tn, L.n_tiles});
  // offset, batch strides, the two matrix strides; masked: lo and hi likewise.
  auto put_operand = [&](const rvl::validate::View& v, const SpaceView& b, bool masked) {
    m.push_back(v.offset);
    m.insert(m.end(), b.stride.begin(), b.stride.end());
    m.insert(m.end(), {v.stride[br], v.stride[br + 1]});
    if (!masked) return;
    m.insert(m.end(), b.lo.begin(), b.lo.end());
    m.insert(m.end(), {v.lo[br], v.lo[br + 1]});
    m.insert(m.end(), b.hi.begin(), b.hi.end());
    m.insert(m.end(), {v.hi[br], v.hi[br + 1]});
  };
  put_operand(c.a, sp.views[0], false);
  put_operand(c.b, sp.views[1], false);
  put_operand(ep.out, sp.out(), false);
  for (size_t j = 0; j < n_in; ++j) {
    if (s.epilogue[j].empty) continue;
    put_operand(ep.inputs[j], sp.views[2 + j], s.epilogue[j].masked);
    L.inputs.push_back(ep.inputs[j].data);
  }
  L.a = c.a.data;
  L.b = c.b.data;
  L.c = ep.out.data;
  return L;
}

}  // namespace rvl::lower
