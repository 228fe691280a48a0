// adaptive_avg_pool1d/2d/3d and adaptive_max_pool1d/2d/3d (ravel/conv.hpp).
#include <limits>
#include <string>

#include "nn/window.hpp"
#include "ravel/autodiff.hpp"
#include "ravel/conv.hpp"

namespace ravel::nn {

namespace window = ravel::detail::window;  // nn/window.hpp: internal, not exported

namespace {

// Note [Adaptive pooling]
// Output cell j of an axis of size `in` pools [floor(j * in / out), ceil((j + 1) * in / out))
// (PyTorch's start_index/end_index). When out divides in, those are the disjoint windows of an
// ordinary pooling with kernel = stride = in / out (global pooling is kernel = in), which is
// what runs. Otherwise the windows differ in size; they are written as a [O, I] membership
// matrix over the flattened spatial axes (O output cells, I input elements, built on the host):
// the average is then one GEMM with that matrix scaled by 1 / window size, and the maximum a
// masked max over [.., O, I] (a fused reduction; nothing of that size is stored), whose
// gradient follows max pooling's rule (Note [Gradient of max pooling]: the first maximum in
// scan order, or the last NaN) by the same mask.

struct Adaptive {
  std::vector<int64_t> in, out;
  Shape lead;
  bool divisible = true;
};

Adaptive adaptive_setup(const std::string& op, size_t k, const Tensor& x, const std::vector<int64_t>& output_size) {
  RAVEL_CHECK(x.defined(), ValueError, op, ": the input must be a defined tensor");
  RAVEL_CHECK(x.ndim() == static_cast<int64_t>(k + 1) || x.ndim() == static_cast<int64_t>(k + 2), ShapeError, op,
              ": expected an input of rank ", k + 1, " or ", k + 2, " ([N,] C, ", k, " spatial axes), got ",
              shape_str(x.shape()));
  RAVEL_CHECK(is_float(x.dtype()), DTypeError, op, ": expected a float tensor, got ", dtype_name(x.dtype()));
  Adaptive a;
  a.out = window::per_axis(output_size, k, 1, "output_size", op);
  a.lead.assign(x.shape().begin(), x.shape().end() - static_cast<int64_t>(k));
  a.in.assign(x.shape().end() - static_cast<int64_t>(k), x.shape().end());
  for (size_t i = 0; i < k; ++i) {
    RAVEL_CHECK(a.in[i] >= 1, ShapeError, op, ": the input ", shape_str(x.shape()), " is empty on spatial axis ", i);
    a.divisible &= a.in[i] % a.out[i] == 0;
  }
  return a;
}

PoolOptions as_pooling(const Adaptive& a) {
  PoolOptions o;
  for (size_t i = 0; i < a.in.size(); ++i) o.kernel.push_back(a.in[i] / a.out[i]);
  return o;
}

// Membership [O, I] of flattened input elements in flattened output cells, as doubles: 1 / size
// of the cell's window when `average`, else 1.
Tensor membership(const Adaptive& a, bool average, const Device& device) {
  const size_t k = a.in.size();
  int64_t no = 1, ni = 1;
  for (size_t i = 0; i < k; ++i) no *= a.out[i], ni *= a.in[i];
  std::vector<double> m(static_cast<size_t>(no * ni), 0.0);
  for (int64_t o = 0; o < no; ++o) {
    std::vector<int64_t> lo(k), hi(k);
    int64_t rest = o, size = 1;
    for (size_t i = k; i-- > 0;) {
      const int64_t j = rest % a.out[i];
      rest /= a.out[i];
      lo[i] = j * a.in[i] / a.out[i];
      hi[i] = ((j + 1) * a.in[i] + a.out[i] - 1) / a.out[i];
      size *= hi[i] - lo[i];
    }
    for (int64_t f = 0; f < ni; ++f) {
      int64_t r = f;
      bool inside = true;
      for (size_t i = k; i-- > 0;) {
        const int64_t t = r % a.in[i];
        r /= a.in[i];
        inside &= t >= lo[i] && t < hi[i];
      }
      if (inside) m[static_cast<size_t>(o * ni + f)] = average ? 1.0 / static_cast<double>(size) : 1.0;
    }
  }
  return Tensor::from_vector(m, {no, ni}, device);
}

Tensor adaptive_avg(const std::string& op, size_t k, const Tensor& x, const std::vector<int64_t>& output_size) {
  Adaptive a = adaptive_setup(op, k, x, output_size);
  if (a.divisible) {
    const PoolOptions o = as_pooling(a);
    return k == 1 ? avg_pool1d(x, o) : k == 2 ? avg_pool2d(x, o) : avg_pool3d(x, o);
  }
  Tensor m = membership(a, true, x.device()).cast(x.dtype());  // [O, I]
  Shape flat = a.lead, out = a.lead;
  flat.push_back(-1);
  out.insert(out.end(), a.out.begin(), a.out.end());
  return x.reshape(flat).matmul(m.transpose()).reshape(out);
}

Tensor adaptive_max(const std::string& op, size_t k, const Tensor& x, const std::vector<int64_t>& output_size) {
  Adaptive a = adaptive_setup(op, k, x, output_size);
  if (a.divisible) {
    const PoolOptions o = as_pooling(a);
    return k == 1 ? max_pool1d(x, o) : k == 2 ? max_pool2d(x, o) : max_pool3d(x, o);
  }
  Tensor inside = membership(a, false, x.device()).ne(Tensor::zeros({}, DType::F64, x.device()));  // [O, I]
  const int64_t no = inside.shape()[0], ni = inside.shape()[1];
  Shape cells = a.lead, out = a.lead;
  cells.insert(cells.end(), {no, ni});
  out.insert(out.end(), a.out.begin(), a.out.end());
  auto spread = [lead = a.lead, ni, cells](const Tensor& t) {  // [lead..., in...] -> [lead..., O, I]
    Shape one = lead;
    one.insert(one.end(), {1, ni});
    return t.reshape(one).expand(cells);
  };
  const double lowest = -std::numeric_limits<double>::infinity();
  Tensor neg_inf = Tensor::full({}, lowest, x.dtype(), x.device());
  Tensor y = Tensor::where(inside, spread(x.detach()), neg_inf).max(-1).reshape(out);
  if (!grad_enabled()) return y;
  std::vector<int64_t> shape_in = x.shape();
  return custom_vjp(
      y, {x},
      [spread, inside, cells, ni, shape_in](const std::vector<Tensor>& in, const Tensor& y_out, const Tensor& g) {
        Tensor xs = spread(in[0].detach());
        Shape kept(cells.begin(), cells.end() - 1);
        kept.push_back(1);
        Tensor best = y_out.detach().reshape(kept);
        const Device dev = xs.device();
        Tensor idx = Tensor::arange(0, static_cast<double>(ni), 1, DType::I64, dev);
        Tensor first = Tensor::where(inside.logical_and(xs.eq(best)), idx, Tensor::full({}, double(ni), DType::I64, dev))
                           .min(-1, true);
        Tensor last_nan = Tensor::where(inside.logical_and(xs.ne(xs)), idx, Tensor::full({}, -1.0, DType::I64, dev))
                              .max(-1, true);
        Tensor chosen = Tensor::where(last_nan.ge(Tensor::zeros({}, DType::I64, dev)), last_nan, first);
        Tensor gx = Tensor::where(idx.eq(chosen), g.reshape(kept), Tensor::zeros({}, g.dtype(), dev)).sum(-2);
        return std::vector<Tensor>{gx.reshape(shape_in)};
      },
      op);
}

}  // namespace

Tensor adaptive_avg_pool1d(const Tensor& x, std::vector<int64_t> s) { return adaptive_avg("adaptive_avg_pool1d", 1, x, s); }
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> s) { return adaptive_avg("adaptive_avg_pool2d", 2, x, s); }
Tensor adaptive_max_pool1d(const Tensor& x, std::vector<int64_t> s) { return adaptive_max("adaptive_max_pool1d", 1, x, s); }
Tensor adaptive_max_pool2d(const Tensor& x, std::vector<int64_t> s) { return adaptive_max("adaptive_max_pool2d", 2, x, s); }
Tensor adaptive_avg_pool3d(const Tensor& x, std::vector<int64_t> s) { return adaptive_avg("adaptive_avg_pool3d", 3, x, s); }
Tensor adaptive_max_pool3d(const Tensor& x, std::vector<int64_t> s) { return adaptive_max("adaptive_max_pool3d", 3, x, s); }

}  // namespace ravel::nn
