// The oneTBB plugin's blocked float GEMM (plugins/tbb_cpu/gemm_blocked.cpp) through the public
// API, against a naive triple loop in double: edge sizes around every micro-kernel's MR/NR and
// the k-panel size, transposed / strided / flipped / broadcast operands (read in place by the
// packers), batched operands (batch-parallel and batch-serial paths), a fused epilogue, and the
// training shapes (makemore, MLP) with their backward-pass transposes.
// The small unpacked path (gemm_small.cpp) takes the shapes below 2^20 multiply-adds by default;
// the tbb_gemm_small_* runs force it for every shape (RAVEL_TBB_GEMM_SMALL_WORK), and the
// serial blocked run disables it, so each path sees every shape here.
// f16/bf16 operands (widened to f32 while packing, Note [Half panels]) go through the same
// shapes and layouts, against the double loop over the same rounded inputs.
// CMake runs this once per micro-kernel family (RAVEL_TBB_GEMM) and with tiny block sizes and
// forced parallelism (RAVEL_TBB_GEMM_KC/MC/NC, RAVEL_TBB_INLINE_WORK=0) so that several k-panels,
// column blocks and tasks are exercised on small shapes.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ravel/half.hpp>

#include "ravel/ravel.hpp"

using ravel::BFloat16;
using ravel::Float16;
using ravel::Shape;
using ravel::Tensor;

namespace {

// A host matrix stack [B, R, C] in double, row-major.
struct Host {
  int64_t b, r, c;
  std::vector<double> v;
  double at(int64_t i, int64_t j, int64_t k) const { return v[(i * r + j) * c + k]; }
};

Host make(int64_t b, int64_t r, int64_t c, uint64_t seed) {
  Host h{b, r, c, std::vector<double>(static_cast<size_t>(b * r * c))};
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& x : h.v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<double>((s >> 33) % 2001) / 1000.0 - 1.0;  // [-1, 1], exact in f32
  }
  return h;
}

template <class T>
Tensor to_tensor(const Host& h, bool batched) {
  std::vector<T> d(h.v.begin(), h.v.end());
  return batched ? Tensor::from_vector<T>(d, {h.b, h.r, h.c}) : Tensor::from_vector<T>(d, {h.r, h.c});
}

// Transposes each matrix of the stack: the tensor built from it and .transpose()d back is the
// original matrix read through strides (1, rows).
Host transposed(const Host& h) {
  Host t{h.b, h.c, h.r, std::vector<double>(h.v.size())};
  for (int64_t i = 0; i < h.b; ++i)
    for (int64_t j = 0; j < h.r; ++j)
      for (int64_t k = 0; k < h.c; ++k) t.v[(i * t.r + k) * t.c + j] = h.at(i, j, k);
  return t;
}

// How an operand reaches the GEMM.
enum class Layout { Plain, Transposed, ColumnStride2, Flipped };
const char* name(Layout l) {
  switch (l) {
    case Layout::Plain: return "plain";
    case Layout::Transposed: return "transposed";
    case Layout::ColumnStride2: return "column-stride-2";
    case Layout::Flipped: return "flipped";
  }
  return "?";
}

// The tensor whose value is `h` (a stack when batched), built through `l`.
template <class T>
Tensor build(const Host& h, Layout l, bool batched) {
  switch (l) {
    case Layout::Plain: return to_tensor<T>(h, batched);
    case Layout::Transposed: return to_tensor<T>(transposed(h), batched).transpose(-2, -1);
    case Layout::ColumnStride2: {
      // Every other column of a twice-as-wide matrix (the rest is filler).
      Host w{h.b, h.r, 2 * h.c, std::vector<double>(h.v.size() * 2, 7.0)};
      for (int64_t i = 0; i < h.b; ++i)
        for (int64_t j = 0; j < h.r; ++j)
          for (int64_t k = 0; k < h.c; ++k) w.v[(i * w.r + j) * w.c + 2 * k] = h.at(i, j, k);
      return to_tensor<T>(w, batched).slice(batched ? 2 : 1, 0, 2 * h.c, 2);
    }
    case Layout::Flipped: {
      Host f = h;  // both matrix axes reversed, flipped back: negative strides
      for (int64_t i = 0; i < h.b; ++i)
        for (int64_t j = 0; j < h.r; ++j)
          for (int64_t k = 0; k < h.c; ++k) f.v[(i * h.r + (h.r - 1 - j)) * h.c + (h.c - 1 - k)] = h.at(i, j, k);
      Tensor t = to_tensor<T>(f, batched);
      return batched ? t.flip(ravel::Axes{1, 2}) : t.flip();
    }
  }
  return {};
}

