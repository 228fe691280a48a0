// conv1d/2d/3d and conv_transpose*d against naive loops in double (conv_reference.hpp), their
// gradients against central finite differences in f64, and their errors.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <sstream>

#include "conv_reference.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;

namespace {

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

struct ConvCase {
  int64_t n, c, o, groups;
  conv_ref::Vec in, kernel, stride, dilation;
  Pairs pad;
  bool same = false, bias = true;
};

std::string describe(const ConvCase& k) {
  std::ostringstream s;
  s << "n" << k.n << " c" << k.c << " o" << k.o << " g" << k.groups << " in" << k.in.size() << "d";
  for (size_t i = 0; i < k.in.size(); ++i)
    s << " [in " << k.in[i] << " k " << k.kernel[i] << " s " << k.stride[i] << " d " << k.dilation[i] << " p "
      << k.pad[i].first << "," << k.pad[i].second << "]";
  if (k.same) s << " same";
  return s.str();
}

conv_ref::Vec cat(conv_ref::Vec a, const conv_ref::Vec& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Tensor call_conv(size_t rank, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b,
                 const nn::ConvOptions& o) {
  if (rank == 1) return nn::conv1d(x, w, b, o);
  if (rank == 2) return nn::conv2d(x, w, b, o);
  return nn::conv3d(x, w, b, o);
}

nn::ConvOptions options_of(const ConvCase& k) {
  nn::ConvOptions o;
  o.stride = k.stride;
  o.dilation = k.dilation;
  o.groups = k.groups;
  o.same = k.same;
  bool symmetric = true;
  for (auto [b, a] : k.pad) symmetric &= a == b;
  if (k.same) {
  } else if (symmetric) {
    o.padding.clear();
    for (auto [b, a] : k.pad) o.padding.push_back(b);
  } else {
    o.padding_pairs = k.pad;
  }
  return o;
}

std::vector<ConvCase> forward_cases() {
  std::vector<ConvCase> cs = {
      // 2-D: plain, stride, padding, dilation, groups, depthwise, asymmetric, same
      {2, 3, 4, 1, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}},
      {2, 3, 4, 1, {7, 8}, {3, 2}, {2, 3}, {1, 1}, {{1, 1}, {0, 0}}},
      {1, 2, 3, 1, {9, 9}, {3, 3}, {1, 2}, {2, 1}, {{2, 2}, {1, 1}}},
      {2, 4, 6, 2, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},
      {2, 4, 4, 4, {6, 6}, {3, 3}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}},         // depthwise
      {1, 3, 6, 3, {6, 5}, {2, 3}, {1, 1}, {1, 2}, {{0, 0}, {2, 2}}},         // channel multiplier 2
      {2, 2, 3, 1, {5, 6}, {3, 2}, {1, 2}, {1, 1}, {{2, 0}, {1, 3}}},         // asymmetric
      {1, 2, 2, 1, {6, 6}, {4, 4}, {2, 2}, {1, 1}, {{0, 0}, {0, 0}}},         // kernel = stride: disjoint
      {1, 1, 2, 1, {28, 28}, {5, 5}, {1, 1}, {1, 1}, {{2, 2}, {2, 2}}},
      {2, 3, 2, 1, {5, 7}, {3, 4}, {1, 1}, {1, 1}, {{1, 1}, {1, 2}}, true},   // same, even kernel
      {1, 2, 2, 1, {7, 7}, {3, 3}, {1, 1}, {2, 3}, {{2, 2}, {3, 3}}, true},   // same with dilation
      {1, 2, 3, 1, {4, 4}, {1, 1}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}, false, false},  // 1x1, no bias
      // 1-D
      {2, 3, 2, 1, {10}, {3}, {2}, {1}, {{1, 1}}},
      {1, 4, 4, 2, {9}, {2}, {1}, {3}, {{0, 2}}},
      {1, 2, 2, 1, {8}, {4}, {1}, {1}, {{1, 2}}, true},
      // 3-D
      {1, 2, 3, 1, {4, 5, 4}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {{1, 1}, {0, 0}, {1, 1}}},
      {2, 4, 2, 2, {3, 4, 4}, {2, 2, 3}, {1, 1, 1}, {1, 1, 1}, {{0, 1}, {1, 0}, {1, 1}}},
  };
  for (auto& k : cs)
    if (k.same)  // the reference reads the pads: PyTorch's 'same' (the odd element after)
      for (size_t i = 0; i < k.in.size(); ++i) {
        const int64_t total = k.dilation[i] * (k.kernel[i] - 1);
        k.pad[i] = {total / 2, total - total / 2};
      }
  return cs;
}

}  // namespace

