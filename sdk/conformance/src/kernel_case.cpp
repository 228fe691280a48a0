#include "kernel_case.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <limits>
#include <memory>

namespace rvl::conformance {

rvl_view view_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                 int64_t offset) {
  rvl_view v{};
  v.struct_size = sizeof v;
  v.offset = offset;
  for (size_t d = 0; d < RVL_MAX_RANK; ++d) {
    v.strides[d] = d < strides.size() ? strides[d] : 0;
    v.valid_lo[d] = 0;
    v.valid_hi[d] = d < shape.size() ? shape[d] : 1;
  }
  return v;
}

rvl_view contiguous(const std::vector<int64_t>& shape, int64_t offset) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) strides[d] = s, s *= shape[d];
  return view_of(shape, strides, offset);
}

rvl_view reduced_output(const std::vector<int64_t>& shape, uint32_t axes, int64_t* elems) {
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;)
    if (!((axes >> d) & 1u)) strides[d] = s, s *= shape[d];
  *elems = s;
  return view_of(shape, strides);
}

rvl_instruction ins(int32_t op, int32_t dtype, int32_t s0, int32_t s1, int32_t s2) {
  rvl_instruction i{};
  i.op = op;
  i.dtype = dtype;
  i.src[0] = s0;
  i.src[1] = s1;
  i.src[2] = s2;
  return i;
}
rvl_instruction load(int32_t dtype, int32_t input) {
  rvl_instruction i = ins(RVL_OP_LOAD, dtype);
  i.arg = input;
  return i;
}
rvl_instruction const_i(int32_t dtype, int64_t v) {
  rvl_instruction i = ins(RVL_OP_CONST, dtype);
  i.value.i = v;
  return i;
}
rvl_instruction const_f(int32_t dtype, double v) {
  rvl_instruction i = ins(RVL_OP_CONST, dtype);
  i.value.f = v;
  return i;
}

int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