// C = A @ B (per batch entry; a has 1 or bs entries, b has bs), then optionally relu(C + bias).
Host reference(const Host& a, const Host& b, const std::vector<double>* bias) {
  Host c{b.b, a.r, b.c, std::vector<double>(static_cast<size_t>(b.b * a.r * b.c))};
  for (int64_t i = 0; i < b.b; ++i)
    for (int64_t m = 0; m < a.r; ++m)
      for (int64_t n = 0; n < b.c; ++n) {
        double s = 0;
        for (int64_t k = 0; k < a.c; ++k) s += a.at(a.b == 1 ? 0 : i, m, k) * b.at(i, k, n);
        if (bias) s = std::max(0.0, s + (*bias)[n]);
        c.v[(i * c.r + m) * c.c + n] = s;
      }
  return c;
}

template <class T>
void check(const std::string& what, const Tensor& got, const Host& want, int64_t k) {
  const std::vector<T> g = got.to_vector<T>();
  BOOST_TEST_REQUIRE(g.size() == want.v.size(), what);
  // |a|, |b| <= 1: the error bound grows with k (f32: ~k * 2^-24 per product, generously).
  const double tol = (sizeof(T) == 4 ? 4e-6 : 1e-13) * (static_cast<double>(k) + 1.0);
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(static_cast<double>(g[i]) - want.v[i]) <= tol)) {
      if (bad++ < 3)
        BOOST_ERROR(what << ": element " << i << " = " << g[i] << ", want " << want.v[i]);
    }
  BOOST_TEST(bad == 0, what << ": " << bad << " wrong elements");
}

struct Mkn {
  int64_t m, k, n;
};

// ---- f16 / bf16 ---------------------------------------------------------------------------------
template <class H>
const char* half_name() { return std::is_same_v<H, Float16> ? "f16" : "bf16"; }

// `h` with every value rounded to H: the values a half tensor built from it holds.
template <class H>
Host rounded(Host h) {
  for (double& x : h.v) x = static_cast<double>(static_cast<float>(H(x)));
  return h;
}

// A half result against the double loop over the same (rounded) inputs. The GEMM accumulates in
// f32 (error <= e = 4e-6 (k + 1) here, as check() allows, with |a|, |b| <= 1) and rounds once to
// the half: |got - want| <= u (|want| + e) + e, u the format's unit roundoff (2^-11 for f16,
// 2^-8 for bf16). A half-precision accumulation, or an operand rounded twice, is off by far more
// once k is beyond a few terms. `pre`: the values of an intermediate the schedule may round as
// well (A @ B before an epilogue that is not fused into the contraction), adding u |pre|.
template <class H>
void check_half(const std::string& what, const Tensor& got, const Host& want, int64_t k, const Host* pre = nullptr) {
  BOOST_TEST_REQUIRE((got.dtype() == ravel::dtype_of<H>::value), what);
  const std::vector<float> g = got.to_vector<float>();  // exact widening
  BOOST_TEST_REQUIRE(g.size() == want.v.size(), what);
  const double u = std::is_same_v<H, Float16> ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  const double e = 4e-6 * (static_cast<double>(k) + 1.0);
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(static_cast<double>(g[i]) - want.v[i]) <=
          u * (std::abs(want.v[i]) + e) + e + (pre ? u * (std::abs(pre->v[i]) + e) : 0.0))) {
      if (bad++ < 3)
        BOOST_ERROR(what << ": element " << i << " = " << g[i] << ", want " << want.v[i]);
    }
  BOOST_TEST(bad == 0, what << ": " << bad << " wrong elements");
}

