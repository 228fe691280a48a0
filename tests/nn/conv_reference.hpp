// Naive convolution and pooling in double, written from the definitions (PyTorch's docs), as the
// independent reference of test_conv.cpp and test_pool.cpp. Nothing here calls Ravel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace conv_ref {

using Vec = std::vector<int64_t>;

inline int64_t product(const Vec& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Row-major multi-index of flat index f over `shape`.
inline Vec unflatten(int64_t f, const Vec& shape) {
  Vec i(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    i[d] = f % shape[d];
    f /= shape[d];
  }
  return i;
}

inline int64_t flatten(const Vec& i, const Vec& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + i[d];
  return f;
}

struct Conv {
  int64_t n, c, o, groups;
  Vec in, kernel, stride, dilation;
  std::vector<std::pair<int64_t, int64_t>> pad;  // (before, after)
  Vec out() const {
    Vec r;
    for (size_t i = 0; i < in.size(); ++i)
      r.push_back((in[i] + pad[i].first + pad[i].second - dilation[i] * (kernel[i] - 1) - 1) / stride[i] + 1);
    return r;
  }
};

// out[n, o, p] = bias[o] + sum_{c in o's group, t} x[n, c, p * stride - pad + t * dilation] w[o, c, t]
inline std::vector<double> conv(const Conv& p, const std::vector<double>& x, const std::vector<double>& w,
                                const std::vector<double>* bias) {
  const Vec out = p.out();
  const int64_t po = product(out), pk = product(p.kernel), pi = product(p.in);
  const int64_t cg = p.c / p.groups, og = p.o / p.groups;
  std::vector<double> y(static_cast<size_t>(p.n * p.o * po));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t o = 0; o < p.o; ++o)
      for (int64_t q = 0; q < po; ++q) {
        Vec oi = unflatten(q, out);
        double acc = bias ? (*bias)[o] : 0.0;
        for (int64_t cc = 0; cc < cg; ++cc)
          for (int64_t t = 0; t < pk; ++t) {
            Vec ti = unflatten(t, p.kernel), xi(out.size());
            bool inside = true;
            for (size_t d = 0; d < out.size(); ++d) {
              xi[d] = oi[d] * p.stride[d] - p.pad[d].first + ti[d] * p.dilation[d];
              inside &= xi[d] >= 0 && xi[d] < p.in[d];
            }
            if (!inside) continue;
            const int64_t c = (o / og) * cg + cc;
            acc += x[(n * p.c + c) * pi + flatten(xi, p.in)] * w[(o * cg + cc) * pk + t];
          }
        y[(n * p.o + o) * po + q] = acc;
      }
  return y;
}

// Transposed convolution from its scatter definition: x[n, c, i] w[c, o, t] lands at
// i * stride - pad_before + t * dilation of an output of size `out`.
inline std::vector<double> conv_transpose(const Conv& p, const Vec& out, const std::vector<double>& x,
                                          const std::vector<double>& w, const std::vector<double>* bias) {
  // Here p.c = input channels, p.o = output channels; w is [C, O / groups, k...].
  const int64_t po = product(out), pk = product(p.kernel), pi = product(p.in);
  const int64_t cg = p.c / p.groups, og = p.o / p.groups;
  std::vector<double> y(static_cast<size_t>(p.n * p.o * po), 0.0);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t o = 0; o < p.o; ++o)
      for (int64_t q = 0; q < po; ++q) y[(n * p.o + o) * po + q] = bias ? (*bias)[o] : 0.0;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t c = 0; c < p.c; ++c)
      for (int64_t q = 0; q < pi; ++q) {
        Vec ii = unflatten(q, p.in);
        for (int64_t oo = 0; oo < og; ++oo)
          for (int64_t t = 0; t < pk; ++t) {
            Vec ti = unflatten(t, p.kernel), yi(out.size());
            bool inside = true;
            for (size_t d = 0; d < out.size(); ++d) {
              yi[d] = ii[d] * p.stride[d] - p.pad[d].first + ti[d] * p.dilation[d];
              inside &= yi[d] >= 0 && yi[d] < out[d];
            }
            if (!inside) continue;
            const int64_t o = (c / cg) * og + oo;
            y[(n * p.o + o) * po + flatten(yi, out)] += x[(n * p.c + c) * pi + q] * w[(c * og + oo) * pk + t];
          }
      }
  return y;
}

}  // namespace conv_ref

