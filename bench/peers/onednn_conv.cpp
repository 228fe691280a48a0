// The oneDNN convolution peer (ravel-peer-onednn --workload conv2d --size n,c,o,hw,k): what
// ravel-bench's conv2d row times (bench config cnn-vs-torch.json), written as a framework built on
// oneDNN runs it. One convolution forward (stride 1, padding k/2, no bias) and both gradients of
// sum(y * r): backward data (dx from dy = r and w) and backward weights (dw from x and dy).
//
// Note [The oneDNN peer's layouts]
// Every primitive is created with format `any`, so oneDNN picks its blocked layouts (nChw8c on
// AVX2), and the operands are reordered into them once, before timing: a framework built on
// oneDNN keeps activations and weights in those layouts between layers (as PyTorch's mkldnn
// tensors do), so that is the speed an expert gets, and the limit this row should compare with.
// The reorders are not timed; neither are Ravel's uploads. The forward result is checked (one
// image, every output channel) against a naive convolution in double, and one filter of the
// weight gradient against a naive sum, so the peer never times a wrong answer.
#include "onednn_conv.hpp"

#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

std::vector<float> filled(size_t n, unsigned salt) {
  std::vector<float> v(n);
  unsigned x = salt * 2654435761u + 1;
  for (float& f : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    f = float(x % 2001) / 1000.0f - 1.0f;  // uniform-ish in [-1, 1], like the other peers' data
  }
  return v;
}

// A memory of `md`'s layout filled from `plain` (in `plain_tag`), by a reorder when they differ.
memory to_layout(const dnnl::engine& eng, dnnl::stream& s, const memory::desc& md, const memory::dims& dims,
                 tag plain_tag, std::vector<float>& plain) {
  memory user({dims, dt::f32, plain_tag}, eng, plain.data());
  if (md == user.get_desc()) return user;
  memory m(md, eng);
  dnnl::reorder(user, m).execute(s, user, m);
  s.wait();
  return m;
}

// `m` back into a plain buffer in `plain_tag`.
std::vector<float> from_layout(const dnnl::engine& eng, dnnl::stream& s, const memory& m, const memory::dims& dims,
                               tag plain_tag) {
  size_t n = 1;
  for (auto d : dims) n *= static_cast<size_t>(d);
  std::vector<float> out(n);
  memory user({dims, dt::f32, plain_tag}, eng, out.data());
  memory src = m;  // a handle: execute takes non-const references
  dnnl::reorder(src, user).execute(s, src, user);
  s.wait();
  return out;
}

}  // namespace

