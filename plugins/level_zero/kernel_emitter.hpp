// What the program and contraction emitters share: the kernel signature, meta-block loads,
// index arithmetic, strided (and padded) loads and stores, loops, local memory and barriers,
// and the evaluation of an instruction list.
#pragma once

#include <ravel/backend.h>

#include <functional>
#include <string>
#include <vector>

#include <ravel/lowering/parametric.hpp>

#include "scalar_ops.hpp"

namespace rvl::l0 {

// The parametric lowering is the SDK's (sdk/lowering, Note [Generic kernels]).
using lower::ContractionLaunch;
using lower::ContractionMeta;
using lower::ContractionSig;
using lower::InputSig;
using lower::kGemmTile;
using lower::kReduceGroup;
using lower::ProgramLaunch;
using lower::ProgramMeta;
using lower::ProgramSig;
using lower::plan_contraction;
using lower::plan_program;

constexpr const char* kKernelName = "rvl_kernel";

class KernelEmitter {
 public:
  KernelEmitter();

  SpirvBuilder& b() { return b_; }
  ScalarOps& ops() { return ops_; }

  // Declares the kernel `void rvl_kernel(T0* p0, T1* p1, ..., long* meta)` with one global
  // pointer per dtype in `pointer_dtypes`, opens its entry block and loads the builtins and the
  // `meta_size` entries of the meta block there (so they dominate every later use). Returns the
  // pointer params.
  std::vector<Id> begin_kernel(const std::vector<int32_t>& pointer_dtypes, size_t meta_size,
                               uint32_t local_x, uint32_t local_y = 1);
  Words end_kernel();  // closes the function, writes the entry point; returns the module

  Id meta(size_t index) const { return meta_.at(index); }  // meta[index] as an i64

  // Builtins, x component, as i64 (loaded in the entry block).
  Id global_id() const { return gid_; }
  Id global_size() const { return gsize_; }
  Id group_id() const { return group_; }
  Id num_groups() const { return ngroups_; }
  Id local_id() const { return lid_; }

  // i64 helpers.
  Id i64(int64_t v) { return b_.c_int(64, uint64_t(v)); }
  Id add(Id a, Id x) { return b_.op(spv::Op::OpIAdd, b_.t_int(64), {a, x}); }
  Id mul(Id a, Id x) { return b_.op(spv::Op::OpIMul, b_.t_int(64), {a, x}); }
  Id div(Id a, Id x) { return b_.op(spv::Op::OpSDiv, b_.t_int(64), {a, x}); }
  Id rem(Id a, Id x) { return b_.op(spv::Op::OpSRem, b_.t_int(64), {a, x}); }
  Id lt(Id a, Id x) { return b_.op(spv::Op::OpSLessThan, b_.t_bool(), {a, x}); }
  Id le(Id a, Id x) { return b_.op(spv::Op::OpSLessThanEqual, b_.t_bool(), {a, x}); }
  Id land(Id a, Id x) { return b_.op(spv::Op::OpLogicalAnd, b_.t_bool(), {a, x}); }

  // Splits a flat index over `extents` (row-major, last fastest) into per-axis indices.
  std::vector<Id> unflatten(Id flat, const std::vector<Id>& extents);

  // base[addr] with the dtype's storage type (bool normalised to 0/1).
  Id load(int32_t dtype, Id base, Id addr);
  void store(int32_t dtype, Id base, Id addr, Id value);
  // `valid` ? base[addr] : 0, addressing nothing when invalid (padding costs no copy).
  Id load_masked(int32_t dtype, Id base, Id addr, Id valid);

  // A counted loop: for (i = start; i < end; i += step) body(i); with extra loop-carried values
  // (`carried` initial values, body returns their next values). Returns the final carried values.
  std::vector<Id> loop(Id start, Id end, Id step, const std::vector<std::pair<Id, Id>>& carried,
                       const std::function<std::vector<Id>(Id i, const std::vector<Id>&)>& body);
  // if (cond) body();
  void if_then(Id cond, const std::function<void()>& body);

  // A __local array of `n` elements of `dtype`'s storage type; returns the variable.
  Id local_array(int32_t dtype, uint32_t n);
  Id local_ptr(int32_t dtype, Id array, Id index);  // &array[index]
  void barrier();  // work-group barrier with work-group memory ordering

  // Evaluates an instruction list; `load(j, dtype)` yields LOAD of input j, `acc` the ACC value
  // (f32 where ACC is a half), or in a chain (ABI 1.11; `accs` not empty) accs[arg]. Halves are
  // computed in f32 (lower::widen_halves, Note [Halves in kernels]); the value is returned in
  // `as`, converted once (a half output: rounded once).
  Id evaluate(const std::vector<rvl_instruction>& ins,
              const std::function<Id(int32_t input, int32_t dtype)>& load_input, Id acc, int32_t as,
              const std::vector<Id>& accs = {});

 private:
  Id builtin_x(spv::BuiltIn which);

  SpirvBuilder b_;
  ScalarOps ops_;
  Id fn_ = 0;
  Words interface_;
  std::vector<Id> meta_;
  Id gid_ = 0, gsize_ = 0, group_ = 0, ngroups_ = 0, lid_ = 0;
};

}  // namespace rvl::l0
