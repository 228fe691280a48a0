// A SPIR-V module builder for OpenCL-flavoured compute kernels (Kernel capability, Physical64
// addressing, OpenCL memory model), for any backend that renders SPIR-V (plugins/level_zero; an
// OpenCL backend taking SPIR-V would use it as is). Library Ravel::lowering_spirv, built when
// the SPIR-V Headers are found. Enums come from the SPIR-V Headers package; nothing here
// needs a compiler or a library at run time.
//
// The builder keeps the logical sections of a module apart (capabilities, imports, entry points,
// names, decorations, types/constants/globals, function bodies) and concatenates them in the
// order the specification requires when finish() is called. Types and constants are cached, so
// asking twice for `i32` or for the constant 0 yields one id. The builder also tracks the label
// of the block being emitted, which OpPhi operands need.
#pragma once

#include <spirv/unified1/spirv.hpp11>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rvl::lower {

using Words = std::vector<uint32_t>;
using Id = uint32_t;

class SpirvBuilder {
 public:
  SpirvBuilder();

  Id fresh() { return next_id_++; }

  // ---- module-level sections --------------------------------------------------------------
  void capability(spv::Capability c);
  Id import_opencl_std();  // "OpenCL.std", imported once
  void entry_point(Id fn, const std::string& name, const Words& interface);
  void execution_mode(Id fn, spv::ExecutionMode m, const Words& literals);
  void name(Id target, const std::string& n);
  void decorate(Id target, spv::Decoration d, const Words& extra = {});

  // ---- types (cached) -----------------------------------------------------------------------
  Id t_void();
  Id t_bool();
  Id t_int(uint32_t bits);  // sign-agnostic, as the OpenCL environment requires
  Id t_float(uint32_t bits);
  Id t_vec(Id elem, uint32_t n);
  Id t_array(Id elem, uint32_t n);
  Id t_ptr(spv::StorageClass sc, Id elem);
  Id t_fn(Id ret, const Words& params);

  // ---- constants (cached) -------------------------------------------------------------------
  Id c_bool(bool v);
  Id c_int(uint32_t bits, uint64_t v);  // v is truncated to `bits`
  Id c_float(uint32_t bits, double v);  // rounded to the type (binary32 for 32 bits)
  Id c_float_bits(uint32_t bits, uint64_t raw);
  Id c_null(Id type);

  // A module-scope variable (Input builtins, Workgroup arrays).
  Id global_var(Id ptr_type, spv::StorageClass sc);
  Id builtin_input(spv::BuiltIn b);  // a v3u64 Input variable decorated BuiltIn + Constant

  // ---- function bodies ----------------------------------------------------------------------
  Id begin_function(Id ret, Id fn_type);
  Id param(Id type);
  void end_function();
  void label(Id l);  // starts a block
  Id current_block() const { return block_; }
  Id op(spv::Op o, Id type, const Words& operands);  // an instruction with a result
  void op_void(spv::Op o, const Words& operands);    // an instruction without one
  Id ext(Id type, uint32_t opencl_std_op, const Words& operands);  // OpExtInst OpenCL.std

  // Control-flow helpers (unstructured control flow is valid for the Kernel capability).
  void branch(Id target);
  void branch_cond(Id cond, Id if_true, Id if_false);

  Words finish() const;  // the module as SPIR-V 1.0 words

 private:
  static void emit(Words& section, spv::Op o, const Words& operands);
  Id cached_type(const Words& key, spv::Op o, const Words& operands);
  Id cached_const(spv::Op o, Id type, const Words& value);

  Id next_id_ = 1;
  Id block_ = 0;
  Id opencl_std_ = 0;
  Words caps_, ext_, memmodel_, entry_, exec_, names_, deco_, globals_, code_;
  std::map<Words, Id> types_, consts_;
  std::map<uint32_t, bool> caps_seen_;
};

// Appends a NUL-terminated string to an operand list, padded to whole words.
void append_string(Words& w, const std::string& s);

}  // namespace rvl::lower