namespace conv_ref {

struct Pool {
  Vec in, kernel, stride, pad, dilation;
  bool ceil_mode = false;
  // PyTorch's pooling_output_shape.
  Vec out() const {
    Vec r;
    for (size_t i = 0; i < in.size(); ++i) {
      const int64_t span = dilation[i] * (kernel[i] - 1) + 1;
      const int64_t num = in[i] + 2 * pad[i] - span + (ceil_mode ? stride[i] - 1 : 0);
      int64_t o = num / stride[i] + 1;
      if (ceil_mode && (o - 1) * stride[i] >= in[i] + pad[i]) --o;
      r.push_back(o);
    }
    return r;
  }
};

// Max over each window of `planes` independent planes; also the flat input index of the first
// maximum in window scan order, or of the last NaN (PyTorch's CPU rule), -1 if the window holds
// no input element.
inline std::vector<double> max_pool(const Pool& p, int64_t planes, const std::vector<double>& x,
                                    std::vector<int64_t>* argmax) {
  const Vec out = p.out();
  const int64_t po = product(out), pk = product(p.kernel), pi = product(p.in);
  std::vector<double> y;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t q = 0; q < po; ++q) {
      Vec oi = unflatten(q, out);
      double best = -std::numeric_limits<double>::infinity();
      int64_t at = -1;
      for (int64_t t = 0; t < pk; ++t) {
        Vec ti = unflatten(t, p.kernel), xi(out.size());
        bool inside = true;
        for (size_t d = 0; d < out.size(); ++d) {
          xi[d] = oi[d] * p.stride[d] - p.pad[d] + ti[d] * p.dilation[d];
          inside &= xi[d] >= 0 && xi[d] < p.in[d];
        }
        if (!inside) continue;
        const int64_t f = pl * pi + flatten(xi, p.in);
        // PyTorch's `val > maxval || isnan(val)`: a NaN takes the window, the last one wins.
        if (at < 0 || x[f] > best || std::isnan(x[f])) best = x[f], at = f;
      }
      y.push_back(best);
      if (argmax) argmax->push_back(at);
    }
  return y;
}

// PyTorch's avg_pool: the sum over the window's input elements divided by the window clipped to
// the padded input (count_include_pad), to the input, or by `divisor` when nonzero.
inline std::vector<double> avg_pool(const Pool& p, int64_t planes, const std::vector<double>& x,
                                    bool count_include_pad, int64_t divisor) {
  const Vec out = p.out();
  const int64_t po = product(out), pk = product(p.kernel), pi = product(p.in);
  std::vector<double> y;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t q = 0; q < po; ++q) {
      Vec oi = unflatten(q, out);
      double sum = 0;
      int64_t with_pad = 1, inside_count = 1;
      for (size_t d = 0; d < out.size(); ++d) {
        int64_t start = oi[d] * p.stride[d] - p.pad[d];
        int64_t end = std::min(start + p.kernel[d], p.in[d] + p.pad[d]);
        with_pad *= end - start;
        inside_count *= std::min(end, p.in[d]) - std::max<int64_t>(start, 0);
      }
      for (int64_t t = 0; t < pk; ++t) {
        Vec ti = unflatten(t, p.kernel), xi(out.size());
        bool inside = true;
        for (size_t d = 0; d < out.size(); ++d) {
          xi[d] = oi[d] * p.stride[d] - p.pad[d] + ti[d];
          inside &= xi[d] >= 0 && xi[d] < p.in[d];
        }
        if (inside) sum += x[pl * pi + flatten(xi, p.in)];
      }
      y.push_back(sum / double(divisor ? divisor : count_include_pad ? with_pad : inside_count));
    }
  return y;
}

}  // namespace conv_ref
