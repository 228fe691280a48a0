// The rank steps of global-view MeshTensor ops (mesh_rank_steps.hpp).
#include "distributed/mesh_rank_steps.hpp"

#include <memory>

#include "distributed/entered_buckets.hpp"
#include "tensor/custom_vjp.hpp"

namespace ravel::distributed::detail {

// Note [Global-view derivatives]
// A MeshTensor program has ONE objective: the global loss, a replicated value that every rank
// computes identically (jax.jit over a multi-process mesh). Decision 60's explicit collectives
// differentiate the *sum of the ranks' losses* instead (Note [Derivatives across ranks] in
// collective_vjp.cpp), which counts a replicated loss R times. Under the one-loss convention a
// replicated value's cotangent is itself replicated (the same on every rank), and the three
// steps where data crosses ranks are each other's adjoints, Megatron's f and g operators:
//  - combine (partial -> replicated, y = sum_r x_r): dx_r = g, the replicated cotangent handed
//    to each part unchanged, with no communication; for max and min g goes to the ranks holding
//    y, in equal shares among all the elements equal to y (each rank's count of them summed by
//    an all-reduce), as one device's max does.
//  - enter (a replicated value used by this rank's part: a parameter times this rank's rows, a
//    replicated operand cut to this rank's block): the identity forward, and its cotangent is
//    this rank's contribution only, so dx = sum over ranks of g_r (an all-reduce). With the local
//    rules' replica-gradient sum this is the gradient of a replicated parameter summed over the
//    local devices AND the ranks.
//  - gather (split -> replicated, y = [x_0; ...; x_{R-1}]): dx_r = block r of the replicated g,
//    a slice, no communication.
// By induction every replicated cotangent is the same on every rank (replicated ops are
// identical, and enter's all-reduce makes its cotangent so), which is what combine and gather
// rely on. Each result is the decision-60 collective with this rule put over it
// (with_custom_vjp: autodiff never visits the collective's own rule). The rules are written
// with the steps themselves, so they hold again for gradients of gradients: the cotangent g
// handed to a rank's part is a replicated value used by that part, so combine's and gather's
// rules *enter* it (the identity forward, as above), and enter's rule is a combine. Written
// with decision 60's all_reduce instead, a second derivative would count the replicated
// second-order cotangent R times. In a world of one every step is the identity and nothing
// is attached.
namespace {

using GlobalRule = std::shared_ptr<const ravel::detail::CustomRule>;

GlobalRule global_rule(const char* name, std::function<Tensor(const Tensor& x, const Tensor& y, const Tensor& g)> vjp) {
  auto rule = std::make_shared<ravel::detail::CustomRule>();
  rule->name = name;
  rule->vjp = [vjp = std::move(vjp)](const std::vector<Tensor>& in, const Tensor& out, const Tensor& g) {
    return std::vector<Tensor>{vjp(in[0], out, g)};
  };
  return rule;
}

Tensor attach_global(const Tensor& y, const Tensor& x, const GlobalRule& rule) {
  if (!is_float(x.dtype())) return y;
  return ravel::detail::with_custom_vjp(y, {x}, rule);
}

const GlobalRule& combine_sum_rule() {
  static const GlobalRule rule = global_rule(
      "MeshTensor combine (sum)", [](const Tensor&, const Tensor&, const Tensor& g) { return rank_enter(g); });
  return rule;
}

}  // namespace

Tensor rank_combine(const Tensor& x, ReduceOp op, const Tensor& ties) {
  if (world_size() == 1) return x;
  // Note [Entered gradient buckets] (entered_buckets.cpp): a sum joins the waiting buckets, begun
  // with them in one pass and waited for at its first reader.
  if (op == ReduceOp::Sum && entered_buckets_enabled() && is_float(x.dtype()))
    return attach_global(bucketed_rank_sum(x), x, combine_sum_rule());
  const Tensor y = distributed::all_reduce(x, op);
  if (op == ReduceOp::Sum) return attach_global(y, x, combine_sum_rule());
  // Max and min: this rank's share of the elements holding y (its ties over everyone's); the
  // local reduction's own rule then splits the share among this rank's ties.
  const Tensor count = ties.defined() ? ties.detach().cast(x.dtype()) : Tensor::ones_like(x);
  return attach_global(y, x, global_rule("MeshTensor combine (max/min)",
                                         [count](const Tensor& in, const Tensor& out, const Tensor& g) {
    const Tensor mine = Tensor::where(in.eq(out.detach()), count, Tensor::zeros_like(count));
    const Tensor all = distributed::all_reduce(mine, ReduceOp::Sum);  // > 0 unless NaN
    return rank_enter(g) * mine / Tensor::where(all.eq(Tensor::zeros_like(all)), Tensor::ones_like(all), all);
  }));
}

Tensor rank_enter(const Tensor& x) {
  if (world_size() == 1) return x;
  // Note [Entered gradient buckets] (entered_buckets.cpp): the sum over ranks joins a bucket whose
  // all-reduce begins with the others' in one pass and is waited for at its first reader; it is
  // combine's (sum) result, with combine's derivative.
  static const GlobalRule rule = global_rule("MeshTensor enter", [](const Tensor&, const Tensor&, const Tensor& g) {
    if (!entered_buckets_enabled() || !is_float(g.dtype())) return rank_combine(g, ReduceOp::Sum);
    return attach_global(bucketed_rank_sum(g), g, combine_sum_rule());
  });
  return attach_global(x, x, rule);
}

Tensor rank_gather(const Tensor& x) {
  if (world_size() == 1) return x;
  static const GlobalRule rule = global_rule("MeshTensor gather", [](const Tensor& in, const Tensor&, const Tensor& g) {
    const int64_t n = in.shape()[0];
    return rank_enter(g).slice(0, rank() * n, (rank() + 1) * n);
  });
  return attach_global(distributed::all_gather(x), x, rule);
}

}  // namespace ravel::distributed::detail