template <class H>
void half_edge_sizes_every_layout() {
  uint64_t seed = 1000;
  const Layout layouts[] = {Layout::Plain, Layout::Transposed, Layout::ColumnStride2, Layout::Flipped};
  for (const Mkn& s : std::vector<Mkn>{{1, 1, 1}, {7, 7, 7}, {5, 17, 15}, {12, 33, 32}, {13, 64, 33}, {25, 127, 47},
                                       {17, 129, 17}, {37, 257, 95}, {1, 513, 70}, {97, 1, 130}, {203, 517, 301}})
    for (Layout la : layouts)
      for (Layout lb : layouts) {
        if (la != Layout::Plain && lb != Layout::Plain && la != lb) continue;  // keep it quick
        const Host a = rounded<H>(make(1, s.m, s.k, ++seed)), b = rounded<H>(make(1, s.k, s.n, ++seed));
        const std::string what = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) +
                                 " A " + name(la) + " B " + name(lb) + " " + half_name<H>();
        check_half<H>(what, build<H>(a, la, false).matmul(build<H>(b, lb, false)), reference(a, b, nullptr), s.k);
      }
}

template <class H>
void half_training_batched_and_epilogue() {
  uint64_t seed = 2000;
  for (const Mkn& s : std::vector<Mkn>{{64, 30, 200}, {64, 200, 27}, {256, 784, 512}}) {
    const Host a = rounded<H>(make(1, s.m, s.k, ++seed)), b = rounded<H>(make(1, s.k, s.n, ++seed)),
               dc = rounded<H>(make(1, s.m, s.n, ++seed));
    const Tensor ta = to_tensor<H>(a, false), tb = to_tensor<H>(b, false), tdc = to_tensor<H>(dc, false);
    const std::string sz = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) + " " + half_name<H>();
    check_half<H>(sz + " forward", ta.matmul(tb), reference(a, b, nullptr), s.k);
    check_half<H>(sz + " dA = dC @ B^T", tdc.matmul(tb.transpose()), reference(dc, transposed(b), nullptr), s.n);
    check_half<H>(sz + " dB = A^T @ dC", ta.transpose().matmul(tdc), reference(transposed(a), dc, nullptr), s.m);
  }
  for (const auto& [bs, s] : std::vector<std::pair<int64_t, Mkn>>{{9, {13, 21, 19}}, {2, {150, 260, 140}}, {64, {1, 27, 1}}}) {
    const Host a = rounded<H>(make(bs, s.m, s.k, ++seed)), b = rounded<H>(make(bs, s.k, s.n, ++seed));
    const std::string sz = std::to_string(bs) + "x" + std::to_string(s.m) + "x" + std::to_string(s.k) + "x" +
                           std::to_string(s.n) + " " + half_name<H>();
    check_half<H>(sz + " batched transposed",
                  build<H>(a, Layout::Transposed, true).matmul(build<H>(b, Layout::Transposed, true)),
                  reference(a, b, nullptr), s.k);
  }
  // relu(A @ B + bias) with the add and relu in the epilogue, computed in f32 and rounded once.
  for (const Mkn& s : std::vector<Mkn>{{7, 5, 9}, {64, 30, 200}, {203, 300, 150}}) {
    const Host a = rounded<H>(make(1, s.m, s.k, ++seed)), b = rounded<H>(make(1, s.k, s.n, ++seed)),
               bias = rounded<H>(make(1, 1, s.n, ++seed));
    const Tensor tbias = to_tensor<H>(bias, false).reshape(Shape{s.n});
    const Host ab = reference(a, b, nullptr);
    check_half<H>(std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) + " relu(A@B+bias) " +
                      half_name<H>(),
                  (to_tensor<H>(a, false).matmul(build<H>(b, Layout::Transposed, false)) + tbias).relu(),
                  reference(a, b, &bias.v), s.k, &ab);
  }
}

// Sizes around MR (4, 6, 12), NR (4, 8, 16, 32), the k-panel (128, 192, 256) and odd ones.
const std::vector<Mkn> kEdge = {
    {1, 1, 1},    {7, 7, 7},     {3, 5, 2},     {5, 17, 15},   {6, 16, 16},  {11, 9, 31},
    {12, 33, 32}, {13, 64, 33},  {25, 127, 47}, {24, 128, 48}, {17, 129, 17}, {19, 191, 65},
    {23, 193, 9}, {30, 255, 63}, {31, 256, 64}, {37, 257, 95}, {49, 300, 53}, {1, 513, 70},
    {70, 2, 1},   {97, 1, 130},
};

