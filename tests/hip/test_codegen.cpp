// The HIP code generator on its own: which kernel shape it picks for which views, the exact
// literals and edge-case helpers it emits, warp-width awareness, every op of the op table, and
// (when NVRTC / hiprtc are on this machine) that what it emits compiles for sm_90, gfx90a and
// gfx1030. Semantics are checked end to end by the conformance suite on the CPU emulator.
#include <boost/test/unit_test.hpp>

#include "codegen/codegen.hpp"
#include "codegen/ssa.hpp"
#include "runtime/rtc.hpp"

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

#include <ravel/half.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace rvl::hip;
namespace V = rvl::validate;

namespace {

std::byte g_memory[64];  // views are never dereferenced by the generator: any base will do

V::View view(int32_t dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset = 0) {
  V::View v;
  v.data = g_memory;
  v.dtype = dtype;
  v.offset = offset;
  for (size_t d = 0; d < shape.size(); ++d) v.stride[d] = strides[d], v.lo[d] = 0, v.hi[d] = shape[d];
  return v;
}

std::vector<int64_t> dense(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t n = 1;
  for (size_t d = shape.size(); d-- > 0;) s[d] = n, n *= shape[d];
  return s;
}

rvl_instruction ins(int32_t op, int32_t dt, int32_t a = -1, int32_t b = -1, int32_t c = -1, int32_t arg = 0) {
  rvl_instruction i{};
  i.op = op, i.dtype = dt, i.src[0] = a, i.src[1] = b, i.src[2] = c, i.arg = arg;
  return i;
}

// out = in0 + in1 over `shape` (inputs viewed as given, output dense).
struct Add {
  std::vector<rvl_instruction> code;
  V::Program p;
  Add(std::vector<int64_t> shape, V::View a, V::View b, int32_t dt = RVL_DTYPE_F32) {
    code = {ins(RVL_OP_LOAD, dt, -1, -1, -1, 0), ins(RVL_OP_LOAD, dt, -1, -1, -1, 1), ins(RVL_OP_ADD, dt, 0, 1)};
    p.rank = int32_t(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) p.shape[d] = shape[d];
    p.inputs = {a, b};
    p.ins = code.data();
    p.n_ins = int32_t(code.size());
    p.out = view(dt, shape, dense(shape));
  }
};

// sum over `axes` of a dense f32 input of `shape`.
struct Sum {
  std::vector<rvl_instruction> code{ins(RVL_OP_LOAD, RVL_DTYPE_F32, -1, -1, -1, 0)};
  V::Program p;
  Sum(std::vector<int64_t> shape, uint32_t axes) {
    p.rank = int32_t(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) p.shape[d] = shape[d];
    p.inputs = {view(RVL_DTYPE_F32, shape, dense(shape))};
    p.ins = code.data();
    p.n_ins = 1;
    p.reduce_op = RVL_REDUCE_SUM;
    p.reduce_axes = axes;
    std::vector<int64_t> os = dense(shape);
    int64_t n = 1;
    for (size_t d = shape.size(); d-- > 0;)
      if ((axes >> d) & 1u) os[d] = 0;
      else os[d] = n, n *= shape[d];
    p.out = view(RVL_DTYPE_F32, shape, os);
  }
};

Target nvidia() { return Target{Platform::Nvidia, "sm_90", 32, 132}; }
Target cdna() { return Target{Platform::Amd, "gfx90a", 64, 104}; }
Target rdna() { return Target{Platform::Amd, "gfx1030", 32, 40}; }

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Compiles `k` for `t` if that compiler is here (true if it compiled or was unavailable).
void check_compiles(const KernelSource& k, const Target& t) {
  std::string why;
  if (!compiler_available(t.platform, &why)) {
    BOOST_TEST_MESSAGE("no compiler for " << t.arch << ": " << why);
    return;
  }
  try {
    compile_kernel(k, t);
  } catch (const std::exception& e) {
    BOOST_ERROR("compiling " << k.name << " for " << t.arch << ": " << e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(dense_views_merge_into_one_vectorised_axis) {
  const std::vector<int64_t> s{4, 6, 8};
  Add add(s, view(RVL_DTYPE_F32, s, dense(s)), view(RVL_DTYPE_F32, s, dense(s), 64));
  const KernelSource k = generate_program(add.p, nvidia());
  BOOST_TEST(has(k.summary, "rank 3 -> 1"));
  BOOST_TEST(has(k.summary, "vec4"));
  BOOST_TEST(has(k.source, "*(const rvl_vec4<float>*)(in1 + 64 + 4 * q)"));
  BOOST_TEST(k.param_types.size() == 3u);
  check_compiles(k, nvidia());
}

BOOST_AUTO_TEST_CASE(transposed_broadcast_and_unaligned_views_are_not_vectorised) {
  const std::vector<int64_t> s{6, 8};
  Add t(s, view(RVL_DTYPE_F32, s, {1, 6}), view(RVL_DTYPE_F32, s, dense(s)));
  BOOST_TEST(!has(generate_program(t.p, nvidia()).summary, "vec4"));
  BOOST_TEST(has(generate_program(t.p, nvidia()).summary, "rank 2 -> 2"));
  Add u(s, view(RVL_DTYPE_F32, s, dense(s), 1), view(RVL_DTYPE_F32, s, dense(s)));  // offset 1
  BOOST_TEST(!has(generate_program(u.p, nvidia()).summary, "vec4"));
  Add b(s, view(RVL_DTYPE_F32, s, {0, 1}), view(RVL_DTYPE_F32, s, dense(s)));  // row broadcast
  BOOST_TEST(has(generate_program(b.p, nvidia()).summary, "rank 2 -> 2"));
}

BOOST_AUTO_TEST_CASE(padding_becomes_a_validity_test_and_never_an_address) {
  const std::vector<int64_t> s{5, 7};
  V::View pad = view(RVL_DTYPE_F32, s, {3, 1}, -5);
  pad.lo[0] = 1, pad.hi[0] = 4, pad.lo[1] = 2, pad.hi[1] = 5;
  Add a(s, pad, view(RVL_DTYPE_F32, s, dense(s)));
  const KernelSource k = generate_program(a.p, nvidia());
  BOOST_TEST(has(k.source, "((i0 >= 1 && i0 < 4) && (i1 >= 2 && i1 < 5)) ? in0[(-5 + i0 * (3) + i1)] : (float)0"));
  check_compiles(generate_program(a.p, cdna()), cdna());
}

BOOST_AUTO_TEST_CASE(empty_views_read_zero_and_empty_spaces_launch_nothing) {
  const std::vector<int64_t> s{3, 4};
  V::View e = view(RVL_DTYPE_I32, s, {0, 0});
  e.empty = true;
  Add a(s, e, view(RVL_DTYPE_I32, s, dense(s)), RVL_DTYPE_I32);
  BOOST_TEST(has(generate_program(a.p, nvidia()).source, "const int v0 = (int)0;"));
  Add z({3, 0}, view(RVL_DTYPE_F32, {3, 0}, {0, 0}), view(RVL_DTYPE_F32, {3, 0}, {0, 0}));
  BOOST_TEST(generate_program(z.p, nvidia()).grid[0] == 0u);
  Sum r({4, 0}, 2u);  // reduced extent 0: every output gets the identity
  BOOST_TEST(generate_program(r.p, nvidia()).grid[0] > 0u);
}

// LOGSUMEXP (ABI 1.4) carries the pair (m, s): both halves are shuffled by every lane, merged by
// rvl_lse_merge_float, and an f64 output of f32 values forms only m + log(s) in f64. The values are
// checked by the conformance group `logsumexp` on the emulator (scripts/check-hip.sh).
BOOST_AUTO_TEST_CASE(logsumexp_keeps_a_max_and_a_sum) {
  Sum rows({512, 1024}, 2u);
  rows.p.reduce_op = RVL_REDUCE_LOGSUMEXP;
  const KernelSource k = generate_program(rows.p, nvidia());
  BOOST_TEST(has(k.source, "const float other_am = rvl_shfl_down(am, d);"));
  BOOST_TEST(has(k.source, "const float other_as = rvl_shfl_down(as, d);"));
  BOOST_TEST(has(k.source, "rvl_lse_merge_float(am, as, other_am, other_as); am = t_.m; as = t_.s; }"));
  BOOST_TEST(has(k.source, "rvl_lse_merge_float(am, as, v0, (float)1);"));
  BOOST_TEST(has(k.source, "= rvl_lse_result_float(am, as);"));
  Sum cols({1024, 512}, 1u);  // columns: the shared-memory tree merges pairs in place
  cols.p.reduce_op = RVL_REDUCE_LOGSUMEXP;
  cols.p.out.dtype = RVL_DTYPE_F64;
  const KernelSource kc = generate_program(cols.p, cdna());
  BOOST_TEST(has(kc.source, "rvl_lse_merge_float(sh_am[ty * 32 + tx], sh_as[ty * 32 + tx], sh_am[(ty + s) * 32 + tx], sh_as[(ty + s) * 32 + tx]); sh_am[ty * 32 + tx] = t_.m;"));
  BOOST_TEST(has(kc.source, "= rvl_lse_result_wide(am, as);"));
  check_compiles(k, nvidia());
  check_compiles(kc, cdna());
  check_compiles(generate_program(rows.p, rdna()), rdna());
}

BOOST_AUTO_TEST_CASE(reductions_pick_rows_or_columns_and_respect_the_warp_width) {
  Sum rows({512, 1024}, 2u);  // sum(-1): a block per row, warp shuffles
  const KernelSource kn = generate_program(rows.p, nvidia());
  BOOST_TEST(has(kn.summary, "row O=512 R=1024"));
  BOOST_TEST(has(kn.source, "for (int d = 16; d > 0; d >>= 1)"));
  BOOST_TEST(has(kn.source, "__shfl_down_sync(0xffffffffu"));
  const KernelSource ka = generate_program(rows.p, cdna());
  BOOST_TEST(has(ka.source, "for (int d = 32; d > 0; d >>= 1)"));  // 64-wide wavefronts
  BOOST_TEST(has(ka.source, "sh_acc[4]"));                          // 256 / 64 partials
  BOOST_TEST(!has(ka.source, "_sync("));                            // AMD masks are 64-bit
  // Every lane executes every shuffle: never inside a ?: (integer MAX is one) or a branch.
  Sum imax({512, 1024}, 2u);
  imax.p.reduce_op = RVL_REDUCE_MAX;
  const KernelSource km = generate_program(imax.p, nvidia());
  BOOST_TEST(has(km.source, "const float other_acc = rvl_shfl_down(acc, d);"));
  BOOST_TEST(!has(km.source, "? acc : rvl_shfl_down"));
  Sum cols({1024, 512}, 1u);  // sum(0): neighbouring threads own neighbouring outputs
  BOOST_TEST(has(generate_program(cols.p, nvidia()).summary, "column O=512 R=1024"));
  Sum all({8, 16, 32}, 7u);  // everything: one output, one axis after merging
  BOOST_TEST(has(generate_program(all.p, nvidia()).summary, "row O=1 R=4096"));
  check_compiles(kn, nvidia());
  check_compiles(ka, cdna());
  check_compiles(generate_program(rows.p, rdna()), rdna());
}

BOOST_AUTO_TEST_CASE(literals_are_exact) {
  rvl_scalar v{};
  v.f = std::nan("");
  BOOST_TEST(literal(RVL_DTYPE_F32, v) == "__int_as_float(0x7fc00000)");
  v.f = -0.0;
  BOOST_TEST(literal(RVL_DTYPE_F64, v) == "__longlong_as_double(0x8000000000000000LL)");
  v.f = 0.1;  // rounded to f32 on the host, like the reference
  BOOST_TEST(literal(RVL_DTYPE_F32, v) == "__int_as_float(0x3dcccccd)");
  v.i = (int64_t(1) << 40) + 5;  // modular, like a CAST from i64
  BOOST_TEST(literal(RVL_DTYPE_I32, v) == "(int)5LL");
  v.i = 300;
  BOOST_TEST(literal(RVL_DTYPE_U8, v) == "(unsigned char)44");
  BOOST_TEST(literal(RVL_DTYPE_BOOL, v) == "(unsigned char)1");
  v.i = INT64_MIN;
  BOOST_TEST(literal(RVL_DTYPE_I64, v) == "(long long)(-9223372036854775807LL - 1)");
  BOOST_TEST(identity(RVL_REDUCE_MAX, RVL_DTYPE_F32) == "__int_as_float(0xff800000)");
  BOOST_TEST(identity(RVL_REDUCE_MAX, RVL_DTYPE_I32) == "(int)-2147483648LL");
  BOOST_TEST(identity(RVL_REDUCE_PROD, RVL_DTYPE_BOOL) == "(unsigned char)1");
  // The 1.7 dtypes: modular like a CAST from i64; halves by the bits of the nearest half.
  v.i = 200;
  BOOST_TEST(literal(RVL_DTYPE_I8, v) == "(signed char)-56");
  v.i = -1;
  BOOST_TEST(literal(RVL_DTYPE_U16, v) == "(unsigned short)65535");
  BOOST_TEST(literal(RVL_DTYPE_U32, v) == "(unsigned)4294967295u");
  BOOST_TEST(literal(RVL_DTYPE_U64, v) == "(unsigned long long)18446744073709551615ULL");
  v.i = 40000;
  BOOST_TEST(literal(RVL_DTYPE_I16, v) == "(short)-25536");
  BOOST_TEST(identity(RVL_REDUCE_MAX, RVL_DTYPE_I8) == "(signed char)-128");
  BOOST_TEST(identity(RVL_REDUCE_MAX, RVL_DTYPE_U64) == "(unsigned long long)0ULL");
  v.f = 65520.0;  // f16's overflow threshold: infinity
  BOOST_TEST(literal(RVL_DTYPE_F16, v) == "(unsigned short)0x7c00");
  v.f = 1.0 + 1.0 / 256;  // a bf16 tie: to even
  BOOST_TEST(literal(RVL_DTYPE_BF16, v) == "(unsigned short)0x3f80");
}

namespace {
// The prelude's conversions compiled by the host compiler (as the CPU emulator compiles kernels)
// with plain C++ stand-ins for the HIP built-ins they use.
struct HostPrelude {
  void* lib = nullptr;
  explicit HostPrelude(const std::string& dir) {
    const std::string src = dir + "/prelude.cpp", so = dir + "/prelude.so";
    std::ofstream(src) << R"(#include <math.h>
#include <string.h>
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
inline double __longlong_as_double(long long x) { double f; memcpy(&f, &x, 8); return f; }
inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
inline long long __double_as_longlong(double x) { long long u; memcpy(&u, &x, 8); return u; }
)" << c::helpers(c::kHip) << R"(
extern "C" unsigned short t_f32_to_f16(float x) { return rvl_f32_to_f16(x); }
extern "C" unsigned short t_f32_to_bf16(float x) { return rvl_f32_to_bf16(x); }
extern "C" unsigned short t_f64_to_f16(double x) { return rvl_f64_to_f16(x); }
extern "C" unsigned short t_f64_to_bf16(double x) { return rvl_f64_to_bf16(x); }
extern "C" float t_f16_to_f32(unsigned short h) { return rvl_f16_to_f32(h); }
extern "C" float t_bf16_to_f32(unsigned short h) { return rvl_bf16_to_f32(h); }
extern "C" unsigned short t_i64_to_bf16(long long x) { return rvl_int_to_bf16(x); }
)";
    const char* cxx = std::getenv("RAVEL_HIP_EMU_CXX");
    const std::string cmd = std::string(cxx ? cxx : "c++") + " -std=c++17 -O1 -w -shared -fPIC -ffp-contract=off -o " +
                            so + " " + src + " 2>&1";
    BOOST_TEST_REQUIRE(std::system(cmd.c_str()) == 0, cmd);
    lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    BOOST_TEST_REQUIRE(lib != nullptr);
  }
  ~HostPrelude() { if (lib) dlclose(lib); }
  template <class F> F* fn(const char* name) {
    void* f = dlsym(lib, name);
    BOOST_TEST_REQUIRE(f != nullptr, name);
    return reinterpret_cast<F*>(f);
  }
};

float f32_of(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
uint32_t bits32(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
double f64_of(uint64_t u) { double f; std::memcpy(&f, &u, 8); return f; }
uint64_t bits64(double f) { uint64_t u; std::memcpy(&u, &f, 8); return u; }
}  // namespace

// The kernels' half conversions (Note [Half storage]) are <ravel/half.hpp>'s bit for bit: every
// f16/bf16 pattern widened (NaN payloads included), and narrowed from f32 and f64 at every
// value, at every tie between neighbours and one ulp either side of it, and over a million
// pseudo-random bit patterns (NaNs, infinities, subnormals and overflow among them).
BOOST_AUTO_TEST_CASE(half_conversions_match_the_sdk_bit_for_bit) {
  char dir[] = "/tmp/ravel-hip-prelude-XXXXXX";
  BOOST_TEST_REQUIRE(mkdtemp(dir) != nullptr);
  HostPrelude h(dir);
  auto f32_to_f16 = h.fn<unsigned short(float)>("t_f32_to_f16");
  auto f32_to_bf16 = h.fn<unsigned short(float)>("t_f32_to_bf16");
  auto f64_to_f16 = h.fn<unsigned short(double)>("t_f64_to_f16");
  auto f64_to_bf16 = h.fn<unsigned short(double)>("t_f64_to_bf16");
  auto f16_to_f32 = h.fn<float(unsigned short)>("t_f16_to_f32");
  auto bf16_to_f32 = h.fn<float(unsigned short)>("t_bf16_to_f32");
  auto i64_to_bf16 = h.fn<unsigned short(long long)>("t_i64_to_bf16");
  int64_t bad = 0;
  auto check32 = [&](uint32_t u) {
    const float x = f32_of(u);
    bad += f32_to_f16(x) != rvl::f16_bits_from(x);
    bad += f32_to_bf16(x) != rvl::bf16_bits_from(x);
    const double y = x;
    bad += f64_to_f16(y) != rvl::f16_bits_from(y);
    bad += f64_to_bf16(y) != rvl::bf16_bits_from(y);
  };
  auto check64 = [&](uint64_t u) {
    const double y = f64_of(u);
    bad += f64_to_f16(y) != rvl::f16_bits_from(y);
    bad += f64_to_bf16(y) != rvl::bf16_bits_from(y);
  };
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t hb = uint16_t(b);
    bad += bits32(f16_to_f32(hb)) != bits32(rvl::f32_from_f16_bits(hb));
    bad += bits32(bf16_to_f32(hb)) != bits32(rvl::f32_from_bf16_bits(hb));
    // bf16: the tie above each value is the f32 with low half 0x8000.
    for (uint32_t low : {0x0u, 0x1u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) check32((b << 16) | low);
    // f16: the tie between a finite value and the next is exact in f32 and f64.
    const float lo = rvl::f32_from_f16_bits(hb), hi = rvl::f32_from_f16_bits(uint16_t(b + 1));
    if (std::isfinite(lo) && std::isfinite(hi) && (b & 0x7fffu) != 0x7fffu) {
      const double mid = (double(lo) + double(hi)) / 2;
      for (int d = -1; d <= 1; ++d) check32(bits32(float(mid)) + uint32_t(d));
      for (int64_t d : {-1, 0, 1, 1 << 20}) check64(bits64(mid) + uint64_t(d));  // 2^-40 past a tie
    }
  }
  uint64_t s = 0x9e3779b97f4a7c15u;
  for (int i = 0; i < (1 << 20); ++i) {
    s = s * 6364136223846793005u + 1442695040888963407u;
    check32(uint32_t(s >> 32));
    check64(s);
    const long long n = (long long)(s >> (s & 31));  // integers through double, as the reference
    bad += i64_to_bf16(n) != rvl::bf16_bits_from(double(n));
  }
  BOOST_TEST(bad == 0);
  std::remove((std::string(dir) + "/prelude.cpp").c_str());
  std::remove((std::string(dir) + "/prelude.so").c_str());
  rmdir(dir);
}

// Every op of the op table, on every dtype it accepts, in one program per dtype (so that a
// compiler run covers them all); ops whose result is FREE are exercised by CAST to every dtype.
// Every dtype the plugin states (all of them: halves widened to f32, Note
// [Halves in kernels]).
BOOST_AUTO_TEST_CASE(every_op_of_the_op_table_generates_and_compiles) {
  constexpr int32_t kDTypes = RVL_DTYPE_COUNT_;
  for (int32_t dt = 0; dt < kDTypes; ++dt) {
    std::vector<rvl_instruction> code{ins(RVL_OP_LOAD, dt, -1, -1, -1, 0), ins(RVL_OP_LOAD, dt, -1, -1, -1, 1),
                                      ins(RVL_OP_LOAD, RVL_DTYPE_BOOL, -1, -1, -1, 2)};
    int32_t last = 0, ops = 0;
    for (int32_t op = 0; op < RVL_OP_COUNT_; ++op) {
      const rvl::OpInfo& info = rvl::op_info(op);
      if (!rvl::op_is_arithmetic(op) || !rvl::op_accepts(op, dt)) continue;
      const bool select = info.accepts == rvl::OpAccepts::Select;
      const int32_t rdt = info.result == rvl::OpResult::Bool ? RVL_DTYPE_BOOL : dt;
      if (info.result == rvl::OpResult::Free) {  // CAST: to every dtype and back
        for (int32_t to = 0; to < kDTypes; ++to) {
          code.push_back(ins(op, to, 0));
          code.push_back(ins(op, dt, int32_t(code.size()) - 1));
        }
      } else if (select) {
        code.push_back(ins(op, dt, 2, 0, 1));
      } else {
        code.push_back(ins(op, rdt, 0, info.arity > 1 ? 1 : -1));
      }
      last = int32_t(code.size()) - 1;
      ++ops;
    }
    // Fold every result into one value of dt, so nothing is dead code.
    int32_t acc = 0;
    const int32_t produced = int32_t(code.size());
    for (int32_t j = 3; j < produced; ++j) {
      int32_t v = j;
      if (code[j].dtype != dt) { code.push_back(ins(RVL_OP_CAST, dt, j)); v = int32_t(code.size()) - 1; }
      code.push_back(ins(RVL_OP_MAX, dt, acc, v));
      acc = int32_t(code.size()) - 1;
    }
    (void)last;
    BOOST_TEST_CONTEXT("dtype " << rvl::dtype_name(dt)) {
      BOOST_TEST(ops >= 8);
      V::Program p;
      p.rank = 1;
      p.shape[0] = 1000;
      p.inputs = {view(dt, {1000}, {1}), view(dt, {1000}, {1}), view(RVL_DTYPE_BOOL, {1000}, {1})};
      p.ins = code.data();
      p.n_ins = int32_t(code.size());
      p.out = view(dt, {1000}, {1});
      for (const Target& t : {nvidia(), cdna(), rdna()}) {
        const KernelSource k = generate_program(p, t);
        BOOST_TEST_MESSAGE(rvl::dtype_name(dt) << " " << t.arch << ": " << code.size() << " instructions");
        check_compiles(k, t);
      }
    }
  }
}

// Long programs call transcendentals out of line and stay scalar: bounded code size, so the
// device compiler takes seconds, not minutes, on a 4096-instruction program.
BOOST_AUTO_TEST_CASE(long_programs_outline_transcendentals) {
  for (int32_t n : {8, 200}) {
    std::vector<rvl_instruction> code{ins(RVL_OP_LOAD, RVL_DTYPE_F32, -1, -1, -1, 0)};
    while (int32_t(code.size()) < n) code.push_back(ins(RVL_OP_SIN, RVL_DTYPE_F32, int32_t(code.size()) - 1));
    V::Program p;
    p.rank = 1;
    p.shape[0] = 4096;
    p.inputs = {view(RVL_DTYPE_F32, {4096}, {1})};
    p.ins = code.data();
    p.n_ins = n;
    p.out = view(RVL_DTYPE_F32, {4096}, {1});
    const KernelSource k = generate_program(p, nvidia());
    BOOST_TEST(has(k.source, "= rvl_ol_sin_f32(") == (n > 128));
    BOOST_TEST(has(k.summary, "vec4") == (n <= 64));
  }
}

BOOST_AUTO_TEST_CASE(contractions_follow_operand_layouts_and_fuse_the_epilogue) {
  // C[m, n] = relu(sum_k A[m, k] B[k, n] + bias[n]), A transposed in memory (m fastest).
  const int64_t M = 300, N = 200, K = 70;
  std::vector<rvl_instruction> epi{ins(RVL_OP_ACC, RVL_DTYPE_F32), ins(RVL_OP_LOAD, RVL_DTYPE_F32, -1, -1, -1, 0),
                                   ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 1), ins(RVL_OP_CONST, RVL_DTYPE_F32),
                                   ins(RVL_OP_MAX, RVL_DTYPE_F32, 2, 3)};
  epi[3].value.f = 0;
  V::Contraction c;
  c.dtype = RVL_DTYPE_F32;
  c.m = M, c.n = N, c.k = K;
  c.a = view(RVL_DTYPE_F32, {M, K}, {1, M});
  c.b = view(RVL_DTYPE_F32, {K, N}, {N, 1});
  c.epilogue.rank = 2;
  c.epilogue.shape[0] = M, c.epilogue.shape[1] = N;
  c.epilogue.inputs = {view(RVL_DTYPE_F32, {M, N}, {0, 1})};
  c.epilogue.ins = epi.data();
  c.epilogue.n_ins = int32_t(epi.size());
  c.epilogue.out = view(RVL_DTYPE_F32, {M, N}, {N, 1});
  const KernelSource k = generate_contraction(c, nvidia());
  BOOST_TEST(has(k.source, "const int mm = e % 64, kk = e / 64;"));  // A: threads along m
  BOOST_TEST(has(k.source, "const int nn = e % 64, kk = e / 64;"));  // B: threads along n
  BOOST_TEST(has(k.source, "const float v0 = acc[i][j];"));
  BOOST_TEST(has(k.source, "fmaf(ra[i], rb[j], acc[i][j])"));
  BOOST_TEST(k.grid[0] == 4u);  // ceil(200 / 64)
  BOOST_TEST(k.grid[1] == 5u);  // ceil(300 / 64)
  check_compiles(k, nvidia());
  check_compiles(generate_contraction(c, cdna()), cdna());
  // A large f32 problem gets the 128x128 tile with 8x8 registers per thread.
  c.m = c.n = c.k = 4096;
  c.a = view(RVL_DTYPE_F32, {4096, 4096}, {4096, 1});
  c.b = view(RVL_DTYPE_F32, {4096, 4096}, {4096, 1});
  c.epilogue.shape[0] = c.epilogue.shape[1] = 4096;
  c.epilogue.inputs = {view(RVL_DTYPE_F32, {4096, 4096}, {0, 1})};
  c.epilogue.out = view(RVL_DTYPE_F32, {4096, 4096}, {4096, 1});
  const KernelSource big = generate_contraction(c, nvidia());
  BOOST_TEST(has(big.summary, "tile 128x128x8"));
  check_compiles(big, nvidia());
}
