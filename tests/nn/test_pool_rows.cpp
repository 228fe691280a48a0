// Pooling's gradient at sizes where tbb_cpu runs the routing kernels as interleaved rows (Note
// [Interleaved rows], plugins/tbb_cpu/interleave_rows.cpp: kernels of more than one block whose
// innermost axis is a window's phase), against naive loops (conv_ref) with PyTorch's rule: ties
// to the first maximum, NaN propagated (the last NaN takes the window), padding, ceil_mode,
// dilation, 1-D/2-D/3-D, f32 and f64; and elementwise programs of that shape (each value repeated
// along the phase, a table over the phases, a transposed gather, bool and cast) against host
// loops. CTest runs it again with RAVEL_TBB_NO_INTERLEAVE=1 (the generic path, the same
// assertions) and with RAVEL_TBB_SIMD=portable (the expansion's baseline clone, CI's fallback).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <sstream>

#include "conv_reference.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;
using conv_ref::Vec;

namespace {

struct Case {
  Vec lead, in, kernel, stride, pad, dilation;
  bool ceil_mode = false;
};

Vec cat(Vec a, const Vec& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Tensor max_pool(const Case& k, const Tensor& x) {
  nn::PoolOptions o;
  o.kernel = k.kernel;
  o.stride = k.stride;
  o.padding = k.pad;
  o.dilation = k.dilation;
  o.ceil_mode = k.ceil_mode;
  const size_t r = k.in.size();
  return r == 1 ? nn::max_pool1d(x, o) : r == 2 ? nn::max_pool2d(x, o) : nn::max_pool3d(x, o);
}

// Disjoint windows (kernel span <= stride), large enough for several blocks.
const std::vector<Case> kCases = {
    {{3, 8}, {30, 34}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},           // the CNN's 2x2/2, rows of 17 x 2
    {{2, 5}, {31, 33}, {2, 2}, {2, 2}, {1, 1}, {1, 1}},           // padded: the cut edges
    {{2, 4}, {29, 35}, {3, 3}, {3, 3}, {0, 0}, {1, 1}, true},     // phases of 3, ceil_mode
    {{2, 4}, {28, 40}, {2, 2}, {3, 4}, {1, 0}, {1, 1}},           // kernel < stride: phases past the kernel
    {{2, 3}, {30, 36}, {2, 2}, {4, 4}, {0, 1}, {3, 2}, true},     // dilation: span 4 and 3 within stride 4
    {{4, 16}, {400}, {4}, {4}, {0}, {1}},                         // 1-D, phases of 4
    {{2, 3}, {8, 12, 40}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}},  // 3-D
};

std::string describe(const Case& k) {
  std::ostringstream s;
  s << k.in.size() << "d";
  for (size_t i = 0; i < k.in.size(); ++i)
    s << " [in " << k.in[i] << " k " << k.kernel[i] << " s " << k.stride[i] << " p " << k.pad[i] << " d "
      << k.dilation[i] << "]";
  s << (k.ceil_mode ? " ceil" : "");
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_CASE(max_pool_routing_rows_match_naive_loops) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  uint64_t seed = 900;
  for (ravel::DType dt : {ravel::DType::F32, ravel::DType::F64})
    for (const Case& k : kCases)
      guarded(describe(k) + (dt == ravel::DType::F32 ? " f32" : " f64"), [&] {
        conv_ref::Pool p{k.in, k.kernel, k.stride, k.pad, k.dilation, k.ceil_mode};
        // Values 0, 1, 2 (ties in most windows), NaN (some windows hold two) and -inf.
        auto v = (Tensor::rand(cat(k.lead, k.in), seed++, ravel::DType::F64) * 3.0).trunc().to_vector<double>();
        for (size_t i = 0; i < v.size(); ++i) {
          if ((i * 2654435761u) % 13 == 0) v[i] = nan;
          else if ((i * 40503u) % 17 == 0) v[i] = -inf;
        }
        std::vector<int64_t> arg;
        auto want_y = conv_ref::max_pool(p, conv_ref::product(k.lead), v, &arg);
        Tensor x = Tensor::from_vector(v, cat(k.lead, k.in)).cast(dt);
        Tensor y = max_pool(k, x);
        BOOST_TEST(y.shape() == cat(k.lead, p.out()));
        auto got_y = y.to_vector<double>();
        BOOST_REQUIRE_EQUAL(got_y.size(), want_y.size());
        for (size_t i = 0; i < got_y.size(); ++i)
          BOOST_TEST((std::isnan(want_y[i]) ? std::isnan(got_y[i]) : got_y[i] == want_y[i]), "y at " << i);
        Tensor cot = (Tensor::rand(y.shape(), seed++, ravel::DType::F64) * 8.0 + 1.0).trunc().cast(dt);
        auto g = ravel::gradients((y * cot).sum(), {x})[0].to_vector<double>();
        std::vector<double> want(g.size(), 0.0);
        auto cv = cot.to_vector<double>();
        for (size_t i = 0; i < arg.size(); ++i)
          if (arg[i] >= 0) want[arg[i]] += cv[i];
        BOOST_REQUIRE_EQUAL(g.size(), want.size());
        size_t bad = 0;
        for (size_t i = 0; i < g.size(); ++i) bad += g[i] != want[i];
        BOOST_TEST(bad == 0u, bad << " of " << g.size() << " gradient elements differ");
      });
}

// Average pooling's gradient for disjoint unpadded windows: cot / (kernel size) on every tap,
// nothing on the phases past the kernel.
BOOST_AUTO_TEST_CASE(avg_pool_routing_rows_match_naive_loops) {
  const int64_t n = 3, c = 5, h = 30, w = 36;
  for (int64_t kernel : {2, 3})
    for (int64_t stride : {kernel, kernel + 1})
      guarded("kernel " + std::to_string(kernel) + " stride " + std::to_string(stride), [&] {
        nn::PoolOptions o;
        o.kernel = {kernel};
        o.stride = {stride};
        Tensor x = Tensor::randn({n, c, h, w}, 40 + static_cast<uint64_t>(kernel * 7 + stride));
        Tensor y = nn::avg_pool2d(x, o);
        const int64_t oh = y.shape()[2], ow = y.shape()[3];
        Tensor cot = Tensor::randn(y.shape(), 60 + static_cast<uint64_t>(stride));
        auto g = ravel::gradients((y * cot).sum(), {x})[0].to_vector<double>();
        auto cv = cot.to_vector<double>();
        std::vector<double> want(g.size(), 0.0);
        for (int64_t pl = 0; pl < n * c; ++pl)
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j)
              for (int64_t a = 0; a < kernel; ++a)
                for (int64_t b = 0; b < kernel; ++b)
                  want[(pl * h + i * stride + a) * w + j * stride + b] =
                      static_cast<float>(cv[(pl * oh + i) * ow + j]) / static_cast<float>(kernel * kernel);
        size_t bad = 0;
        for (size_t i = 0; i < g.size(); ++i) bad += std::fabs(g[i] - want[i]) > 1e-6 * (1 + std::fabs(want[i]));
        BOOST_TEST(bad == 0u, bad << " of " << g.size() << " gradient elements differ");
      });
}

