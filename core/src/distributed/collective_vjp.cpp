// Derivatives of the collectives across ranks: each collective's result carries its adjoint
// collective as a custom derivative, so autodiff, higher orders and Jit go through programs that
// split a model over ranks (tensor parallelism across processes and hosts).
#include "distributed/collective_vjp.hpp"

#include "tensor/custom_vjp.hpp"

#include <memory>
#include <utility>

namespace ravel::distributed::detail {

// Note [Derivatives across ranks]
// Every rank runs the same program on its own values, so a program over R ranks is a function of
// all ranks' inputs with one output per rank. Its objective is the **sum of every rank's loss**,
// as in PyTorch's torch.distributed.nn and JAX's psum transpose, and as data parallelism already
// has it (each rank's loss times its share of the batch sums to the global mean): a rank's
// gradient of x is the derivative of that sum, which needs the other ranks' cotangents. Hence:
//  - all_reduce(sum):     y = sum_s x_s on every rank;  dx_r = sum_s g_s = all_reduce(g).
//  - all_gather:          y = [x_0; ...; x_{R-1}];      dx_r = block r of sum_s g_s = reduce_scatter(g).
//  - reduce_scatter(sum): y_r = block r of sum_s x_s;   dx_s = [g_0; ...; g_{R-1}] = all_gather(g).
//  - broadcast(root):     y = x_root;                   dx_root = all_reduce(g), other ranks 0.
//  - max and min: the summed cotangent goes to the ranks whose value is the result, in equal
//    shares on ties (as Ravel's own max reduction, docs/autodiff.md); prod: the summed
//    cotangent times the product of the other ranks' values, formed from an all_gather so that
//    zeros are exact (not y / x).
// A replicated loss computed identically on every rank is therefore counted R times: scale it
// by 1/R, as Mesh::batch_share does for data parallelism. Every rule is made of collectives and
// tensor ops, so gradients of gradients work, and every rank makes the same collectives in the
// same order during the backward pass because every rank differentiates the same program.
namespace {

bool differentiable(const Tensor& x) { return is_float(x.dtype()); }

using Rule = std::shared_ptr<const ravel::detail::CustomRule>;

Rule make_rule(const char* name, std::function<Tensor(const Tensor& x, const Tensor& y, const Tensor& g)> vjp) {
  auto rule = std::make_shared<ravel::detail::CustomRule>();
  rule->name = name;
  rule->vjp = [vjp = std::move(vjp)](const std::vector<Tensor>& in, const Tensor& out, const Tensor& g) {
    return std::vector<Tensor>{vjp(in[0], out, g)};
  };
  return rule;
}

// Note [Rules made once]: a rule depends only on the collective and its op (or root), so the
// common ones are made once per process, not per call: a rule, its name and two std::functions
// were about a fifth of the core's allocations per 4 KiB all-reduce (docs/distributed.md, "The
// small path's fixed cost, 2026-12-07").
Tensor attach(Tensor y, const Tensor& x, const Rule& rule, bool fresh) {
  if (!differentiable(x)) return y;
  if (fresh) return ravel::detail::with_custom_vjp_on_result(std::move(y), x, rule);
  return ravel::detail::with_custom_vjp(y, {x}, rule);
}

template <class Make>
const Rule& per_op(ReduceOp op, Make make) {
  static const Rule rules[4] = {make(ReduceOp::Sum), make(ReduceOp::Prod), make(ReduceOp::Max), make(ReduceOp::Min)};
  return rules[static_cast<int>(op)];
}

// Every rank's x stacked: [R, x.shape...].
Tensor stacked(const Tensor& x) {
  Shape one = x.shape();
  one.insert(one.begin(), 1);
  return distributed::all_gather(x.reshape(one));
}

// The derivative of y = fold_op(x_0, ..., x_{R-1}) with respect to this rank's x, given the sum
// over ranks of the cotangents of y (`g_sum`, shaped like y) and y on this rank.
Tensor fold_vjp(ReduceOp op, const Tensor& x, const Tensor& y, const Tensor& g_sum) {
  if (op == ReduceOp::Sum) return g_sum;
  const Tensor all = stacked(x);  // [R, ...]
  const Shape& s = all.shape();
  Shape index_shape(s.size(), 1);
  index_shape[0] = s[0];
  const Tensor mine = Tensor::arange(s[0]).reshape(index_shape).eq(Tensor::scalar(double(rank()), DType::I64));
  if (op == ReduceOp::Prod) {
    const Tensor others = Tensor::where(mine, Tensor::ones_like(all), all).prod(0);
    return g_sum * others;
  }
  // Max and min: equal shares among the ranks holding y (k of them; k = 0 only where y is NaN).
  const Tensor k = all.eq(y.unsqueeze(0)).cast(x.dtype()).sum(0);
  const Tensor zero = Tensor::zeros_like(x);
  return Tensor::where(x.eq(y), g_sum / Tensor::where(k.eq(zero), Tensor::ones_like(k), k), zero);
}

}  // namespace

Tensor with_all_reduce_vjp(Tensor y, const Tensor& x, ReduceOp op, bool fresh) {
  return attach(std::move(y), x, per_op(op, [](ReduceOp o) {
    return make_rule("distributed::all_reduce", [o](const Tensor& in, const Tensor& out, const Tensor& g) {
      return fold_vjp(o, in, out, distributed::all_reduce(g, ReduceOp::Sum));
    });
  }), fresh);
}

Tensor with_all_gather_vjp(Tensor y, const Tensor& x, bool fresh) {
  static const Rule rule = make_rule("distributed::all_gather", [](const Tensor& in, const Tensor&, const Tensor& g) {
    return distributed::reduce_scatter(g, ReduceOp::Sum).reshape(in.shape());
  });
  return attach(std::move(y), x, rule, fresh);
}

Tensor with_reduce_scatter_vjp(Tensor y, const Tensor& x, ReduceOp op, bool fresh) {
  return attach(std::move(y), x, per_op(op, [](ReduceOp o) {
    return make_rule("distributed::reduce_scatter", [o](const Tensor& in, const Tensor& out, const Tensor& g) {
      // Block r of the result lives on rank r only: gathering the cotangents gives every rank the
      // sum over ranks of the whole result's cotangent, and gathering y the whole fold.
      const Tensor g_sum = distributed::all_gather(g);
      return fold_vjp(o, in, o == ReduceOp::Sum ? Tensor() : distributed::all_gather(out), g_sum);
    });
  }), fresh);
}

Tensor with_broadcast_vjp(Tensor y, const Tensor& x, int root, bool fresh) {
  if (!differentiable(x)) return y;
  return attach(std::move(y), x, make_rule("distributed::broadcast", [root](const Tensor&, const Tensor&, const Tensor& g) {
    const Tensor g_sum = distributed::all_reduce(g, ReduceOp::Sum);  // on every rank: it is a collective
    return rank() == root ? g_sum : Tensor();            // undefined: no gradient
  }), fresh);
}

}  // namespace ravel::distributed::detail
