// The functional transforms (JAX style) over gradients().
#include "ravel/autodiff.hpp"
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

namespace {
// Fresh, unique aliases of the arguments: the function is traced on these, so gradients are
// taken with respect to exactly this call's arguments, even if two arguments are the same
// tensor or one is computed from another (and an outer transform still sees through them).
std::vector<Tensor> mark_arguments(const std::vector<Tensor>& xs) {
  std::vector<Tensor> out;
  for (const auto& x : xs) {
    check_defined(x, "autodiff argument");
    out.push_back(make_alias(x, MoveOp::Identity));
  }
  return out;
}

// The one-hot tensor of `shape` with a 1 at flat index i.
Tensor one_hot_at(const Tensor& like, int64_t i) {
  Tensor flat = Tensor::zeros({like.numel()}, like.dtype(), like.device());
  Tensor one = Tensor::ones({1}, like.dtype(), like.device()).pad({{i, like.numel() - i - 1}});
  return (flat + one).reshape(like.shape());
}
}  // namespace

GradFn grad(TensorFn f) {
  return [f = std::move(f)](const std::vector<Tensor>& xs) { return value_and_grad(f, xs).second; };
}

UnaryFn grad(UnaryFn f) {
  return [f = std::move(f)](const Tensor& x) {
    return value_and_grad([&](const std::vector<Tensor>& a) { return f(a[0]); }, {x}).second[0];
  };
}

std::pair<Tensor, std::vector<Tensor>> value_and_grad(const TensorFn& f, const std::vector<Tensor>& xs) {
  std::vector<Tensor> args = mark_arguments(xs);
  Tensor y = f(args);
  RAVEL_CHECK(y.defined() && y.numel() == 1, ShapeError, "grad: the function must return one element, got shape ",
              y.defined() ? shape_str(y.shape()) : std::string("(undefined)"), " (use vjp or jacrev for other outputs)");
  return {y, gradients(y, args)};
}

VjpResult vjp(const TensorFn& f, const std::vector<Tensor>& xs) {
  std::vector<Tensor> args = mark_arguments(xs);
  Tensor y = f(args);
  return {y, [y, args](const Tensor& cotangent) { return gradients(y, args, cotangent); }};
}

// Note [JVP by double VJP]
// For y = f(x), the pullback u -> J^T u is linear in u. Tracing it on a placeholder u and
// differentiating <J^T u, t> with respect to u gives J t: forward mode from reverse-mode rules
// alone, with no separate JVP rule per primitive (the "transpose trick" of the JAX autodiff
// cookbook). Because gradients are graph nodes, the result is itself differentiable.
std::pair<Tensor, Tensor> jvp(const TensorFn& f, const std::vector<Tensor>& xs, const std::vector<Tensor>& tangents) {
  RAVEL_CHECK(xs.size() == tangents.size(), ValueError, "jvp: expected one tangent per argument (", xs.size(),
              "), got ", tangents.size());
  for (size_t i = 0; i < xs.size(); ++i)
    RAVEL_CHECK(tangents[i].shape() == xs[i].shape(), ShapeError, "jvp: tangent ", i, " has shape ",
                shape_str(tangents[i].shape()), ", expected the argument's shape ", shape_str(xs[i].shape()));
  std::vector<Tensor> args = mark_arguments(xs);
  Tensor y = f(args);
  Tensor u = make_alias(Tensor::zeros_like(y), MoveOp::Identity);
  std::vector<Tensor> pulled = gradients(y, args, u);
  Tensor inner;
  for (size_t i = 0; i < pulled.size(); ++i) {
    Tensor term = (pulled[i] * tangents[i].cast(pulled[i].dtype())).sum();
    inner = inner.defined() ? inner + term : term;
  }
  return {y, gradients(inner, {u})[0]};
}

UnaryFn jacrev(UnaryFn f) {
  return [f = std::move(f)](const Tensor& x) {
    std::vector<Tensor> args = mark_arguments({x});
    Tensor y = f(args[0]);
    std::vector<Tensor> rows;
    for (int64_t i = 0; i < y.numel(); ++i) rows.push_back(gradients(y, args, one_hot_at(y, i))[0]);
    Shape out = y.shape();
    out.insert(out.end(), x.shape().begin(), x.shape().end());
    if (rows.empty()) return Tensor::zeros(out, x.dtype(), x.device());
    return Tensor::stack(rows, 0).reshape(out);
  };
}

UnaryFn jacfwd(UnaryFn f) {
  return [f = std::move(f)](const Tensor& x) {
    TensorFn g = [&f](const std::vector<Tensor>& a) { return f(a[0]); };
    std::vector<Tensor> cols;
    Tensor y;
    for (int64_t j = 0; j < x.numel(); ++j) {
      auto [out, col] = jvp(g, {x}, {one_hot_at(x, j)});
      y = out;
      cols.push_back(col);
    }
    if (cols.empty()) y = f(x);
    Shape out = y.shape();
    out.insert(out.end(), x.shape().begin(), x.shape().end());
    if (cols.empty()) return Tensor::zeros(out, x.dtype(), x.device());
    return Tensor::stack(cols, -1).reshape(out);
  };
}

UnaryFn hessian(UnaryFn f) { return jacfwd(jacrev(std::move(f))); }

Tensor stop_gradient(const Tensor& t) {
  check_defined(t, "stop_gradient");
  return make_alias(t, MoveOp::StopGradient);
}

}  // namespace ravel