BOOST_AUTO_TEST_CASE(conv_matches_naive_loops) {
  uint64_t seed = 1;
  for (const ConvCase& k : forward_cases()) {
    guarded(describe(k), [&] {
      conv_ref::Conv p{k.n, k.c, k.o, k.groups, k.in, k.kernel, k.stride, k.dilation, k.pad};
      Tensor x = Tensor::randn(cat({k.n, k.c}, k.in), seed++, ravel::DType::F64);
      Tensor w = Tensor::randn(cat({k.o, k.c / k.groups}, k.kernel), seed++, ravel::DType::F64);
      Tensor b = Tensor::randn({k.o}, seed++, ravel::DType::F64);
      auto bv = b.to_vector<double>();
      auto want = conv_ref::conv(p, x.to_vector<double>(), w.to_vector<double>(), k.bias ? &bv : nullptr);
      Tensor y = call_conv(k.in.size(), x, w, k.bias ? std::optional<Tensor>(b) : std::nullopt, options_of(k));
      BOOST_TEST(y.shape() == cat({k.n, k.o}, p.out()));
      auto got = y.to_vector<double>();
      BOOST_REQUIRE_EQUAL(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) BOOST_TEST(std::fabs(got[i] - want[i]) < 1e-9, "at " << i << ": " << got[i] << " vs " << want[i]);
      // f32 gives the same within rounding.
      auto got32 = call_conv(k.in.size(), x.cast(ravel::DType::F32), w.cast(ravel::DType::F32),
                             k.bias ? std::optional<Tensor>(b.cast(ravel::DType::F32)) : std::nullopt, options_of(k))
                       .to_vector<double>();
      for (size_t i = 0; i < got.size(); ++i) BOOST_TEST(std::fabs(got32[i] - want[i]) < 1e-4 * (1 + std::fabs(want[i])));
    });
  }
}

namespace {

// dx[n, c, p * stride - pad + t * dilation] += r[n, o, p] w[o, c, t] (groups 1): the input gradient
// of sum(conv(x, w) * r), from the forward's definition (conv_ref::conv) rather than as a convolution.
std::vector<double> conv_input_gradient(const conv_ref::Conv& p, const std::vector<double>& r,
                                        const std::vector<double>& w) {
  const conv_ref::Vec out = p.out();
  const int64_t po = conv_ref::product(out), pk = conv_ref::product(p.kernel), pi = conv_ref::product(p.in);
  std::vector<double> dx(static_cast<size_t>(p.n * p.c * pi));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t o = 0; o < p.o; ++o)
      for (int64_t q = 0; q < po; ++q) {
        const conv_ref::Vec oi = conv_ref::unflatten(q, out);
        for (int64_t c = 0; c < p.c; ++c)
          for (int64_t t = 0; t < pk; ++t) {
            const conv_ref::Vec ti = conv_ref::unflatten(t, p.kernel);
            conv_ref::Vec xi(out.size());
            bool inside = true;
            for (size_t d = 0; d < out.size(); ++d) {
              xi[d] = oi[d] * p.stride[d] - p.pad[d].first + ti[d] * p.dilation[d];
              inside &= xi[d] >= 0 && xi[d] < p.in[d];
            }
            if (inside)
              dx[(n * p.c + c) * pi + conv_ref::flatten(xi, p.in)] += r[(n * p.o + o) * po + q] * w[(o * p.c + c) * pk + t];
          }
      }
  return dx;
}

}  // namespace