template <class T>
void edge_sizes_every_layout() {
  uint64_t seed = 1;
  const Layout layouts[] = {Layout::Plain, Layout::Transposed, Layout::ColumnStride2, Layout::Flipped};
  for (const Mkn& s : kEdge)
    for (Layout la : layouts)
      for (Layout lb : {Layout::Plain, Layout::Transposed, Layout::ColumnStride2}) {
        if (la != Layout::Plain && lb != Layout::Plain && la != lb) continue;  // keep it quick
        const Host a = make(1, s.m, s.k, ++seed), b = make(1, s.k, s.n, ++seed);
        const std::string what = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) +
                                 " A " + name(la) + " B " + name(lb) + (sizeof(T) == 4 ? " f32" : " f64");
        check<T>(what, build<T>(a, la, false).matmul(build<T>(b, lb, false)), reference(a, b, nullptr), s.k);
      }
}

}  // namespace

// The family RAVEL_TBB_GEMM names is the one that runs (the device details say "gemm=..."), or,
// where this CPU lacks it, the best it has: worked out here from the CPU's flags, not the plugin's.
BOOST_AUTO_TEST_CASE(the_named_kernel_family_runs) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  const std::string best = avx512 ? "avx512f" : avx2 ? "avx2+fma" : "portable";
  const char* env = std::getenv("RAVEL_TBB_GEMM");
  const std::string named = env ? env : "";
  std::string want = best;
  if (named == "portable") want = "portable";
  else if (named == "avx2" && avx2) want = "avx2+fma";
  else if (named == "avx512-tiles" && avx2) want = "avx2+fma with avx512 tiles";
  std::string details;
  for (const auto& d : ravel::Runtime::get().devices())
    if (d.device.str() == "tbb_cpu:0") details = d.details;
  BOOST_TEST_MESSAGE("RAVEL_TBB_GEMM=" << named << ": " << details);
  BOOST_TEST(details.find("gemm=" + want + ";") != std::string::npos, "want gemm=" << want << " in: " << details);
}

BOOST_AUTO_TEST_CASE(edge_sizes_f32) { edge_sizes_every_layout<float>(); }
BOOST_AUTO_TEST_CASE(edge_sizes_f64) { edge_sizes_every_layout<double>(); }

BOOST_AUTO_TEST_CASE(larger_than_one_panel_every_way) {
  // Several k-panels, several m-blocks and tasks at the default block sizes.
  uint64_t seed = 100;
  for (const Mkn& s : std::vector<Mkn>{{203, 517, 301}, {256, 256, 256}, {130, 1000, 77}})
    for (Layout la : {Layout::Plain, Layout::Transposed})
      for (Layout lb : {Layout::Plain, Layout::Transposed}) {
        const Host a = make(1, s.m, s.k, ++seed), b = make(1, s.k, s.n, ++seed);
        check<float>(std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) + " A " +
                         name(la) + " B " + name(lb),
                     build<float>(a, la, false).matmul(build<float>(b, lb, false)), reference(a, b, nullptr), s.k);
      }
}

BOOST_AUTO_TEST_CASE(training_shapes_and_their_backward_transposes) {
  // makemore (64x30 @ 30x200, 64x200 @ 200x27) and MLP (256x784 @ 784x512) forward products, and
  // the backward ones: dA = dC @ B^T, dB = A^T @ dC.
  uint64_t seed = 200;
  for (const Mkn& s : std::vector<Mkn>{{64, 30, 200}, {64, 200, 27}, {256, 784, 512}}) {
    const Host a = make(1, s.m, s.k, ++seed), b = make(1, s.k, s.n, ++seed), dc = make(1, s.m, s.n, ++seed);
    const Tensor ta = to_tensor<float>(a, false), tb = to_tensor<float>(b, false), tdc = to_tensor<float>(dc, false);
    const std::string sz = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
    check<float>(sz + " forward", ta.matmul(tb), reference(a, b, nullptr), s.k);
    check<float>(sz + " dA = dC @ B^T", tdc.matmul(tb.transpose()), reference(dc, transposed(b), nullptr), s.n);
    check<float>(sz + " dB = A^T @ dC", ta.transpose().matmul(tdc), reference(transposed(a), dc, nullptr), s.m);
  }
}