namespace {
uint64_t next(uint64_t& s) {  // splitmix64
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
double unit(uint64_t& s) { return double(next(s) >> 11) * 0x1.0p-53; }
}  // namespace

ref::HostBuffer make_data(int32_t dt, int64_t n, uint64_t seed, Data kind) {
  ref::HostBuffer h(dt, n);
  uint64_t s = seed * 7919 + 17;
  const double inf = std::numeric_limits<double>::infinity();
  const double fspecial[] = {std::nan(""), inf, -inf, 0.0, -0.0, 1.5, -1.5, 1e-30, 3e38, -2.0, 0.5};
  // The dtype's range (u64 held as int64 bits: its maximum is -1).
  int64_t imn = 0, imx = 1;
  switch (dt) {
    case RVL_DTYPE_I8: imn = INT8_MIN, imx = INT8_MAX; break;
    case RVL_DTYPE_I16: imn = INT16_MIN, imx = INT16_MAX; break;
    case RVL_DTYPE_I32: imn = INT32_MIN, imx = INT32_MAX; break;
    case RVL_DTYPE_I64: imn = INT64_MIN, imx = INT64_MAX; break;
    case RVL_DTYPE_U8: imx = UINT8_MAX; break;
    case RVL_DTYPE_U16: imx = UINT16_MAX; break;
    case RVL_DTYPE_U32: imx = UINT32_MAX; break;
    case RVL_DTYPE_U64: imx = -1; break;
    default: break;
  }
  const int64_t ispecial[] = {imn, imx, -1, 0, 1, 2, -7, imx - 1, imn + 1};
  for (int64_t i = 0; i < n; ++i) {
    ref::Value v;
    if (ref::is_float(dt)) {
      switch (kind) {
        case Data::Mixed: v.f = unit(s) * 8 - 4; break;
        case Data::Small: v.f = unit(s) * 2 - 1; break;
        case Data::Positive: v.f = 0.25 + unit(s) * 3.75; break;
        case Data::Specials: v.f = fspecial[i % 11]; break;
      }
    } else if (dt == RVL_DTYPE_BOOL) {
      v.i = kind == Data::Specials ? (i & 1) : int64_t(next(s) & 1);
      if (kind == Data::Positive) v.i = 1;
    } else {
      switch (kind) {
        case Data::Mixed:
          v.i = (i % 5 == 0) ? ispecial[(i / 5) % 9] : int64_t(next(s));  // wrapped by set()
          break;
        case Data::Small: v.i = int64_t(next(s) % 16) - (dt == RVL_DTYPE_U8 ? 0 : 8); break;
        case Data::Positive: v.i = 1 + int64_t(next(s) % 15); break;
        case Data::Specials: v.i = ispecial[i % 9]; break;
      }
    }
    h.set(i, v);
  }
  return h;
}

ref::HostBuffer make_values(int32_t dt, const std::vector<ref::Value>& values) {
  ref::HostBuffer h(dt, int64_t(values.size()));
  for (size_t i = 0; i < values.size(); ++i) h.set(int64_t(i), values[i]);
  return h;
}

ProgramCase simple_program(const std::vector<int64_t>& shape, std::vector<Input> inputs,
                           std::vector<rvl_instruction> code, double thr) {
  ProgramCase pc;
  pc.shape = shape;
  pc.inputs = std::move(inputs);
  pc.code = std::move(code);
  const int32_t odt = pc.code.back().dtype;
  pc.out = make_data(odt, count(shape), 999, Data::Small);  // not zero: untouched must stay
  pc.out_view = contiguous(shape);
  pc.threshold = thr;
  return pc;
}

namespace {

void require_supported(int rank, const std::vector<int32_t>& dtypes) {
  const Session& s = session();
  if (rank > s.props.max_rank)
    throw Skip("rank " + std::to_string(rank) + " exceeds the device's max_rank " +
               std::to_string(s.props.max_rank));
  for (int32_t dt : dtypes) s.require_dtype(dt);
}

rvl_operand operand_for(const GuardedBuffer& g, int32_t dtype, rvl_view v) {
  rvl_operand o{};
  o.struct_size = sizeof o;
  o.buffer = g.get();
  o.dtype = dtype;
  v.offset += g.payload_offset();
  o.view = v;
  return o;
}

// Uploads the inputs; checks after the kernel that none changed and no guard was touched.
struct Uploaded {
  std::vector<std::unique_ptr<GuardedBuffer>> bufs;
  std::vector<rvl_operand> ops;
  void add(const Input& in) {
    bufs.push_back(std::make_unique<GuardedBuffer>(in.data));
    ops.push_back(operand_for(*bufs.back(), in.data.dtype, in.view));
  }
  void check_unchanged(const std::vector<Input>& ins, const char* what) const {
    for (size_t i = 0; i < ins.size(); ++i) {
      const ref::HostBuffer after = bufs[i]->read_checked(std::string(what) + " " + std::to_string(i));
      if (after.bytes != ins[i].data.bytes)
        throw Failure(std::string(what) + " " + std::to_string(i) + " was modified by the kernel");
    }
  }
};

std::vector<const ref::HostBuffer*> host_ptrs(const std::vector<Input>& ins) {
  std::vector<const ref::HostBuffer*> v;
  for (const Input& i : ins) v.push_back(&i.data);
  return v;
}

std::vector<rvl_operand> host_operands(const std::vector<Input>& ins) {
  std::vector<rvl_operand> v;
  for (const Input& i : ins) {
    rvl_operand o{};
    o.struct_size = sizeof o;
    o.dtype = i.data.dtype;
    o.view = i.view;
    v.push_back(o);
  }
  return v;
}

}  // namespace

void ProgramCase::run(Measure& m) const {
  const Session& s = session();
  // What a host sends: `code` with the ops the device lacks (or --decompose masks) rewritten;
  // the reference runs `code` itself.
  const std::vector<rvl_instruction> sent = s.lower(code);
  const std::vector<rvl_instruction> sent_epilogue = epilogue.empty() ? std::vector<rvl_instruction>{} : s.lower(epilogue);
  std::vector<int32_t> dts{out.dtype};
  for (const rvl_instruction& i : sent) dts.push_back(i.dtype);
  for (const rvl_instruction& i : sent_epilogue) dts.push_back(i.dtype);
  std::vector<std::vector<rvl_instruction>> sent_stages;
  for (const Stage& st : stages) {
    sent_stages.push_back(s.lower(st.code));
    for (const rvl_instruction& i : sent_stages.back()) dts.push_back(i.dtype);
    dts.push_back(st.acc_dtype);
  }
  require_supported(int(shape.size()), dts);
  if (!stages.empty()) {
    const uint32_t ops = RVL_HAS_MEMBER(&s.props, rvl_device_properties, reduce_chain_ops) ? s.props.reduce_chain_ops : 0;
    bool all = (ops >> reduce_op) & 1u;
    for (const Stage& st : stages) all = all && ((ops >> st.reduce_op) & 1u);
    if (!all) throw Skip("the device does not list these reductions in rvl_device_properties.reduce_chain_ops (optional)");
  } else if (!epilogue.empty()) {
    const uint32_t ops = RVL_HAS_MEMBER(&s.props, rvl_device_properties, reduce_epilogue_ops) ? s.props.reduce_epilogue_ops : 0;
    if (!((ops >> reduce_op) & 1u))
      throw Skip("the device does not list this reduction in rvl_device_properties.reduce_epilogue_ops (optional)");
  }

  Uploaded up;
  for (const Input& in : inputs) up.add(in);
  GuardedBuffer ob(out);
  rvl_program p{};
  p.struct_size = sizeof p;
  p.rank = int32_t(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) p.shape[d] = shape[d];
  p.n_inputs = int32_t(inputs.size());
  p.inputs = up.ops.empty() ? nullptr : up.ops.data();
  p.n_instructions = int32_t(sent.size());
  p.instructions = sent.data();
  p.reduce_op = reduce_op;
  p.reduce_axes = reduce_axes;
  p.output = operand_for(ob, out.dtype, out_view);
  if (!epilogue.empty()) {
    p.n_epilogue = int32_t(sent_epilogue.size());
    p.epilogue = sent_epilogue.data();
    p.acc_dtype = acc_dtype;
  }
  // The stages as sent (lowered) and as the reference reads them.
  const auto stage_array = [&](bool lowered) {
    std::vector<rvl_reduce_stage> v;
    for (size_t k = 0; k < stages.size(); ++k) {
      const std::vector<rvl_instruction>& c = lowered ? sent_stages[k] : stages[k].code;
      v.push_back({sizeof(rvl_reduce_stage), stages[k].reduce_op, stages[k].acc_dtype, int32_t(c.size()), c.data()});
    }
    return v;
  };
  const std::vector<rvl_reduce_stage> dev_stages = stage_array(true), host_stages = stage_array(false);
  p.n_stages = int32_t(stages.size());
  p.stages = dev_stages.empty() ? nullptr : dev_stages.data();
  check_ok(s.api->execute_program(s.device, nullptr, &p), "execute_program");
  check_ok(s.api->synchronize(s.device), "synchronize");
  up.check_unchanged(inputs, "input");
  const ref::HostBuffer got = ob.read_checked("output");

  // The reference sees the same program on unguarded host copies.
  const std::vector<rvl_operand> hops = host_operands(inputs);
  rvl_program hp = p;
  hp.inputs = hops.empty() ? nullptr : hops.data();
  hp.n_instructions = int32_t(code.size());
  hp.instructions = code.data();
  hp.output.view = out_view;
  if (!epilogue.empty()) hp.n_epilogue = int32_t(epilogue.size()), hp.epilogue = epilogue.data();
  hp.stages = host_stages.empty() ? nullptr : host_stages.data();
  ref::HostBuffer want = out;
  ref::run_program(hp, host_ptrs(inputs), want);
  m.threshold = threshold;
  m.error = compare(got, want, threshold, "output");
}

void ContractionCase::run(Measure& meas) const {
  const Session& s = session();
  if (!s.has_contraction()) throw Skip("execute_contraction is not supported (NULL)");
  const std::vector<rvl_instruction> sent = s.lower(epilogue);  // as in ProgramCase::run
  std::vector<int32_t> dts{dtype};
  for (const rvl_instruction& i : sent) dts.push_back(i.dtype);
  require_supported(int(batch.size()) + 2, dts);

  Uploaded up;
  up.add(a);
  up.add(b);
  Uploaded epi;
  for (const Input& in : epilogue_inputs) epi.add(in);
  GuardedBuffer cb(c);
  rvl_contraction call{};
  call.struct_size = sizeof call;
  call.dtype = dtype;
  call.batch_rank = int32_t(batch.size());
  for (size_t d = 0; d < batch.size(); ++d) call.batch_shape[d] = batch[d];
  call.m = m;
  call.n = n;
  call.k = k;
  call.a = up.ops[0];
  call.b = up.ops[1];
  call.c = operand_for(cb, dtype, c_view);
  call.n_epilogue_inputs = int32_t(epilogue_inputs.size());
  call.epilogue_inputs = epi.ops.empty() ? nullptr : epi.ops.data();
  call.n_epilogue = int32_t(sent.size());
  call.epilogue = sent.empty() ? nullptr : sent.data();
  const size_t ranks = std::max({m_shape.size(), k_shape.size(), n_shape.size()});
  if (ranks > 0) {  // ABI 1.8 (im2col block): only where the device states it takes them
    const int32_t axes = RVL_HAS_MEMBER(&s.props, rvl_device_properties, contraction_axes) ? s.props.contraction_axes : 0;
    if (axes < int32_t(ranks))
      throw Skip("multi-axis contractions: contraction_axes is " + std::to_string(axes) + ", the case needs " +
                 std::to_string(ranks) + " (optional, allowed)");
    call.m_rank = int32_t(m_shape.size());
    call.k_rank = int32_t(k_shape.size());
    call.n_rank = int32_t(n_shape.size());
    std::copy(m_shape.begin(), m_shape.end(), call.m_shape);
    std::copy(k_shape.begin(), k_shape.end(), call.k_shape);
    std::copy(n_shape.begin(), n_shape.end(), call.n_shape);
    std::copy(a_m.begin(), a_m.end(), call.a_m_strides);
    std::copy(a_k.begin(), a_k.end(), call.a_k_strides);
    std::copy(b_k.begin(), b_k.end(), call.b_k_strides);
    std::copy(b_n.begin(), b_n.end(), call.b_n_strides);
  }
  check_ok(s.api->execute_contraction(s.device, nullptr, &call), "execute_contraction");
  check_ok(s.api->synchronize(s.device), "synchronize");
  up.check_unchanged({a, b}, "operand");
  epi.check_unchanged(epilogue_inputs, "epilogue input");
  const ref::HostBuffer got = cb.read_checked("C");

  rvl_contraction hk = call;
  hk.a.view = a.view;
  hk.b.view = b.view;
  hk.c.view = c_view;
  const std::vector<rvl_operand> hops = host_operands(epilogue_inputs);
  hk.epilogue_inputs = hops.empty() ? nullptr : hops.data();
  hk.n_epilogue = int32_t(epilogue.size());
  hk.epilogue = epilogue.empty() ? nullptr : epilogue.data();
  ref::HostBuffer want = c;
  ref::run_contraction(hk, a.data, b.data, host_ptrs(epilogue_inputs), want);
  meas.threshold = threshold;
  meas.error = compare(got, want, threshold, "C");
}

}  // namespace rvl::conformance