// f32 convolutions whose output rows are >= 12 long with >= 12 channels on the GEMM's M side:
// on AVX-512 tbb_cpu multiplies B's rows in place there, for the forward (M = output channels)
// and for the input gradient's transposed convolution (M = input channels) (Note [B rows in
// place]). Rows of 14, 20 (16 + 4) and 40 (16 + 16 + 8, 1-D); M of 12, 16, 24 and 32 (two
// slivers); K = 288 (two k panels: the second accumulates); with and without a bias (without
// one, and with M % 8 == 0, the kernel writes C directly); checked against loops in double.
BOOST_AUTO_TEST_CASE(long_row_convolutions_match_naive_loops) {
  uint64_t seed = 500;
  const std::vector<ConvCase> cases = {
      {2, 3, 16, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},
      {2, 16, 12, 1, {20, 20}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},
      {1, 32, 16, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}, false, false},
      {1, 24, 24, 1, {13, 15}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},
      {2, 16, 16, 1, {40}, {3}, {1}, {1}, {{1, 1}}, false, false},
  };
  for (const ConvCase& k : cases)
    guarded(describe(k), [&] {
      conv_ref::Conv p{k.n, k.c, k.o, 1, k.in, k.kernel, k.stride, k.dilation, k.pad};
      Tensor x = Tensor::randn(cat({k.n, k.c}, k.in), seed++);
      Tensor w = Tensor::randn(cat({k.o, k.c}, k.kernel), seed++);
      Tensor b = Tensor::randn({k.o}, seed++);
      Tensor r = Tensor::randn(cat({k.n, k.o}, p.out()), seed++);
      ravel::realize({x, w, b, r});
      auto bv = b.to_vector<double>(), wv = w.to_vector<double>();
      const std::optional<Tensor> bias = k.bias ? std::optional<Tensor>(b) : std::nullopt;
      Tensor y = call_conv(k.in.size(), x, w, bias, options_of(k));
      auto want = conv_ref::conv(p, x.to_vector<double>(), wv, k.bias ? &bv : nullptr);
      auto got = y.to_vector<double>();
      BOOST_REQUIRE_EQUAL(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        BOOST_TEST(std::fabs(got[i] - want[i]) < 1e-4 * (1 + std::fabs(want[i])), "y at " << i << ": " << got[i] << " vs " << want[i]);
      Tensor dx = ravel::gradients((call_conv(k.in.size(), x, w, bias, options_of(k)) * r).sum(), {x})[0];
      auto gx = dx.to_vector<double>(), wx = conv_input_gradient(p, r.to_vector<double>(), wv);
      BOOST_REQUIRE_EQUAL(gx.size(), wx.size());
      for (size_t i = 0; i < gx.size(); ++i)
        BOOST_TEST(std::fabs(gx[i] - wx[i]) < 1e-4 * (1 + std::fabs(wx[i])), "dx at " << i << ": " << gx[i] << " vs " << wx[i]);
    });
}

// Note [Implicit im2col]: on tbb_cpu (ABI 1.8 contraction_axes > 1) the GEMM packer reads the
// window view in place, so a padded 3x3 convolution allocates its output and a pad copy of the
// input (~1.3x the input), not the im2col matrix (9x the input). The values are checked against
// the naive loops above; this checks the buffers and that one GEMM ran.
BOOST_AUTO_TEST_CASE(conv2d_allocates_no_im2col_matrix) {
  // Below `reduce` no contraction runs at all (the product is a kernel of its own, as matmul's).
  if (ravel::fusion_options().policy < ravel::FusionPolicy::Reduce) return;
  const int64_t n = 2, c = 8, o = 16, h = 14, wd = 14;
  Tensor x = Tensor::randn({n, c, h, wd}, 11).realize();
  Tensor w = Tensor::randn({o, c, 3, 3}, 12).realize();
  nn::ConvOptions opt;
  opt.padding = {1, 1};
  Tensor y = nn::conv2d(x, w, std::nullopt, opt);
  y.realize();
  const ravel::KernelStats st = ravel::last_realization_stats();
  const int64_t f = 4;  // f32 bytes
  const int64_t im2col = c * 9 * n * h * wd * f;          // what the copy wrote
  const int64_t padded = n * c * (h + 2) * (wd + 2) * f;  // the pad copy
  const int64_t output = o * n * h * wd * f;              // the GEMM's [O, N * P]
  BOOST_TEST(st.contractions == 1);
  BOOST_TEST(st.bytes_allocated <= padded + output, st.bytes_allocated << " bytes allocated");
  BOOST_TEST(st.bytes_allocated < im2col, st.bytes_allocated << " bytes allocated, im2col is " << im2col);
}

// Both gradients are GEMMs too: the weight gradient sums (n, oh, ow) of the output gradient
// times the window view, the input gradient's column part sums o (Note [Implicit im2col]). A
// masked operand (the output gradient of a cut output) once sent both to reduce kernels, ~100x
// slower; this checks that every product-and-sum of the step ran as a contraction.
BOOST_AUTO_TEST_CASE(conv2d_gradients_are_contractions) {
  if (ravel::fusion_options().policy < ravel::FusionPolicy::Reduce) return;
  Tensor x = Tensor::randn({2, 3, 9, 8}, 21).realize();
  Tensor w = Tensor::randn({4, 3, 3, 3}, 22).realize();
  Tensor r = Tensor::randn({2, 4, 9, 8}, 23).realize();
  nn::ConvOptions opt;
  opt.padding = {1, 1};
  Tensor y = nn::conv2d(x, w, std::nullopt, opt);
  std::vector<Tensor> g = ravel::gradients((y * r).sum(), {x, w});
  ravel::realize({y, g[0], g[1]});
  BOOST_TEST(ravel::last_realization_stats().contractions == 3);
}