BOOST_AUTO_TEST_CASE(batched_operands) {
  uint64_t seed = 300;
  // Many small entries (one task each), a few large ones (parallel inside), a broadcast left
  // operand (batch stride 0) and transposed batched operands.
  // 64 x (1x27 @ 27x1) is the makemore loss's batch of dot products (the small path's N = 1).
  for (const auto& [bs, s] : std::vector<std::pair<int64_t, Mkn>>{
           {9, {13, 21, 19}}, {2, {150, 260, 140}}, {3, {1, 7, 33}}, {64, {1, 27, 1}}, {5, {7, 3, 17}}}) {
    const Host a = make(bs, s.m, s.k, ++seed), b = make(bs, s.k, s.n, ++seed), a1 = make(1, s.m, s.k, ++seed);
    const std::string sz = std::to_string(bs) + "x" + std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
    check<float>(sz + " batched", to_tensor<float>(a, true).matmul(to_tensor<float>(b, true)), reference(a, b, nullptr), s.k);
    check<float>(sz + " batched transposed",
                 build<float>(a, Layout::Transposed, true).matmul(build<float>(b, Layout::Transposed, true)),
                 reference(a, b, nullptr), s.k);
    check<double>(sz + " broadcast lhs f64", to_tensor<double>(a1, false).matmul(to_tensor<double>(b, true)),
                  reference(a1, b, nullptr), s.k);
  }
}

BOOST_AUTO_TEST_CASE(fused_epilogue) {
  // relu(A @ B + bias): the add and relu run as the contraction's epilogue (full fusion). The
  // small path runs it over blocks of whole rows packed from its padded row buffer: 64x30x200
  // and 50x8x333 give blocks of several rows that end inside a row block of MR rows.
  uint64_t seed = 400;
  for (const Mkn& s : std::vector<Mkn>{{7, 5, 9}, {64, 200, 27}, {203, 300, 150}, {64, 30, 200}, {50, 8, 333}}) {
    const Host a = make(1, s.m, s.k, ++seed), b = make(1, s.k, s.n, ++seed), bias = make(1, 1, s.n, ++seed);
    const Tensor tbias = Tensor::from_vector<float>(std::vector<float>(bias.v.begin(), bias.v.end()), {s.n});
    check<float>(std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) + " relu(A@B+bias)",
                 (to_tensor<float>(a, false).matmul(build<float>(b, Layout::Transposed, false)) + tbias).relu(),
                 reference(a, b, &bias.v), s.k);
  }
}

BOOST_AUTO_TEST_CASE(small_path_threshold_and_broadcast_operands) {
  // Just below and above the small path's default threshold (2^20 multiply-adds), so the two
  // paths meet on neighbouring shapes; and operands broadcast along k or n (stride 0), which the
  // small path reads in place.
  uint64_t seed = 500;
  for (const Mkn& s : std::vector<Mkn>{{64, 255, 64}, {64, 257, 64}, {65, 256, 63}}) {
    const Host a = make(1, s.m, s.k, ++seed), b = make(1, s.k, s.n, ++seed);
    for (Layout lb : {Layout::Plain, Layout::Transposed})
      check<float>(std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) + " B " + name(lb),
                   to_tensor<float>(a, false).matmul(build<float>(b, lb, false)), reference(a, b, nullptr), s.k);
  }
  for (const Mkn& s : std::vector<Mkn>{{7, 5, 9}, {13, 30, 40}}) {
    Host a = make(1, s.m, s.k, ++seed), row = make(1, 1, s.n, ++seed);
    Host b{1, s.k, s.n, std::vector<double>(static_cast<size_t>(s.k * s.n))};
    for (int64_t k = 0; k < s.k; ++k)
      for (int64_t n = 0; n < s.n; ++n) b.v[k * s.n + n] = row.v[n];
    const Tensor tb = to_tensor<float>(row, false).expand(Shape{s.k, s.n});  // k stride 0
    check<float>(std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) + " B broadcast",
                 to_tensor<float>(a, false).matmul(tb), reference(a, b, nullptr), s.k);
  }
}

BOOST_AUTO_TEST_CASE(half_edge_sizes_every_layout_f16) { half_edge_sizes_every_layout<Float16>(); }
BOOST_AUTO_TEST_CASE(half_edge_sizes_every_layout_bf16) { half_edge_sizes_every_layout<BFloat16>(); }
BOOST_AUTO_TEST_CASE(half_training_batched_and_epilogue_f16) { half_training_batched_and_epilogue<Float16>(); }
BOOST_AUTO_TEST_CASE(half_training_batched_and_epilogue_bf16) { half_training_batched_and_epilogue<BFloat16>(); }
