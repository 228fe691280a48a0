// Micro-kernels (see gemm_kernels.hpp for the contract).
#include "gemm_kernels.hpp"
#include "gemm_bf16_dot.hpp"
#include "tuning_env.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RVL_GEMM_X86 1
#endif

namespace tbbcpu::gemm {
namespace {

// ---- portable: MR x (NV vectors of 16 bytes) -------------------------------------------------
// 4 rows x 2 vectors = 8 accumulators + 2 B vectors + 1 broadcast fits the 16 SSE registers.
template <class T>
struct Vec16 {
  typedef T type __attribute__((vector_size(16)));
  static constexpr int lanes = 16 / sizeof(T);
};

template <class T, int MR, int NV>
void kernel_portable(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool add) {
  using V = typename Vec16<T>::type;
  constexpr int L = Vec16<T>::lanes;
  constexpr int NR = NV * L;
  V acc[MR][NV] = {};
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + k * NR + v * L, sizeof(V));
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const T ai = a[k * MR + i];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] += ai * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      T* p = c + i * ldc + v * L;
      V out = acc[i][v];
      if (add) {
        V old;
        std::memcpy(&old, p, sizeof(V));
        out += old;
      }
      std::memcpy(p, &out, sizeof(V));
    }
  }
}

// The portable small kernel (contract: gemm_kernels.hpp, SmallKernelFn); multiply then add, as
// kernel_portable does, so both portable paths round alike.
template <class T, int MR, int NV>
void small_portable(int64_t kc, const T* const* a, int64_t sak, const T* b, int64_t ldb, T* c, int64_t ldc) {
  using V = typename Vec16<T>::type;
  constexpr int L = Vec16<T>::lanes;
  V acc[MR][NV] = {};
  const T* ap[MR];
  for (int i = 0; i < MR; ++i) ap[i] = a[i];
  for (int64_t k = 0; k < kc; ++k, b += ldb) {
    V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + v * L, sizeof(V));
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const T ai = *ap[i];
      ap[i] += sak;
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] += ai * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) std::memcpy(c + i * ldc + v * L, &acc[i][v], sizeof(V));
}

// Multiply then add, as small_portable rounds (baseline x86-64 has no FMA to contract into).
template <class T>
T dot_portable(int64_t kc, const T* a, int64_t sa, const T* b, int64_t sb) {
  T acc = 0;
  for (int64_t k = 0; k < kc; ++k) acc = acc + a[k * sa] * b[k * sb];
  return acc;
}

#ifdef RVL_GEMM_X86
}  // namespace