// Note [Cotangents of exactly one] (autodiff/rules.cpp): the output gradient of sum(y * r) is r
// itself, read in place by the weight gradient's contraction: the step is the input's pad copy
// and the contraction, with no kernel writing 1 * r first. Values against double loops.
BOOST_AUTO_TEST_CASE(conv2d_weight_gradient_reads_the_cotangent_in_place) {
  if (ravel::fusion_options().policy < ravel::FusionPolicy::Reduce) return;
  const int64_t n = 2, c = 3, o = 4, h = 7, wd = 6;
  Tensor x = Tensor::randn({n, c, h, wd}, 31).realize();
  Tensor w = Tensor::randn({o, c, 3, 3}, 32).realize();
  Tensor r = Tensor::randn({n, o, h, wd}, 33).realize();
  nn::ConvOptions opt;
  opt.padding = {1, 1};
  Tensor g = ravel::gradients((nn::conv2d(x, w, std::nullopt, opt) * r).sum(), {w})[0];
  g.realize();
  const ravel::KernelStats st = ravel::last_realization_stats();
  BOOST_TEST(st.contractions == 1);
  BOOST_TEST(st.programs == 1, st.programs << " programs (the pad copy only)");
  auto gv = g.to_vector<double>(), xv = x.to_vector<double>(), rv = r.to_vector<double>();
  for (int64_t oo = 0; oo < o; ++oo)
    for (int64_t cc = 0; cc < c; ++cc)
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t b = 0; b < 3; ++b) {
          double want = 0, scale = 0;
          for (int64_t im = 0; im < n; ++im)
            for (int64_t i = 0; i < h; ++i)
              for (int64_t j = 0; j < wd; ++j) {
                const int64_t ii = i + a - 1, jj = j + b - 1;
                if (ii < 0 || ii >= h || jj < 0 || jj >= wd) continue;
                const double term = rv[((im * o + oo) * h + i) * wd + j] * xv[((im * c + cc) * h + ii) * wd + jj];
                want += term, scale += std::fabs(term);
              }
          const double got = gv[((oo * c + cc) * 3 + a) * 3 + b];
          BOOST_TEST(std::fabs(got - want) <= 1e-5 * (1 + scale), "dw " << oo << cc << a << b << ": " << got << " vs " << want);
        }
}

namespace {

struct WeightCase {
  int64_t n, c, o, hw, k;
};

// gradients({w}) of sum(conv2d(x, w, padding k / 2) * r), f32, against a loop in double.
void check_weight_gradient(const WeightCase& k, uint64_t& seed) {
  guarded("n" + std::to_string(k.n) + " c" + std::to_string(k.c) + " o" + std::to_string(k.o) + " hw" +
              std::to_string(k.hw) + " k" + std::to_string(k.k),
          [&] {
            Tensor x = Tensor::randn({k.n, k.c, k.hw, k.hw}, seed++).realize();
            Tensor w = Tensor::randn({k.o, k.c, k.k, k.k}, seed++).realize();
            nn::ConvOptions opt;
            opt.padding = {k.k / 2, k.k / 2};
            const int64_t p = k.k / 2, out = k.hw + 2 * p - k.k + 1;
            Tensor r = Tensor::randn({k.n, k.o, out, out}, seed++).realize();
            auto g = ravel::gradients((nn::conv2d(x, w, std::nullopt, opt) * r).sum(), {w})[0].to_vector<double>();
            auto xv = x.to_vector<double>(), rv = r.to_vector<double>();
            for (int64_t o = 0; o < k.o; ++o)
              for (int64_t c = 0; c < k.c; ++c)
                for (int64_t a = 0; a < k.k; ++a)
                  for (int64_t b = 0; b < k.k; ++b) {
                    double want = 0, scale = 0;
                    for (int64_t n = 0; n < k.n; ++n)
                      for (int64_t i = 0; i < out; ++i)
                        for (int64_t j = 0; j < out; ++j) {
                          const int64_t yi = i + a - p, xj = j + b - p;
                          if (yi < 0 || yi >= k.hw || xj < 0 || xj >= k.hw) continue;
                          const double t =
                              rv[((n * k.o + o) * out + i) * out + j] * xv[((n * k.c + c) * k.hw + yi) * k.hw + xj];
                          want += t, scale += std::fabs(t);
                        }
                    const double got = g[((o * k.c + c) * k.k + a) * k.k + b];
                    BOOST_TEST(std::fabs(got - want) <= 1e-5 * scale + 1e-6,
                               "w[" << o << "," << c << "," << a << "," << b << "]: " << got << " vs " << want);
                  }
          });
}

}  // namespace

