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

Shape concat_shapes(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Note [argnums]
// The indices are resolved when the transformed function is called, against the number of
// arguments of that call (a TensorFn does not know its arity before): Python-style negative
// indices (as JAX's _ensure_inbounds), then no index twice: a repeated index is almost always a
// typo for another argument, and refusing it keeps one block per argument.
std::string arguments_text(int64_t n) { return concat(n, n == 1 ? " argument" : " arguments"); }

std::vector<size_t> resolve_argnums(const char* what, const std::vector<int64_t>& argnums, size_t nargs) {
  const auto n = static_cast<int64_t>(nargs);
  RAVEL_CHECK(!argnums.empty(), ValueError, what, ": argnums is empty; list at least one of the function's ",
              arguments_text(n));
  std::vector<size_t> out;
  for (size_t k = 0; k < argnums.size(); ++k) {
    const int64_t a = argnums[k];
    RAVEL_CHECK(a >= -n && a < n, ValueError, what, ": argnums ", a, " is out of range for a function called with ",
                arguments_text(n), n == 0 ? std::string() : concat(" (valid: ", -n, " to ", n - 1, ")"));
    const auto r = static_cast<size_t>(a < 0 ? a + n : a);
    for (size_t m = 0; m < out.size(); ++m)
      RAVEL_CHECK(out[m] != r, ValueError, what, ": argnums names argument ", r, " twice (as ", argnums[m], " and ", a,
                  ") of a function called with ", arguments_text(n));
    out.push_back(r);
  }
  return out;
}

// An empty list can be refused when the transform is built, before any call.
void check_nonempty(const char* what, const std::vector<int64_t>& argnums) {
  RAVEL_CHECK(!argnums.empty(), ValueError, what, ": argnums is empty; list at least one argument");
}

std::vector<Tensor> pick(const std::vector<Tensor>& args, const std::vector<size_t>& idx) {
  std::vector<Tensor> out;
  for (size_t i : idx) out.push_back(args[i]);
  return out;
}

void check_scalar(const char* what, const Tensor& y) {
  RAVEL_CHECK(y.defined() && y.numel() == 1, ShapeError, what, ": the function must return one element, got shape ",
              y.defined() ? shape_str(y.shape()) : std::string("(undefined)"),
              " (use vjp or jacrev for other outputs)");
}

std::pair<Tensor, std::vector<Tensor>> value_and_grad_at(const char* what, const TensorFn& f,
                                                          const std::vector<Tensor>& xs,
                                                          const std::vector<int64_t>& argnums) {
  const std::vector<size_t> idx = resolve_argnums(what, argnums, xs.size());
  std::vector<Tensor> args = mark_arguments(xs);
  Tensor y = f(args);
  check_scalar(what, y);
  return {y, gradients(y, pick(args, idx))};
}

// Reverse mode: one vjp per output element gives one row of every chosen argument's block.
std::vector<Tensor> jacrev_at(const char* what, const TensorFn& f, const std::vector<Tensor>& xs,
                              const std::vector<int64_t>& argnums) {
  const std::vector<size_t> idx = resolve_argnums(what, argnums, xs.size());
  std::vector<Tensor> args = mark_arguments(xs);
  Tensor y = f(args);
  RAVEL_CHECK(y.defined(), ValueError, what, ": the function returned an undefined tensor");
  const std::vector<Tensor> chosen = pick(args, idx);
  std::vector<std::vector<Tensor>> rows(idx.size());
  for (int64_t i = 0; i < y.numel(); ++i) {
    std::vector<Tensor> g = gradients(y, chosen, one_hot_at(y, i));
    for (size_t p = 0; p < idx.size(); ++p) rows[p].push_back(g[p]);
  }
  std::vector<Tensor> blocks;
  for (size_t p = 0; p < idx.size(); ++p) {
    const Tensor& x = xs[idx[p]];
    Shape out = concat_shapes(y.shape(), x.shape());
    blocks.push_back(rows[p].empty() ? Tensor::zeros(out, x.dtype(), x.device())
                                     : Tensor::stack(rows[p], 0).reshape(out));
  }
  return blocks;
}

// Forward mode for a function of several outputs (the hessian's inner jacrev gives one per
// chosen argument), by Note [JVP by double VJP]: f is traced once, its pullback once on
// placeholders u_k (one per output, through the scalar sum_k <y_k, u_k>, whose gradient is
// sum_k J_k^T u_k), and then each input element j gives the column J_k e_j of every output as the
// gradient of <J^T u, e_j> with respect to the u_k. Result [output k][chosen argument p].
using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::vector<std::vector<Tensor>> jacfwd_at(const char* what, const MultiFn& f, const std::vector<Tensor>& xs,
                                           const std::vector<int64_t>& argnums) {
  const std::vector<size_t> idx = resolve_argnums(what, argnums, xs.size());
  std::vector<Tensor> args = mark_arguments(xs);
  const std::vector<Tensor> ys = f(args);
  std::vector<Tensor> us;
  Tensor inner;
  for (const auto& y : ys) {
    RAVEL_CHECK(y.defined(), ValueError, what, ": the function returned an undefined tensor");
    us.push_back(make_alias(Tensor::zeros_like(y), MoveOp::Identity));
    Tensor term = (y * us.back()).sum();
    inner = inner.defined() ? inner + term : term;
  }
  std::vector<std::vector<Tensor>> blocks(ys.size());
  if (ys.empty()) return blocks;
  const std::vector<Tensor> pulled = gradients(inner, pick(args, idx));
  for (size_t p = 0; p < idx.size(); ++p) {
    const Tensor& x = xs[idx[p]];
    std::vector<std::vector<Tensor>> cols(ys.size());
    for (int64_t j = 0; j < x.numel(); ++j) {
      std::vector<Tensor> c = gradients((pulled[p] * one_hot_at(pulled[p], j)).sum(), us);
      for (size_t k = 0; k < ys.size(); ++k) cols[k].push_back(c[k]);
    }
    for (size_t k = 0; k < ys.size(); ++k) {
      Shape out = concat_shapes(ys[k].shape(), x.shape());
      blocks[k].push_back(cols[k].empty() ? Tensor::zeros(out, x.dtype(), x.device())
                                          : Tensor::stack(cols[k], -1).reshape(out));
    }
  }
  return blocks;
}

MultiFn one_output(TensorFn f) {
  return [f = std::move(f)](const std::vector<Tensor>& a) { return std::vector<Tensor>{f(a)}; };
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
  check_scalar("grad", y);
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

// The one-argument Jacobians are the argnums forms at argument 0.
UnaryFn jacrev(UnaryFn f) {
  return [f = std::move(f)](const Tensor& x) {
    return jacrev_at("jacrev", [&f](const std::vector<Tensor>& a) { return f(a[0]); }, {x}, {0})[0];
  };
}

UnaryFn jacfwd(UnaryFn f) {
  return [f = std::move(f)](const Tensor& x) {
    return jacfwd_at("jacfwd", one_output([&f](const std::vector<Tensor>& a) { return f(a[0]); }), {x}, {0})[0][0];
  };
}

UnaryFn hessian(UnaryFn f) { return jacfwd(jacrev(std::move(f))); }

// ---- argnums (Note [argnums]) ----
TensorFn grad(TensorFn f, int64_t argnum) {
  return [f = std::move(f), argnum](const std::vector<Tensor>& xs) {
    return value_and_grad_at("grad", f, xs, {argnum}).second[0];
  };
}

GradFn grad(TensorFn f, std::vector<int64_t> argnums) {
  check_nonempty("grad", argnums);
  return [f = std::move(f), argnums = std::move(argnums)](const std::vector<Tensor>& xs) {
    return value_and_grad_at("grad", f, xs, argnums).second;
  };
}

std::pair<Tensor, Tensor> value_and_grad(const TensorFn& f, const std::vector<Tensor>& xs, int64_t argnum) {
  auto [y, g] = value_and_grad_at("value_and_grad", f, xs, {argnum});
  return {y, g[0]};
}

std::pair<Tensor, std::vector<Tensor>> value_and_grad(const TensorFn& f, const std::vector<Tensor>& xs,
                                                      std::vector<int64_t> argnums) {
  return value_and_grad_at("value_and_grad", f, xs, argnums);
}

TensorFn jacrev(TensorFn f, int64_t argnum) {
  return [f = std::move(f), argnum](const std::vector<Tensor>& xs) { return jacrev_at("jacrev", f, xs, {argnum})[0]; };
}

GradFn jacrev(TensorFn f, std::vector<int64_t> argnums) {
  check_nonempty("jacrev", argnums);
  return [f = std::move(f), argnums = std::move(argnums)](const std::vector<Tensor>& xs) {
    return jacrev_at("jacrev", f, xs, argnums);
  };
}

TensorFn jacfwd(TensorFn f, int64_t argnum) {
  return [g = one_output(std::move(f)), argnum](const std::vector<Tensor>& xs) {
    return jacfwd_at("jacfwd", g, xs, {argnum})[0][0];
  };
}

GradFn jacfwd(TensorFn f, std::vector<int64_t> argnums) {
  check_nonempty("jacfwd", argnums);
  return [g = one_output(std::move(f)), argnums = std::move(argnums)](const std::vector<Tensor>& xs) {
    return jacfwd_at("jacfwd", g, xs, argnums)[0];
  };
}

TensorFn hessian(TensorFn f, int64_t argnum) {
  return [f = std::move(f), argnum](const std::vector<Tensor>& xs) {
    MultiFn inner = [&f, argnum](const std::vector<Tensor>& a) { return jacrev_at("hessian", f, a, {argnum}); };
    return jacfwd_at("hessian", inner, xs, {argnum})[0][0];
  };
}

// jacfwd(jacrev(f, argnums), argnums): the inner jacrev gives df/dx_a for each listed a, the outer
// jacfwd differentiates each of those with respect to each listed b, so block [a][b] is
// d/dx_b (df/dx_a), shaped output + x_a + x_b.
HessianFn hessian(TensorFn f, std::vector<int64_t> argnums) {
  check_nonempty("hessian", argnums);
  return [f = std::move(f), argnums = std::move(argnums)](const std::vector<Tensor>& xs) {
    MultiFn inner = [&](const std::vector<Tensor>& a) { return jacrev_at("hessian", f, a, argnums); };
    return jacfwd_at("hessian", inner, xs, argnums);
  };
}

Tensor stop_gradient(const Tensor& t) {
  check_defined(t, "stop_gradient");
  return make_alias(t, MoveOp::StopGradient);
}

}  // namespace ravel