// Elementwise programs over [rows, n, e] with e <= 4 (the evaluator runs n innermost): each
// input's two strides pick the expansion (repeated values, a phase table, a transposed gather, a
// bool mask), and a cast to f64 as the last instruction.
BOOST_AUTO_TEST_CASE(interleaved_rows_match_host_loops) {
  for (int64_t e : {2, 3, 4})
    guarded("phases " + std::to_string(e), [&] {
      const int64_t rows = 64, n = 19;
      Tensor a = Tensor::randn({rows, n}, 1), c = Tensor::randn({rows, n}, 2);
      Tensor table = Tensor::randn({e}, 3), t = Tensor::randn({e, rows, n}, 4);
      Tensor mask = Tensor::randn({rows, n}, 5).ge(Tensor::zeros({}));
      ravel::realize({a, c, table, t, mask});
      const ravel::Shape full{rows, n, e};
      Tensor ae = a.reshape({rows, n, 1}).expand(full), ce = c.reshape({rows, n, 1}).expand(full);
      Tensor te = table.reshape({1, 1, e}).expand(full), tt = t.permute({1, 2, 0});  // strides (n, 1, rows * n)
      Tensor me = mask.reshape({rows, n, 1}).expand(full);
      Tensor got = Tensor::where(me, Tensor::where(te.ne(ae), ce * tt, Tensor::zeros({})), te - tt).cast(ravel::DType::F64);
      auto gv = got.to_vector<double>();
      auto av = a.to_vector<float>(), cv = c.to_vector<float>(), tv = table.to_vector<float>(), xv = t.to_vector<float>();
      auto mv = mask.cast(ravel::DType::F32).to_vector<float>();
      BOOST_REQUIRE_EQUAL(gv.size(), static_cast<size_t>(rows * n * e));
      size_t bad = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t p = 0; p < e; ++p) {
            const float tp = tv[p], xp = xv[(p * rows + r) * n + j];
            const float inner = tp != av[r * n + j] ? cv[r * n + j] * xp : 0.0f;
            const float want = mv[r * n + j] != 0.0f ? inner : tp - xp;
            bad += gv[(r * n + j) * e + p] != static_cast<double>(want);
          }
      BOOST_TEST(bad == 0u, bad << " of " << gv.size() << " elements differ");
    });
}

// Short rows read at a stride (a pooling window's taps, Note [Short strided rows]): x[:, ::2],
// x[:, 1::3] and a flipped x[:, ::-2] combined, rows of 5 to 32, against host loops.
BOOST_AUTO_TEST_CASE(short_strided_rows_match_host_loops) {
  for (int64_t n : {5, 14, 32})
    guarded("row " + std::to_string(n), [&] {
      const int64_t rows = 300, w = 3 * n;
      Tensor x = Tensor::randn({rows, w}, 7 + static_cast<uint64_t>(n));
      x.realize();
      Tensor a = x.slice(1, 0, 2 * n, 2), b = x.slice(1, 1, w, 3), c = x.flip(ravel::Axes{1}).slice(1, 0, 2 * n, 2);
      auto got = (a.maximum(b) * c + a).to_vector<float>();
      auto xv = x.to_vector<float>();
      BOOST_REQUIRE_EQUAL(got.size(), static_cast<size_t>(rows * n));
      size_t bad = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) {
          const float av = xv[r * w + 2 * j], bv = xv[r * w + 1 + 3 * j], cv = xv[r * w + (w - 1 - 2 * j)];
          bad += got[r * n + j] != std::max(av, bv) * cv + av;
        }
      BOOST_TEST(bad == 0u, bad << " of " << got.size() << " elements differ");
    });
}