// The weight gradient of a one- or two-channel f32 convolution is a GEMM with N = channels x
// taps <= 16 (tbb_cpu takes AVX-512's 16 x 16 tile there, Note [Sixteen-column tiles for narrow
// N]), at row counts below, at and above one 16-row tile; with 3 and 4 channels N = 27 and 36
// (32-wide slivers, one and two, partly masked: Note [Gathering B slivers]). Checked against a
// loop in double.
BOOST_AUTO_TEST_CASE(narrow_weight_gradients_match_naive_sums) {
  uint64_t seed = 300;
  for (WeightCase k : {WeightCase{3, 1, 16, 9, 3}, WeightCase{2, 1, 5, 7, 3}, WeightCase{2, 1, 20, 6, 3},
                       WeightCase{2, 2, 17, 6, 2}, WeightCase{4, 1, 33, 5, 4}, WeightCase{2, 3, 8, 6, 3},
                       WeightCase{2, 4, 12, 5, 3}})
    check_weight_gradient(k, seed);
}

// Weight gradients whose rows of output positions are >= 12 long with >= 64 of them: tbb_cpu
// sums these along k in place where that issues fewer multiply-adds than the packed tiles (Note
// [Weight gradients as dot products over k runs]; AVX-512 only, elsewhere the packed path runs
// the same cases). Rows of 28 (a 12-lane tail vector), 16 (none), 13 and 33 (three vectors, one
// lane in the last); M and N off the 8 x 3 and 4 x 6 blocks (edge rows and columns repeated and
// dropped); the Fashion-MNIST CNN's first layer at batch 3, and at 32 channels on 14 x 14.
BOOST_AUTO_TEST_CASE(long_row_weight_gradients_match_naive_sums) {
  uint64_t seed = 400;
  for (WeightCase k : {WeightCase{3, 1, 16, 28, 3}, WeightCase{4, 1, 5, 16, 3}, WeightCase{5, 2, 7, 13, 3},
                       WeightCase{2, 1, 3, 33, 3}, WeightCase{5, 1, 32, 14, 3}})
    check_weight_gradient(k, seed);
}

BOOST_AUTO_TEST_CASE(conv2d_without_batch_axis) {
  Tensor x = Tensor::randn({2, 5, 5}, 3, ravel::DType::F64), w = Tensor::randn({3, 2, 3, 3}, 4, ravel::DType::F64);
  nn::ConvOptions o;
  o.padding = {1};
  auto a = nn::conv2d(x, w, std::nullopt, o);
  BOOST_TEST(a.shape() == (ravel::Shape{3, 5, 5}));
  auto b = nn::conv2d(x.unsqueeze(0), w, std::nullopt, o).squeeze(0);
  BOOST_TEST(a.to_vector<double>() == b.to_vector<double>());
}

namespace {

struct TransposeCase {
  int64_t n, c, o, groups;
  conv_ref::Vec in, kernel, stride, dilation, output_padding;
  Pairs pad;
};

Tensor call_transpose(size_t rank, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b,
                      const nn::ConvOptions& o) {
  if (rank == 1) return nn::conv_transpose1d(x, w, b, o);
  if (rank == 2) return nn::conv_transpose2d(x, w, b, o);
  return nn::conv_transpose3d(x, w, b, o);
}

}  // namespace