// ---- AVX2 + FMA: 6 x 16 f32 and 6 x 8 f64 ----------------------------------------------------
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
template <class T> struct Ops;
template <> struct Ops<float> {
  using V = __m256;
  static constexpr int lanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
};
template <> struct Ops<double> {
  using V = __m256d;
  static constexpr int lanes = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static V bcast(const double* p) { return _mm256_broadcast_sd(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
};
#include "gemm_simd_body.inc"
#include "gemm_small_body.inc"
// One fused multiply-add per k, as each lane of small_kernel (and of the AVX-512 kernels).
template <class T>
T small_dot(int64_t kc, const T* a, int64_t sa, const T* b, int64_t sb) {
  T acc = 0;
  for (int64_t k = 0; k < kc; ++k) {
    if constexpr (sizeof(T) == 4) acc = __builtin_fmaf(a[k * sa], b[k * sb], acc);
    else acc = __builtin_fma(a[k * sa], b[k * sb], acc);
  }
  return acc;
}
template float small_dot<float>(int64_t, const float*, int64_t, const float*, int64_t);
template double small_dot<double>(int64_t, const double*, int64_t, const double*, int64_t);
template void kernel<float, 6, 2>(int64_t, const float*, const float*, float*, int64_t, bool);
template void kernel<double, 6, 2>(int64_t, const double*, const double*, double*, int64_t, bool);
// The AVX-512 kernels' tiles (12 x 32 f32, 12 x 16 f64) in AVX2 instructions, for
// RAVEL_TBB_GEMM=avx512-tiles: slow (48 accumulators spill), but they take the blocked GEMM
// through everything the AVX-512 family changes there (MR 12, NR 32, the A-resident loop order,
// the 12-row and 32-column packers, 12 x 32 edge tiles) on machines without AVX-512.
template void kernel<float, 12, 4>(int64_t, const float*, const float*, float*, int64_t, bool);
template void kernel<double, 12, 4>(int64_t, const double*, const double*, double*, int64_t, bool);
template void small_kernel<float, 6, 2>(int64_t, const float* const*, int64_t, const float*, int64_t, float*, int64_t);
template void small_kernel<double, 6, 2>(int64_t, const double* const*, int64_t, const double*, int64_t, double*,
                                         int64_t);
}  // namespace avx2
#pragma GCC pop_options

// ---- AVX-512F: 12 x 32 f32 and 12 x 16 f64 ---------------------------------------------------
#pragma GCC push_options
#pragma GCC target("avx512f")
namespace avx512 {
template <class T> struct Ops;
template <> struct Ops<float> {
  using V = __m512;
  static constexpr int lanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
};
template <> struct Ops<double> {
  using V = __m512d;
  static constexpr int lanes = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static V bcast(const double* p) { return _mm512_set1_pd(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
};
#include "gemm_simd_body.inc"
#include "gemm_small_body.inc"
template void kernel<float, 12, 2>(int64_t, const float*, const float*, float*, int64_t, bool);
template void kernel<float, 8, 2>(int64_t, const float*, const float*, float*, int64_t, bool);
template void kernel<float, 16, 1>(int64_t, const float*, const float*, float*, int64_t, bool);
// Note [Gathering B slivers]: dst[k * nr + j] = row_k[idx[j]] for j < w (0 beyond), row_k = b +
// bk[k], with one masked 16-lane gather per vector.
void gather_sliver(float* dst, const float* b, const int64_t* bk, int64_t kc, const int32_t* idx, int64_t w,
                   int64_t nr) {
  const int nv = static_cast<int>(nr / 16);
  __m512i ix[2];
  __mmask16 mk[2];
  for (int v = 0; v < nv; ++v) {
    ix[v] = _mm512_loadu_si512(idx + 16 * v);
    const int64_t lanes = std::clamp<int64_t>(w - 16 * v, 0, 16);
    mk[v] = static_cast<__mmask16>(lanes == 16 ? 0xFFFFu : (1u << lanes) - 1u);
  }
  for (int64_t k = 0; k < kc; ++k, dst += nr) {
    const float* row = b + bk[k];
    for (int v = 0; v < nv; ++v)
      _mm512_storeu_ps(dst + 16 * v, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk[v], ix[v], row, 4));
  }
}
template void kernel<double, 12, 2>(int64_t, const double*, const double*, double*, int64_t, bool);
template void small_kernel<float, 6, 1>(int64_t, const float* const*, int64_t, const float*, int64_t, float*, int64_t);
template void small_kernel<double, 6, 1>(int64_t, const double* const*, int64_t, const double*, int64_t, double*,
                                         int64_t);
}  // namespace avx512
#pragma GCC pop_options

namespace {

enum class Isa { Portable, Avx2, Avx512, Avx512Tiles };

// The best family this CPU runs, or the one RAVEL_TBB_GEMM names (portable, avx2, avx512; for
// testing each on one machine). A named family the CPU lacks falls back to the best it has, so
// a test forcing avx512 on an AVX2-only machine still passes (ravel-info shows what ran).
// avx512-tiles (a test mode) runs AVX-512's tile shapes with AVX2 instructions, where AVX2 exists.
// avx512bf16 keeps the best family for f32/f64 and runs bf16 on Note [BF16 dot-product family].
// RAVEL_TBB_GEMM_PORTABLE=1 is the older spelling of RAVEL_TBB_GEMM=portable.
Isa isa() {
  static const Isa chosen = [] {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
    const Isa best = avx512 ? Isa::Avx512 : avx2 ? Isa::Avx2 : Isa::Portable;
    if (tuning_choice("RAVEL_TBB_GEMM_PORTABLE", "0", {"0", "1"}) == "1") return Isa::Portable;
    const std::string want =
        tuning_choice("RAVEL_TBB_GEMM", "", {"portable", "avx2", "avx512", "avx512-tiles", "avx512bf16"});
    if (want.empty() || want == "avx512bf16") return best;  // avx512bf16: bf16 only (gemm_bf16_dot.hpp)
    if (want == "portable") return Isa::Portable;
    if (want == "avx2") return avx2 ? Isa::Avx2 : best;
    if (want == "avx512") return best;
    if (want == "avx512-tiles") return avx2 ? Isa::Avx512Tiles : best;
    return best;
  }();
  return chosen;
}
#endif

}  // namespace

Kernel<float> select_kernel_f32() {
#ifdef RVL_GEMM_X86
  switch (isa()) {
    case Isa::Avx512: return {12, 32, &avx512::kernel<float, 12, 2>};
    case Isa::Avx2: return {6, 16, &avx2::kernel<float, 6, 2>};
    case Isa::Avx512Tiles: return {12, 32, &avx2::kernel<float, 12, 4>};
    case Isa::Portable: break;
  }
#endif
  return {4, 8, &kernel_portable<float, 4, 2>};
}

// Note [Eight-row tiles for short M]: the window GEMM's M is a convolution's channel count, 16
// or 32 in the Fashion-MNIST CNN. 12-row slivers compute 24 rows for 16 (a third wasted) and 36
// for 32; AVX-512's 8 x 32 tile (16 accumulators, still enough to hide the FMA latency, and as
// load-bound per multiply-add as 12 x 32) wastes none there. Chosen where it wastes fewer rows.
//
// Note [Sixteen-column tiles for narrow N]: a weight gradient of a one-channel 3 x 3
// convolution (the Fashion-MNIST CNN's first layer) is M x N = 16 x 9 with K = 100,352: a
// 32-column tile computes 32 columns for 9 and its B slivers are 32 wide, 23 of them zeros
// packed for every k. Where N <= 16, AVX-512's 16 x 16 tile (16 accumulators again, one B
// vector and 16 broadcasts per k) computes and packs half as much; it is taken where it computes
// fewer padded elements than the row rule's tile.
Kernel<float> select_kernel_f32_for_shape(int64_t m, int64_t n) {
  Kernel<float> k = select_kernel_f32();
#ifdef RVL_GEMM_X86
  if (isa() == Isa::Avx512 && m > 0) {
    auto up = [](int64_t x, int64_t r) { return (x + r - 1) / r * r; };
    if (up(m, 8) < up(m, 12)) k = {8, 32, &avx512::kernel<float, 8, 2>};
    // Narrow N: the 16 x 16 tile where it computes fewer padded elements.
    if (n > 0 && n <= 16 && up(m, 16) * 16 < up(m, k.mr) * up(n, k.nr)) k = {16, 16, &avx512::kernel<float, 16, 1>};
  }
#endif
  return k;
}

Kernel<double> select_kernel_f64() {
#ifdef RVL_GEMM_X86
  switch (isa()) {
    case Isa::Avx512: return {12, 16, &avx512::kernel<double, 12, 2>};
    case Isa::Avx2: return {6, 8, &avx2::kernel<double, 6, 2>};
    case Isa::Avx512Tiles: return {12, 16, &avx2::kernel<double, 12, 4>};
    case Isa::Portable: break;
  }
#endif
  return {4, 4, &kernel_portable<double, 4, 2>};
}

// Small kernels: 6 rows x 2 vectors on AVX2 (12 accumulators, as the packed kernel), 4 x 2 of
// 16-byte vectors portably; on AVX-512, 6 x 1 (NR = 16 f32): the makemore shapes are 10-30
// columns wide, where a 32-wide tile would mostly compute padding.
SmallKernel<float> select_small_f32() {
#ifdef RVL_GEMM_X86
  switch (isa()) {
    case Isa::Avx512: return {6, 16, &avx512::small_kernel<float, 6, 1>, &avx2::small_dot<float>};
    case Isa::Avx2:
    case Isa::Avx512Tiles:  // AVX-512's small tile (6 x 16) is AVX2's
      return {6, 16, &avx2::small_kernel<float, 6, 2>, &avx2::small_dot<float>};
    case Isa::Portable: break;
  }
#endif
  return {4, 8, &small_portable<float, 4, 2>, &dot_portable<float>};
}

SmallKernel<double> select_small_f64() {
#ifdef RVL_GEMM_X86
  switch (isa()) {
    case Isa::Avx512: return {6, 8, &avx512::small_kernel<double, 6, 1>, &avx2::small_dot<double>};
    case Isa::Avx2:
    case Isa::Avx512Tiles:
      return {6, 8, &avx2::small_kernel<double, 6, 2>, &avx2::small_dot<double>};
    case Isa::Portable: break;
  }
#endif
  return {4, 4, &small_portable<double, 4, 2>, &dot_portable<double>};
}

bool gather_sliver_f32(float* dst, const float* b, const int64_t* bk, int64_t kc, const int64_t* bn, int64_t w,
                       int64_t nr) {
#ifdef RVL_GEMM_X86
  if (isa() != Isa::Avx512 || (nr != 16 && nr != 32) || w <= 0 || w > nr) return false;
  int32_t idx[32] = {};
  for (int64_t j = 0; j < w; ++j) {
    const int64_t d = bn[j] - bn[0];
    if (d < -(int64_t{1} << 28) || d > (int64_t{1} << 28)) return false;  // byte offsets fit int32
    idx[j] = static_cast<int32_t>(d);
  }
  avx512::gather_sliver(dst, b + bn[0], bk, kc, idx, w, nr);
  return true;
#else
  (void)dst, (void)b, (void)bk, (void)kc, (void)bn, (void)w, (void)nr;
  return false;
#endif
}

bool isa_is_avx512() {
#ifdef RVL_GEMM_X86
  return isa() == Isa::Avx512;
#else
  return false;
#endif
}

const char* isa_name() {
#ifdef RVL_GEMM_X86
  switch (isa()) {
    case Isa::Avx512: return bf16_dot_chosen() ? "avx512f, bf16 avx512bf16" : "avx512f";
    case Isa::Avx2: return "avx2+fma";
    case Isa::Avx512Tiles: return "avx2+fma with avx512 tiles";
    case Isa::Portable: break;
  }
#endif
  return "portable";
}

}  // namespace tbbcpu::gemm
