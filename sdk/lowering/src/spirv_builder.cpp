#include <ravel/lowering/spirv_builder.hpp>

#include <cstring>

namespace rvl::lower {

using spv::Op;

void append_string(Words& w, const std::string& s) {
  const size_t n = s.size() + 1, start = w.size();
  w.resize(start + (n + 3) / 4, 0);
  std::memcpy(&w[start], s.c_str(), n);
}

SpirvBuilder::SpirvBuilder() {
  emit(memmodel_, Op::OpMemoryModel,
       {uint32_t(spv::AddressingModel::Physical64), uint32_t(spv::MemoryModel::OpenCL)});
}

void SpirvBuilder::emit(Words& section, Op o, const Words& operands) {
  section.push_back(uint32_t((operands.size() + 1) << 16) | uint32_t(o));
  section.insert(section.end(), operands.begin(), operands.end());
}

void SpirvBuilder::capability(spv::Capability c) {
  if (caps_seen_[uint32_t(c)]) return;
  caps_seen_[uint32_t(c)] = true;
  emit(caps_, Op::OpCapability, {uint32_t(c)});
}

Id SpirvBuilder::import_opencl_std() {
  if (opencl_std_) return opencl_std_;
  opencl_std_ = fresh();
  Words w{opencl_std_};
  append_string(w, "OpenCL.std");
  emit(ext_, Op::OpExtInstImport, w);
  return opencl_std_;
}

void SpirvBuilder::entry_point(Id fn, const std::string& n, const Words& interface) {
  Words w{uint32_t(spv::ExecutionModel::Kernel), fn};
  append_string(w, n);
  w.insert(w.end(), interface.begin(), interface.end());
  emit(entry_, Op::OpEntryPoint, w);
}

void SpirvBuilder::execution_mode(Id fn, spv::ExecutionMode m, const Words& literals) {
  Words w{fn, uint32_t(m)};
  w.insert(w.end(), literals.begin(), literals.end());
  emit(exec_, Op::OpExecutionMode, w);
}

void SpirvBuilder::name(Id target, const std::string& n) {
  Words w{target};
  append_string(w, n);
  emit(names_, Op::OpName, w);
}

void SpirvBuilder::decorate(Id target, spv::Decoration d, const Words& extra) {
  Words w{target, uint32_t(d)};
  w.insert(w.end(), extra.begin(), extra.end());
  emit(deco_, Op::OpDecorate, w);
}

Id SpirvBuilder::cached_type(const Words& key, Op o, const Words& operands) {
  auto it = types_.find(key);
  if (it != types_.end()) return it->second;
  const Id r = fresh();
  Words w{r};
  w.insert(w.end(), operands.begin(), operands.end());
  emit(globals_, o, w);
  return types_[key] = r;
}

Id SpirvBuilder::t_void() { return cached_type({uint32_t(Op::OpTypeVoid)}, Op::OpTypeVoid, {}); }
Id SpirvBuilder::t_bool() { return cached_type({uint32_t(Op::OpTypeBool)}, Op::OpTypeBool, {}); }
Id SpirvBuilder::t_int(uint32_t bits) {
  if (bits == 8) capability(spv::Capability::Int8);
  if (bits == 16) capability(spv::Capability::Int16);  // i16, u16, and f16/bf16 storage
  if (bits == 64) capability(spv::Capability::Int64);
  return cached_type({uint32_t(Op::OpTypeInt), bits}, Op::OpTypeInt, {bits, 0});
}
Id SpirvBuilder::t_float(uint32_t bits) {
  if (bits == 64) capability(spv::Capability::Float64);
  return cached_type({uint32_t(Op::OpTypeFloat), bits}, Op::OpTypeFloat, {bits});
}
Id SpirvBuilder::t_vec(Id elem, uint32_t n) {
  return cached_type({uint32_t(Op::OpTypeVector), elem, n}, Op::OpTypeVector, {elem, n});
}
Id SpirvBuilder::t_array(Id elem, uint32_t n) {
  const Id len = c_int(32, n);
  return cached_type({uint32_t(Op::OpTypeArray), elem, len}, Op::OpTypeArray, {elem, len});
}
Id SpirvBuilder::t_ptr(spv::StorageClass sc, Id elem) {
  return cached_type({uint32_t(Op::OpTypePointer), uint32_t(sc), elem}, Op::OpTypePointer,
                     {uint32_t(sc), elem});
}
Id SpirvBuilder::t_fn(Id ret, const Words& params) {
  Words key{uint32_t(Op::OpTypeFunction), ret}, ops{ret};
  key.insert(key.end(), params.begin(), params.end());
  ops.insert(ops.end(), params.begin(), params.end());
  return cached_type(key, Op::OpTypeFunction, ops);
}

Id SpirvBuilder::cached_const(Op o, Id type, const Words& value) {
  Words key{uint32_t(o), type};
  key.insert(key.end(), value.begin(), value.end());
  auto it = consts_.find(key);
  if (it != consts_.end()) return it->second;
  const Id r = fresh();
  Words w{type, r};
  w.insert(w.end(), value.begin(), value.end());
  emit(globals_, o, w);
  return consts_[key] = r;
}

Id SpirvBuilder::c_bool(bool v) {
  return cached_const(v ? Op::OpConstantTrue : Op::OpConstantFalse, t_bool(), {});
}
Id SpirvBuilder::c_int(uint32_t bits, uint64_t v) {
  const Id t = t_int(bits);
  if (bits == 64) return cached_const(Op::OpConstant, t, {uint32_t(v), uint32_t(v >> 32)});
  // Narrow literals occupy one word; the spec requires the high bits of the word to be zero
  // for the sign-agnostic OpenCL integer types.
  const uint64_t mask = bits == 32 ? 0xffffffffull : (1ull << bits) - 1;
  return cached_const(Op::OpConstant, t, {uint32_t(v & mask)});
}
Id SpirvBuilder::c_float(uint32_t bits, double v) {
  if (bits == 32) {
    const float f = float(v);
    uint32_t raw;
    std::memcpy(&raw, &f, 4);
    return c_float_bits(32, raw);
  }
  uint64_t raw;
  std::memcpy(&raw, &v, 8);
  return c_float_bits(64, raw);
}
Id SpirvBuilder::c_float_bits(uint32_t bits, uint64_t raw) {
  const Id t = t_float(bits);
  if (bits == 64) return cached_const(Op::OpConstant, t, {uint32_t(raw), uint32_t(raw >> 32)});
  return cached_const(Op::OpConstant, t, {uint32_t(raw)});
}
Id SpirvBuilder::c_null(Id type) { return cached_const(Op::OpConstantNull, type, {}); }

Id SpirvBuilder::global_var(Id ptr_type, spv::StorageClass sc) {
  const Id r = fresh();
  emit(globals_, Op::OpVariable, {ptr_type, r, uint32_t(sc)});
  return r;
}

Id SpirvBuilder::builtin_input(spv::BuiltIn b) {
  const Id v3 = t_vec(t_int(64), 3);
  const Id var = global_var(t_ptr(spv::StorageClass::Input, v3), spv::StorageClass::Input);
  decorate(var, spv::Decoration::BuiltIn, {uint32_t(b)});
  decorate(var, spv::Decoration::Constant);
  return var;
}

Id SpirvBuilder::begin_function(Id ret, Id fn_type) {
  const Id r = fresh();
  emit(code_, Op::OpFunction, {ret, r, uint32_t(spv::FunctionControlMask::MaskNone), fn_type});
  return r;
}
Id SpirvBuilder::param(Id type) {
  const Id r = fresh();
  emit(code_, Op::OpFunctionParameter, {type, r});
  return r;
}
void SpirvBuilder::end_function() { emit(code_, Op::OpFunctionEnd, {}); }
void SpirvBuilder::label(Id l) {
  emit(code_, Op::OpLabel, {l});
  block_ = l;
}
Id SpirvBuilder::op(Op o, Id type, const Words& operands) {
  const Id r = fresh();
  Words w{type, r};
  w.insert(w.end(), operands.begin(), operands.end());
  emit(code_, o, w);
  return r;
}
void SpirvBuilder::op_void(Op o, const Words& operands) { emit(code_, o, operands); }
Id SpirvBuilder::ext(Id type, uint32_t opencl_std_op, const Words& operands) {
  Words w{import_opencl_std(), opencl_std_op};
  w.insert(w.end(), operands.begin(), operands.end());
  return op(Op::OpExtInst, type, w);
}
void SpirvBuilder::branch(Id target) { op_void(Op::OpBranch, {target}); }
void SpirvBuilder::branch_cond(Id cond, Id t, Id f) {
  op_void(Op::OpBranchConditional, {cond, t, f});
}

Words SpirvBuilder::finish() const {
  // Header: magic, version 1.0 (what OpenCL 1.2/2.x consumers and IGC all accept), generator 0,
  // id bound, schema 0.
  Words out{spv::MagicNumber, 0x00010000u, 0u, next_id_, 0u};
  for (const Words* s : {&caps_, &ext_, &memmodel_, &entry_, &exec_, &names_, &deco_, &globals_, &code_})
    out.insert(out.end(), s->begin(), s->end());
  return out;
}

}  // namespace rvl::lower