BOOST_AUTO_TEST_CASE(conv_transpose_matches_scatter_definition) {
  const std::vector<TransposeCase> cases = {
      {2, 3, 2, 1, {4, 5}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {{0, 0}, {0, 0}}},
      {2, 3, 4, 1, {4, 5}, {3, 2}, {2, 3}, {1, 1}, {1, 2}, {{1, 1}, {0, 0}}},
      {1, 4, 6, 2, {5, 4}, {3, 3}, {2, 1}, {2, 1}, {1, 0}, {{2, 2}, {1, 1}}},
      {1, 2, 3, 1, {5, 5}, {4, 4}, {2, 2}, {1, 1}, {0, 0}, {{1, 3}, {2, 0}}},  // asymmetric
      {1, 4, 4, 4, {6, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},  // depthwise
      {2, 2, 3, 1, {7}, {3}, {3}, {2}, {2}, {{1, 1}}},
      {1, 2, 2, 2, {6}, {5}, {1}, {1}, {0}, {{4, 4}}},  // padding = k - 1: a plain correlation
      {1, 2, 2, 1, {3, 4, 3}, {2, 3, 2}, {2, 1, 2}, {1, 1, 1}, {1, 0, 0}, {{0, 0}, {1, 1}, {0, 1}}},
  };
  uint64_t seed = 100;
  for (const TransposeCase& k : cases) {
    std::ostringstream ctx;
    ctx << "transposed " << k.in.size() << "d c" << k.c << " o" << k.o << " g" << k.groups << " in "
        << k.in[0] << " k " << k.kernel[0] << " s " << k.stride[0] << " d " << k.dilation[0] << " op "
        << k.output_padding[0] << " p " << k.pad[0].first << "," << k.pad[0].second;
    guarded(ctx.str(), [&] {
      conv_ref::Conv p{k.n, k.c, k.o, k.groups, k.in, k.kernel, k.stride, k.dilation, k.pad};
      conv_ref::Vec out;
      for (size_t i = 0; i < k.in.size(); ++i)
        out.push_back((k.in[i] - 1) * k.stride[i] - k.pad[i].first - k.pad[i].second +
                      k.dilation[i] * (k.kernel[i] - 1) + k.output_padding[i] + 1);
      Tensor x = Tensor::randn(cat({k.n, k.c}, k.in), seed++, ravel::DType::F64);
      Tensor w = Tensor::randn(cat({k.c, k.o / k.groups}, k.kernel), seed++, ravel::DType::F64);
      Tensor b = Tensor::randn({k.o}, seed++, ravel::DType::F64);
      auto bv = b.to_vector<double>();
      auto want = conv_ref::conv_transpose(p, out, x.to_vector<double>(), w.to_vector<double>(), &bv);
      nn::ConvOptions o;
      o.stride = k.stride;
      o.dilation = k.dilation;
      o.groups = k.groups;
      o.output_padding = k.output_padding;
      o.padding_pairs = k.pad;
      Tensor y = call_transpose(k.in.size(), x, w, b, o);
      BOOST_TEST(y.shape() == cat({k.n, k.o}, out));
      auto got = y.to_vector<double>();
      BOOST_REQUIRE_EQUAL(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) BOOST_TEST(std::fabs(got[i] - want[i]) < 1e-9, "at " << i);
    });
  }
}

namespace {

// Central differences of the scalar f at a few entries of `t` (a realized f64 leaf), against the
// gradient `g` from autodiff.
template <class F>
void check_fd(const std::string& what, Tensor& t, const Tensor& g, F f, int samples, uint64_t seed) {
  auto base = t.to_vector<double>();
  auto gv = g.to_vector<double>();
  BOOST_REQUIRE_EQUAL(gv.size(), base.size());
  const double h = 1e-6;
  for (int s = 0; s < samples; ++s) {
    size_t i = static_cast<size_t>((seed * 2654435761u + s * 40503u) % base.size());
    auto at = [&](double v) {
      auto x = base;
      x[i] = v;
      return f(Tensor::from_vector(x, t.shape()));
    };
    double fd = (at(base[i] + h) - at(base[i] - h)) / (2 * h);
    BOOST_TEST(std::fabs(fd - gv[i]) < 1e-6 * (1 + std::fabs(fd)), what << "[" << i << "]: autodiff " << gv[i] << ", differences " << fd);
  }
}

}  // namespace

// Gradients with respect to input, weight and bias against finite differences in f64, for
// convolutions with stride, padding (asymmetric too), dilation and groups, and transposed ones.
BOOST_AUTO_TEST_CASE(conv_gradients_match_finite_differences) {
  struct Case {
    bool transposed;
    ConvCase k;
    conv_ref::Vec output_padding;
  };
  const std::vector<Case> cases = {
      {false, {2, 3, 4, 1, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}}, {0}},
      {false, {1, 4, 6, 2, {7, 6}, {3, 2}, {2, 1}, {1, 2}, {{0, 2}, {1, 0}}}, {0}},
      {false, {1, 3, 3, 3, {6, 6}, {3, 3}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}}, {0}},  // depthwise
      {false, {2, 2, 3, 1, {9}, {3}, {2}, {2}, {{1, 1}}}, {0}},
      // Stride 1 (Note [Convolution's input gradient as a convolution]): dilation, asymmetric
      // padding, padding wider than dilation * (k - 1) (the transposed convolution cuts dy), 1-D.
      {false, {2, 3, 2, 1, {5, 7}, {3, 2}, {1, 1}, {2, 1}, {{0, 3}, {2, 1}}}, {0}},
      {false, {2, 3, 2, 1, {9}, {3}, {1}, {1}, {{2, 0}}}, {0}},
      {false, {1, 2, 3, 1, {5, 4}, {1, 3}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}}, {0}},
      {false, {1, 2, 2, 1, {3, 4, 4}, {2, 2, 3}, {1, 2, 1}, {1, 1, 1}, {{0, 0}, {1, 1}, {1, 0}}}, {0}},
      {true, {1, 2, 3, 1, {4, 5}, {3, 3}, {2, 2}, {1, 1}, {{1, 1}, {0, 0}}}, {1, 0}},
      {true, {1, 4, 4, 2, {6}, {3}, {2}, {2}, {{1, 1}}}, {1}},
  };
  uint64_t seed = 200;
  for (const auto& c : cases) {
    const ConvCase& k = c.k;
    guarded((c.transposed ? "transposed " : "") + describe(k), [&] {
      const size_t r = k.in.size();
      Tensor x = Tensor::randn(cat({k.n, k.c}, k.in), seed++, ravel::DType::F64);
      Tensor w = Tensor::randn(c.transposed ? cat({k.c, k.o / k.groups}, k.kernel) : cat({k.o, k.c / k.groups}, k.kernel),
                               seed++, ravel::DType::F64);
      Tensor b = Tensor::randn({k.o}, seed++, ravel::DType::F64);
      nn::ConvOptions o = options_of(k);
      if (c.transposed) {
        o.output_padding = c.output_padding;
        o.padding_pairs = k.pad;
      }
      auto run = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) {
        return c.transposed ? call_transpose(r, xx, ww, bb, o) : call_conv(r, xx, ww, bb, o);
      };
      Tensor cot = Tensor::randn(run(x, w, b).shape(), seed++, ravel::DType::F64);
      auto loss = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) { return (run(xx, ww, bb) * cot).sum(); };
      auto g = ravel::gradients(loss(x, w, b), {x, w, b});
      check_fd("d/dx", x, g[0], [&](const Tensor& v) { return loss(v, w, b).item<double>(); }, 6, seed);
      check_fd("d/dw", w, g[1], [&](const Tensor& v) { return loss(x, v, b).item<double>(); }, 6, seed + 1);
      check_fd("d/db", b, g[2], [&](const Tensor& v) { return loss(x, w, v).item<double>(); }, 3, seed + 2);
    });
  }
}

