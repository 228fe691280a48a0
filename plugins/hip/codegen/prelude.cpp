// The source every generated kernel starts with: platform built-ins the generator relies on,
// and scalar helpers with the ABI's edge-case semantics (docs/abi.md 7.2, 7.3). Plain built-ins
// only (no #include): NVRTC cannot see HIP headers, and hiprtc pre-includes what it needs.
#include "codegen.hpp"

namespace rvl::hip {

const char* platform_name(Platform p) {
  switch (p) {
    case Platform::Nvidia: return "nvidia";
    case Platform::Amd: return "amd";
    case Platform::Emulated: return "emulated";
  }
  return "?";
}

namespace {

// Warp shuffles. NVIDIA needs the 32-bit participation mask; on AMD the __shfl_*_sync masks are
// 64-bit and the unsynchronised __shfl_down is the portable spelling for 32- and 64-lane waves.
// One-byte values travel as int (no shuffle overload for char).
const char* kShuffleNvidia = R"(template <class T> static __device__ __forceinline__ T rvl_shfl_down(T v, int d) {
  return __shfl_down_sync(0xffffffffu, v, d);
}
)";
const char* kShuffleAmd = R"(template <class T> static __device__ __forceinline__ T rvl_shfl_down(T v, int d) {
  return __shfl_down(v, d);
}
)";

const char* kHelpers = R"(static __device__ __forceinline__ unsigned char rvl_shfl_down(unsigned char v, int d) {
  return (unsigned char)rvl_shfl_down((int)v, d);
}
// MAX propagates NaN (the first NaN operand).
static __device__ __forceinline__ float rvl_max_f32(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }
static __device__ __forceinline__ double rvl_max_f64(double a, double b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }
// float -> integer: truncate toward zero, saturate at the target's range, NaN -> 0.
static __device__ __forceinline__ unsigned char rvl_f2u8(double x) {
  if (x != x) return 0;
  const double t = trunc(x);
  return t <= 0.0 ? (unsigned char)0 : t >= 255.0 ? (unsigned char)255 : (unsigned char)t;
}
static __device__ __forceinline__ int rvl_f2i32(double x) {
  if (x != x) return 0;
  const double t = trunc(x);
  return t <= -2147483648.0 ? (int)(-2147483647 - 1) : t >= 2147483647.0 ? 2147483647 : (int)t;
}
static __device__ __forceinline__ long long rvl_f2i64(double x) {
  if (x != x) return 0;
  const double t = trunc(x);
  return t <= -9223372036854775808.0 ? (long long)(-9223372036854775807LL - 1)
       : t >= 9223372036854775808.0 ? 9223372036854775807LL : (long long)t;
}
// Integer division and remainder: x/0 == x%0 == 0, MIN/-1 == MIN, MIN%-1 == 0.
static __device__ __forceinline__ int rvl_idiv_i32(int a, int b) { return b == 0 ? 0 : b == -1 ? (int)(0u - (unsigned)a) : a / b; }
static __device__ __forceinline__ int rvl_mod_i32(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }
// 64-bit division is a long subroutine on GPUs: called, not inlined (compile time of long programs).
static __device__ __noinline__ long long rvl_idiv_i64(long long a, long long b) {
  return b == 0 ? 0 : b == -1 ? (long long)(0ull - (unsigned long long)a) : a / b;
}
static __device__ __noinline__ long long rvl_mod_i64(long long a, long long b) { return (b == 0 || b == -1) ? 0 : a % b; }
// Transcendentals called out of line by long programs (ssa.cpp): thousands of inlined sin()
// slow paths take the device compiler minutes.
static __device__ __noinline__ float rvl_ol_sinf(float x) { return sinf(x); }
static __device__ __noinline__ double rvl_ol_sin(double x) { return sin(x); }
static __device__ __noinline__ float rvl_ol_exp2f(float x) { return exp2f(x); }
static __device__ __noinline__ double rvl_ol_exp2(double x) { return exp2(x); }
static __device__ __noinline__ float rvl_ol_log2f(float x) { return log2f(x); }
static __device__ __noinline__ double rvl_ol_log2(double x) { return log2(x); }
static __device__ __forceinline__ unsigned char rvl_idiv_u8(unsigned char a, unsigned char b) { return b == 0 ? 0 : (unsigned char)(a / b); }
static __device__ __forceinline__ unsigned char rvl_mod_u8(unsigned char a, unsigned char b) { return b == 0 ? 0 : (unsigned char)(a % b); }
static __device__ __forceinline__ unsigned char rvl_idiv_bool(unsigned char a, unsigned char b) { return b == 0 ? 0 : (unsigned char)(a / b); }
static __device__ __forceinline__ unsigned char rvl_mod_bool(unsigned char a, unsigned char b) { return b == 0 ? 0 : (unsigned char)(a % b); }
// LOGSUMEXP (ABI 1.4): a partial result is (m, s), the running maximum and sum exp(x - m);
// merging (m2, s2) into (m, s) rescales the side with the smaller maximum. NaN, then +inf, is
// sticky in m (s no longer matters); m == -inf is the identity (nothing counted yet), so -inf
// elements contribute nothing and an all -inf or empty reduction gives -inf, never -inf - -inf.
#define RVL_LSE_MERGE(V, INF, EXP, LOG)                                                                \
  static __device__ __forceinline__ void rvl_lse_merge(V& m, V& s, V m2, V s2) {               \
    const V inf = INF;                                                                         \
    if (m != m || m2 != m2) { m = m != m ? m : m2; s = 0; return; }                             \
    const V n = m < m2 ? m2 : m;                                                               \
    if (n == inf || n == -inf) { m = n; s = 0; return; }                                       \
    s = (m == -inf ? (V)0 : s * EXP(m - n)) + (m2 == -inf ? (V)0 : s2 * EXP(m2 - n));           \
    m = n;                                                                                     \
  }                                                                                            \
  static __device__ __forceinline__ V rvl_lse_result(V m, V s) { return m != m || m == INF || m == -INF ? m : m + LOG(s); }
RVL_LSE_MERGE(float, __int_as_float(0x7f800000), expf, logf)
RVL_LSE_MERGE(double, __longlong_as_double(0x7ff0000000000000LL), exp, log)
// Widening (f32 values, f64 result): m and s stay f32, only m + log(s) is formed in f64.
static __device__ __forceinline__ double rvl_lse_result_wide(float m, float s) { return rvl_lse_result((double)m, (double)s); }
// Four consecutive elements, aligned so that one vector load/store moves them.
template <class T> struct alignas(4 * sizeof(T)) rvl_vec4 { T v[4]; };
)";

}  // namespace

std::string prelude(const Target& t) {
  // Only what the prelude depends on: kernels that do not use the warp width share sources (and
  // disk-cache entries) across warp widths.
  std::string s = "// Ravel generated kernel for " + std::string(platform_name(t.platform)) + "\n";
  if (t.platform == Platform::Nvidia) s += kShuffleNvidia;
  else if (t.platform == Platform::Amd) s += kShuffleAmd;
  // Emulated: rvl_shfl_down comes from emu_device.hpp, prepended by the emulator's compiler.
  s += kHelpers;
  return s;
}

}  // namespace rvl::hip