int run_onednn_conv(const std::vector<long>& size, const std::string& size_json, int warmup, int reps) {
  if (size.size() != 5) {
    std::printf("{\"workload\": \"conv2d\", \"size\": [%s], \"unavailable\": \"conv2d takes 5 numbers: n, c, o, hw, k\"}\n",
                size_json.c_str());
    return 0;
  }
  const memory::dim n = size[0], c = size[1], o = size[2], hw = size[3], k = size[4], pad = k / 2;
  const memory::dim out_hw = hw + 2 * pad - k + 1;
  const memory::dims src_dims{n, c, hw, hw}, wei_dims{o, c, k, k}, dst_dims{n, o, out_hw, out_hw};
  const memory::dims strides{1, 1}, pad_l{pad, pad}, pad_r{pad, pad};
  std::vector<float> x = filled(n * c * hw * hw, 1), w = filled(o * c * k * k, 2), r = filled(n * o * out_hw * out_hw, 3);

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const memory::desc src_any(src_dims, dt::f32, tag::any), wei_any(wei_dims, dt::f32, tag::any),
      dst_any(dst_dims, dt::f32, tag::any);
  using namespace dnnl;
  const auto alg = algorithm::convolution_direct;
#if DNNL_VERSION_MAJOR >= 3
  convolution_forward::primitive_desc fwd_pd(eng, prop_kind::forward_training, alg, src_any, wei_any, dst_any, strides,
                                             pad_l, pad_r);
  convolution_backward_data::primitive_desc bwd_d_pd(eng, alg, src_any, wei_any, dst_any, strides, pad_l, pad_r, fwd_pd);
  convolution_backward_weights::primitive_desc bwd_w_pd(eng, alg, src_any, wei_any, dst_any, strides, pad_l, pad_r,
                                                        fwd_pd);
#else
  convolution_forward::primitive_desc fwd_pd(
      convolution_forward::desc(prop_kind::forward_training, alg, src_any, wei_any, dst_any, strides, pad_l, pad_r), eng);
  convolution_backward_data::primitive_desc bwd_d_pd(
      convolution_backward_data::desc(alg, src_any, wei_any, dst_any, strides, pad_l, pad_r), eng, fwd_pd);
  convolution_backward_weights::primitive_desc bwd_w_pd(
      convolution_backward_weights::desc(alg, src_any, wei_any, dst_any, strides, pad_l, pad_r), eng, fwd_pd);
#endif
  // Note [The oneDNN peer's layouts]: operands reordered once into the layouts each primitive chose.
  memory x_fwd = to_layout(eng, s, fwd_pd.src_desc(), src_dims, tag::nchw, x);
  memory w_fwd = to_layout(eng, s, fwd_pd.weights_desc(), wei_dims, tag::oihw, w);
  memory w_bwd = to_layout(eng, s, bwd_d_pd.weights_desc(), wei_dims, tag::oihw, w);
  memory x_bwd = to_layout(eng, s, bwd_w_pd.src_desc(), src_dims, tag::nchw, x);
  memory r_d = to_layout(eng, s, bwd_d_pd.diff_dst_desc(), dst_dims, tag::nchw, r);
  memory r_w = to_layout(eng, s, bwd_w_pd.diff_dst_desc(), dst_dims, tag::nchw, r);
  memory y(fwd_pd.dst_desc(), eng), gx(bwd_d_pd.diff_src_desc(), eng), gw(bwd_w_pd.diff_weights_desc(), eng);
  convolution_forward fwd(fwd_pd);
  convolution_backward_data bwd_d(bwd_d_pd);
  convolution_backward_weights bwd_w(bwd_w_pd);
  auto step = [&] {
    fwd.execute(s, {{DNNL_ARG_SRC, x_fwd}, {DNNL_ARG_WEIGHTS, w_fwd}, {DNNL_ARG_DST, y}});
    bwd_d.execute(s, {{DNNL_ARG_DIFF_DST, r_d}, {DNNL_ARG_WEIGHTS, w_bwd}, {DNNL_ARG_DIFF_SRC, gx}});
    bwd_w.execute(s, {{DNNL_ARG_SRC, x_bwd}, {DNNL_ARG_DIFF_DST, r_w}, {DNNL_ARG_DIFF_WEIGHTS, gw}});
    s.wait();
  };

  step();
  // The check: image 0 of y, every channel, and filter 0 of dw, against naive sums in double.
  const std::vector<float> y_plain = from_layout(eng, s, y, dst_dims, tag::nchw);
  const std::vector<float> gw_plain = from_layout(eng, s, gw, wei_dims, tag::oihw);
  auto at = [&](const std::vector<float>& v, memory::dim ch, memory::dim chans, memory::dim img, memory::dim i,
                memory::dim j, memory::dim side) { return double(v[((img * chans + ch) * side + i) * side + j]); };
  bool ok = true;
  const double tol = 1e-4 * double(c * k * k) + 1e-4;
  for (memory::dim oc = 0; oc < o && ok; ++oc)
    for (memory::dim i = 0; i < out_hw && ok; ++i)
      for (memory::dim j = 0; j < out_hw && ok; ++j) {
        double acc = 0;
        for (memory::dim ic = 0; ic < c; ++ic)
          for (memory::dim a = 0; a < k; ++a)
            for (memory::dim b = 0; b < k; ++b) {
              const memory::dim yi = i + a - pad, xj = j + b - pad;
              if (yi >= 0 && yi < hw && xj >= 0 && xj < hw)
                acc += at(x, ic, c, 0, yi, xj, hw) * double(w[((oc * c + ic) * k + a) * k + b]);
            }
        ok = std::abs(acc - at(y_plain, oc, o, 0, i, j, out_hw)) <= tol * (1 + std::abs(acc));
      }
  for (memory::dim ic = 0; ic < c && ok; ++ic)  // dw[0, ic, a, b] = sum over n, i, j of x * r
    for (memory::dim a = 0; a < k && ok; ++a)
      for (memory::dim b = 0; b < k && ok; ++b) {
        double acc = 0;
        for (memory::dim img = 0; img < n; ++img)
          for (memory::dim i = 0; i < out_hw; ++i)
            for (memory::dim j = 0; j < out_hw; ++j) {
              const memory::dim yi = i + a - pad, xj = j + b - pad;
              if (yi >= 0 && yi < hw && xj >= 0 && xj < hw) acc += at(x, ic, c, img, yi, xj, hw) * at(r, 0, o, img, i, j, out_hw);
            }
        const double got = gw_plain[((0 * c + ic) * k + a) * k + b];
        ok = std::abs(acc - got) <= 1e-4 * std::sqrt(double(n * out_hw * out_hw)) * (1 + std::abs(acc));
      }
  if (!ok) {
    std::fprintf(stderr, "oneDNN conv peer: the convolution differs from the naive sums\n");
    return 1;
  }

  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  const dnnl_version_t* ver = dnnl_version();
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  std::printf("{\"workload\": \"conv2d\", \"size\": [%s], \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, "
              "\"reps\": %d, \"checked\": true, \"threads\": \"oneDNN %d.%d (%s), OpenMP %d threads, "
              "OMP_WAIT_POLICY=%s; layouts chosen by oneDNN, reordered before timing\"}\n",
              size_json.c_str(), med, ms.front(), ms.back(), reps, ver->major, ver->minor, ver->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other runtime",
              omp_get_max_threads(), wait ? wait : "(unset)");
  return 0;
}