// Second order: the gradient of <d loss/dx, v> with respect to the weight, against finite
// differences of the first-order gradient (the window view's rule is itself differentiated).
BOOST_AUTO_TEST_CASE(conv2d_second_order) {
  Tensor x = Tensor::randn({1, 2, 6, 6}, 300, ravel::DType::F64), w = Tensor::randn({3, 2, 3, 3}, 301, ravel::DType::F64);
  nn::ConvOptions o;
  o.stride = {2};
  o.padding = {1};
  Tensor cot = Tensor::randn({1, 3, 3, 3}, 302, ravel::DType::F64), v = Tensor::randn(x.shape(), 303, ravel::DType::F64);
  // loss = sum(tanh(conv) * cot): nonlinear, so d2/dx dw has terms through both x and w.
  auto inner = [&](const Tensor& xx, const Tensor& ww) {
    Tensor gx = ravel::gradients((nn::conv2d(xx, ww, std::nullopt, o).tanh() * cot).sum(), {xx})[0];
    return (gx * v).sum();
  };
  Tensor xx = x, ww = w;
  auto second = ravel::gradients(inner(xx, ww), {xx, ww});
  check_fd("d2/dx dw", w, second[1], [&](const Tensor& t) { return inner(x, t).item<double>(); }, 6, 7);
  check_fd("d2/dx dx", x, second[0], [&](const Tensor& t) { return inner(t, w).item<double>(); }, 6, 8);
}

// The same at stride 1 with dilation, where the input gradient is a transposed convolution
// whose own derivative runs through the window view again (Note [Convolution's input gradient
// as a convolution]).
BOOST_AUTO_TEST_CASE(conv2d_second_order_stride_1) {
  Tensor x = Tensor::randn({2, 2, 6, 5}, 310, ravel::DType::F64), w = Tensor::randn({3, 2, 3, 2}, 311, ravel::DType::F64);
  Tensor b = Tensor::randn({3}, 314, ravel::DType::F64);
  nn::ConvOptions o;
  o.dilation = {2, 1};
  o.padding_pairs = {{2, 1}, {1, 0}};
  Tensor cot = Tensor::randn(nn::conv2d(x, w, b, o).shape(), 312, ravel::DType::F64);
  Tensor v = Tensor::randn(x.shape(), 313, ravel::DType::F64);
  auto inner = [&](const Tensor& xx, const Tensor& ww) {
    Tensor gx = ravel::gradients((nn::conv2d(xx, ww, b, o).tanh() * cot).sum(), {xx})[0];
    return (gx * v).sum();
  };
  Tensor xx = x, ww = w;
  auto second = ravel::gradients(inner(xx, ww), {xx, ww});
  check_fd("d2/dx dw", w, second[1], [&](const Tensor& t) { return inner(x, t).item<double>(); }, 6, 9);
  check_fd("d2/dx dx", x, second[0], [&](const Tensor& t) { return inner(t, w).item<double>(); }, 6, 10);
}

