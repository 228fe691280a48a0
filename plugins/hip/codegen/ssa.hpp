// Instructions, views and literals as HIP C++: the shared C-family renderer
// (<ravel/lowering/c_source.hpp>: one exhaustive switch over rvl_op, Note [One op table]; view
// addresses and validity tests with every constant baked in) in the HIP dialect, over the shared
// simplified space (<ravel/lowering/space.hpp>). These spellings are the ones the rest of the
// generator and its tests use.
#pragma once

#include <ravel/lowering/c_source.hpp>

#include <string>

namespace rvl::hip {

namespace c = lower::c;
using c::address;
using c::decompose;
using c::index_name;
using c::index_names;
using c::normalise;
using c::SsaInput;
using c::validity;
using lower::Space;
using lower::SpaceView;

inline const char* ctype(int32_t dtype) { return c::ctype(c::kHip, dtype); }
inline const char* utype(int32_t dtype) { return c::utype(c::kHip, dtype); }
inline std::string literal(int32_t dtype, const rvl_scalar& v) { return c::literal(c::kHip, dtype, v); }
inline std::string emit_ssa(std::string& out, const SsaInput& in, const std::string& indent) {
  return c::emit_ssa(c::kHip, out, in, indent);
}
inline std::string combine(int32_t rop, int32_t dtype, const std::string& a, const std::string& b) {
  return c::combine(c::kHip, rop, dtype, a, b);
}
inline std::string identity(int32_t rop, int32_t dtype) { return c::identity(c::kHip, rop, dtype); }
inline std::string load(const SpaceView& v, const std::string& param, const std::vector<std::string>& idx,
                        const std::vector<int64_t>& extent) {
  return c::load(c::kHip, v, param, idx, extent);
}
// acc + a * b in the contraction's dtype (FMA for floats: docs/hip.md says so).
inline std::string multiply_add(int32_t dtype, const std::string& acc, const std::string& a,
                                const std::string& b) {
  return c::multiply_add(c::kHip, dtype, acc, a, b);
}

}  // namespace rvl::hip