BOOST_AUTO_TEST_CASE(conv_errors_name_the_values) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const ravel::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto has = [](const std::string& m, const std::string& part) {
    BOOST_TEST(m.find(part) != std::string::npos, "'" << m << "' should contain '" << part << "'");
  };
  Tensor x = Tensor::zeros({2, 6, 5, 5}), w = Tensor::zeros({4, 3, 3, 3});
  nn::ConvOptions g4;
  g4.groups = 4;
  BOOST_CHECK_THROW(nn::conv2d(x, Tensor::zeros({4, 2, 3, 3}), std::nullopt, g4), ravel::ShapeError);
  has(message([&] { nn::conv2d(x, Tensor::zeros({4, 2, 3, 3}), std::nullopt, g4); }), "input channels 6");
  has(message([&] { nn::conv2d(x, Tensor::zeros({4, 2, 3, 3}), std::nullopt, g4); }), "groups 4");
  nn::ConvOptions g2;
  g2.groups = 2;
  BOOST_CHECK_THROW(nn::conv2d(x, Tensor::zeros({3, 3, 3, 3}), std::nullopt, g2), ravel::ShapeError);  // 3 % 2
  BOOST_CHECK_THROW(nn::conv2d(x, w), ravel::ShapeError);  // weight wants 3 input channels
  has(message([&] { nn::conv2d(x, w); }), "[2, 6, 5, 5]");
  BOOST_CHECK_THROW(nn::conv2d(x, Tensor::zeros({4, 6, 7, 3})), ravel::ShapeError);  // kernel > input
  has(message([&] { nn::conv2d(x, Tensor::zeros({4, 6, 7, 3})); }), "spans 7");
  nn::ConvOptions neg;
  neg.padding = {-1};
  BOOST_CHECK_THROW(nn::conv2d(x, Tensor::zeros({4, 6, 3, 3}), std::nullopt, neg), ravel::ValueError);
  has(message([&] { nn::conv2d(x, Tensor::zeros({4, 6, 3, 3}), std::nullopt, neg); }), "padding must be >= 0");
  nn::ConvOptions pairs;
  pairs.padding_pairs = {{1, -2}, {0, 0}};
  BOOST_CHECK_THROW(nn::conv2d(x, Tensor::zeros({4, 6, 3, 3}), std::nullopt, pairs), ravel::ValueError);
  BOOST_CHECK_THROW(nn::conv2d(Tensor::zeros({6, 5}), w), ravel::ShapeError);  // rank 2
  has(message([&] { nn::conv2d(Tensor::zeros({6, 5}), w); }), "[6, 5]");
  BOOST_CHECK_THROW(nn::conv1d(x, w), ravel::ShapeError);                      // rank 4 for 1-D
  BOOST_CHECK_THROW(nn::conv2d(x, Tensor::zeros({4, 6, 3})), ravel::ShapeError);  // weight rank
  nn::ConvOptions bad_stride;
  bad_stride.stride = {1, 0};
  BOOST_CHECK_THROW(nn::conv2d(x, Tensor::zeros({4, 6, 3, 3}), std::nullopt, bad_stride), ravel::ValueError);
  nn::ConvOptions three;
  three.stride = {1, 1, 1};
  BOOST_CHECK_THROW(nn::conv2d(x, Tensor::zeros({4, 6, 3, 3}), std::nullopt, three), ravel::ValueError);
  nn::ConvOptions same;
  same.same = true;
  same.stride = {2};
  BOOST_CHECK_THROW(nn::conv2d(x, Tensor::zeros({4, 6, 3, 3}), std::nullopt, same), ravel::ValueError);
  BOOST_CHECK_THROW(nn::conv2d(x, Tensor::zeros({4, 6, 3, 3}), Tensor::zeros({3})), ravel::ShapeError);  // bias
  nn::ConvOptions op;
  op.stride = {2};
  op.output_padding = {2};
  BOOST_CHECK_THROW(nn::conv_transpose2d(x, Tensor::zeros({6, 2, 3, 3}), std::nullopt, op), ravel::ValueError);
  BOOST_CHECK_THROW(nn::conv_transpose2d(x, Tensor::zeros({5, 2, 3, 3})), ravel::ShapeError);
  // Padding beyond the output: (1 - 1) * 1 - 2 * 3 + (3 - 1) + 1 = -3, named before any cut.
  nn::ConvOptions too_much;
  too_much.padding = {3};
  Tensor one = Tensor::zeros({1, 4, 1, 1}), w4 = Tensor::zeros({4, 4, 3, 3});
  BOOST_CHECK_THROW(nn::conv_transpose2d(one, w4, std::nullopt, too_much), ravel::ShapeError);
  has(message([&] { nn::conv_transpose2d(one, w4, std::nullopt, too_much); }), "conv_transpose2d: the output would have size -3");
  too_much.padding = {1};  // size 1: the smallest allowed
  BOOST_TEST(ravel::shape_str(nn::conv_transpose2d(one, w4, std::nullopt, too_much).shape()) == "[1, 4, 1, 1]");
}
