// Global-view MeshTensors (ravel/mesh_tensor.hpp, decision 69): tensors split across the ranks
// of a distributed::Mesh, each rank's block over its local tbb_cpu devices. Every result is
// compared with the same computation on the whole tensor in one process on one device (every
// rank has all the data, so each computes the reference itself). Runs as a world of one, and
// under mpirun -np 2 and -np 4 with RAVEL_TBB_DEVICES=2 (tests/distributed/CMakeLists.txt).
#include <cmath>

#include "ravel/autodiff.hpp"
#include "ravel/distributed.hpp"
#include "ravel/jit.hpp"
#include "ravel/mesh_tensor.hpp"
#include "ravel/ravel.hpp"
#include "mesh_support.hpp"
#include "test_support.hpp"

namespace mesh_tensor_test {  // named: the suite is a unity build

namespace dist = ravel::distributed;
using dist::MeshTensor;
using ravel::Device;
using ravel::Shape;
using ravel::Tensor;

using mesh_support::diff;
using mesh_support::kOne;
using mesh_support::local_devices;

// This rank's block of `whole` along `axis` (the reference for a split part).
// numpy.array_split: the first n % R ranks take one row more.
Tensor block(const Tensor& whole, int64_t axis) {
  const int64_t n = whole.shape()[static_cast<size_t>(axis)], ranks = dist::world_size(), r = dist::rank();
  const int64_t lo = r * (n / ranks) + std::min(r, n % ranks);
  return whole.slice(axis, lo, lo + n / ranks + (r < n % ranks ? 1 : 0));
}

// `got` equals `want` (whole, one device) and lies as expected: split along `axis` or replicated.
void check(const MeshTensor& got, const Tensor& want, std::optional<int64_t> axis, const char* what) {
  BOOST_TEST_CONTEXT(what << ": " << got.sharding().str()) {
    BOOST_TEST(got.shape() == want.shape());
    BOOST_TEST(got.axis().value_or(-1) == axis.value_or(-1));
    BOOST_TEST(diff(got.to(kOne), want) < 1e-5);
    BOOST_TEST(diff(got.local(), axis ? block(want, *axis) : want) < 1e-5);  // the part itself, no rank step
  }
}

}  // namespace mesh_tensor_test

using namespace mesh_tensor_test;

BOOST_AUTO_TEST_SUITE(distributed_mesh_tensor)

BOOST_AUTO_TEST_CASE(shard_and_from_local_parts_say_how_they_lie) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t n = 2 * mesh.size();
  const Tensor whole = Tensor::randn({3, n}, 7);
  BOOST_TEST_MESSAGE("mesh " << mesh.str());
  const MeshTensor x = mesh.shard(whole, 1);
  const dist::MeshSharding s = x.sharding();
  BOOST_TEST(s.ranks == mesh.ranks());
  BOOST_TEST(s.devices.size() == static_cast<size_t>(mesh.size()));
  BOOST_TEST(s.axis.value_or(-1) == 1);
  BOOST_TEST(s.rank_bounds.size() == static_cast<size_t>(mesh.ranks() + 1));
  BOOST_TEST(s.rank_bounds.back() == n);
  BOOST_TEST(s.local.has_value() == (local.size() > 1));
  BOOST_TEST(s.str().find("across " + std::to_string(mesh.ranks()) + " ranks") != std::string::npos, s.str());
  check(x, whole, 1, "shard");
  const MeshTensor y = mesh.from_local_parts(block(whole, 1), 1);
  check(y, whole, 1, "from_local_parts");
  BOOST_TEST(mesh.as_replicated(whole).sharding().replicated());
}

BOOST_AUTO_TEST_CASE(ops_propagate_as_on_one_device) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t n = 2 * mesh.size();
  const Tensor a = Tensor::randn({n, 3}, 1), b = Tensor::randn({n, 3}, 2), c = Tensor::randn({3}, 3);
  const MeshTensor xa = mesh.shard(a, 0), xb = mesh.shard(b, 0), xc = mesh.as_replicated(c);
  const MeshTensor rb = mesh.as_replicated(b), tb = mesh.shard(b.transpose(0, 1).contiguous(), 1);
  check(xa + xb, a + b, 0, "split + split");
  check(xa * rb, a * b, 0, "split * replicated (cut to the block)");
  check(rb - xa, b - a, 0, "replicated - split");
  check(xa / (xc + 3.0).exp(), a / (c + 3.0).exp(), 0, "split / broadcast replicated");
  check(xa + tb.permute({1, 0}), a + b, 0, "split + permuted split");
  check(xa.tanh() * 2.0, a.tanh() * 2.0, 0, "tanh, scale");
  check((-xa).relu(), (-a).relu(), 0, "neg, relu");
  check(xa.map_elementwise([](const Tensor& t) { return t.abs().sqrt(); }), a.abs().sqrt(), 0, "map_elementwise");
  BOOST_CHECK_THROW(xa.map_elementwise([](const Tensor& t) { return t.sum(0); }), ravel::ShapeError);
  check(xa.permute({1, 0}), a.permute({1, 0}), 1, "permute");
  check(xa.reshape({n * 3}), a.reshape({n * 3}), 0, "reshape merging after the split");
  check(xa.reshape({n, 3, 1}), a.reshape({n, 3, 1}), 0, "reshape adding an axis");
  const auto moved = mesh.ranks() == 1 ? std::optional<int64_t>(0) : std::nullopt;  // one rank: no boundary
  check(xa.reshape({3, n}), a.reshape({3, n}), moved, "reshape moving the boundary: gathered");
  check(xa.sum(1), a.sum(1), 0, "sum over a kept axis");
  check(xa.sum(0), a.sum(0), std::nullopt, "sum over the split axis");
  check(xa.sum(), a.sum(), std::nullopt, "global sum");
  check(xa.mean(0, true), a.mean(0, true), std::nullopt, "mean, keepdim");
  check(xa.max(), a.max(), std::nullopt, "global max");
  check(xa.min(0), a.min(0), std::nullopt, "min over the split axis");
  check(xa.permute({1, 0}).max(1), a.max(0), std::nullopt, "max over the permuted split axis");
  check(xa.gathered(), a, std::nullopt, "gathered");
  const Tensor sq = Tensor::randn({n, n}, 10);
  check(mesh.shard(sq, 0).resharded(1), sq, 1, "resharded from split");
  check(mesh.as_replicated(sq).resharded(-2), sq, 0, "resharded from replicated");
  check(xa.resharded(1), a, 1, "resharded to an axis the ranks do not divide");
  check(xa.resharded(std::nullopt), a, std::nullopt, "resharded to replicated");
  BOOST_TEST(diff(xa.to(kOne), a) == 0.0);  // a gather moves values exactly
}

// Uneven blocks: a rank's block that its local devices do not divide (numpy.array_split there, as
// the local rules do), and an axis the ranks do not divide (numpy.array_split across them).
BOOST_AUTO_TEST_CASE(blocks_split_unevenly_over_local_devices) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t n = 3 * mesh.ranks();
  const Tensor a = Tensor::randn({n, 2}, 8), c = Tensor::randn({n, 2}, 9);
  const MeshTensor x = mesh.shard(a, 0);
  check(x, a, 0, "uneven local split");
  check(x * mesh.as_replicated(c) + 1.0, a * c + 1.0, 0, "times a replicated operand");
  check(x.sum(0), a.sum(0), std::nullopt, "sum over the split axis");
  check(x.max(), a.max(), std::nullopt, "global max");
  check(x.permute({1, 0}).matmul(mesh.shard(c, 0)), a.transpose(0, 1).matmul(c), std::nullopt, "row-parallel");

  const int64_t m = 2 * mesh.ranks() + 1;  // 3, 5, 9 rows: the first ranks take one more
  const Tensor u = Tensor::randn({m, 3}, 11), v = Tensor::randn({m, 3}, 12), w = Tensor::randn({m, 2}, 13);
  const MeshTensor xu = mesh.shard(u, 0);
  BOOST_TEST(xu.rank_bounds() == xu.sharding().rank_bounds);
  BOOST_TEST(xu.rank_bounds().back() == m);
  check(xu, u, 0, "uneven across ranks");
  check(xu + mesh.shard(v, 0), u + v, 0, "uneven + uneven");
  check(xu * mesh.as_replicated(v), u * v, 0, "uneven * replicated");
  check(xu.sum(0), u.sum(0), std::nullopt, "uneven sum over the split axis");
  check(xu.min(), u.min(), std::nullopt, "uneven global min");
  check(xu.permute({1, 0}).matmul(mesh.shard(w, 0)), u.transpose(0, 1).matmul(w), std::nullopt, "uneven K");
  const auto kept = mesh.ranks() == 1 ? std::optional<int64_t>(0) : std::nullopt;  // one rank: no boundary
  check(xu.reshape({m * 3}), u.reshape({m * 3}), kept, "uneven reshape: gathered");
  check(xu.gathered(), u, std::nullopt, "uneven gathered");
  BOOST_TEST(diff(xu.to(kOne), u) == 0.0);
  // Each rank's own block, as many rows as it likes: the bounds come from the exchange.
  const int64_t mine = 1 + mesh.rank() % 2;
  int64_t before = 0, total = 0;
  for (int r = 0; r < mesh.ranks(); ++r) total += 1 + r % 2, before += r < mesh.rank() ? 1 + r % 2 : 0;
  const Tensor whole = Tensor::randn({total, 2}, 14);
  const MeshTensor parts = mesh.from_local_parts(whole.slice(0, before, before + mine), 0);
  BOOST_TEST(parts.shape() == whole.shape());
  BOOST_TEST(diff(parts.to(kOne), whole) == 0.0);
  BOOST_TEST(diff((parts + mesh.shard(whole, 0)).to(kOne), whole * 2.0) < 1e-6);  // other bounds: resharded
  BOOST_TEST(diff(parts.sum(0).to(kOne), whole.sum(0)) < 1e-5);
  // A rank with an empty block: sums are fine, a max is the same ShapeError on every rank.
  if (mesh.ranks() > 1) {
    const Tensor few = Tensor::randn({mesh.ranks() - 1, 2}, 15);
    BOOST_TEST(diff(mesh.shard(few, 0).sum(0).to(kOne), few.sum(0)) < 1e-5);
    BOOST_CHECK_THROW(mesh.shard(few, 0).max(0), ravel::ShapeError);
  }
  // Gradients through uneven blocks (the padded all-gather included).
  auto ref = [&](const std::vector<Tensor>& p) {
    return (p[0] * v).tanh().sum() + (p[0].transpose(0, 1).matmul(w)).sum();
  };
  const auto [ref_value, ref_grad] = ravel::value_and_grad(ref, {u});
  const MeshTensor mv = mesh.shard(v, 0), mw = mesh.shard(w, 0);
  auto on_mesh = [&](const std::vector<Tensor>& p) {
    const MeshTensor q = xu.with_local(p[0]);
    return ((q * mv).tanh().sum() + q.gathered().permute({1, 0}).matmul(mw).sum()).local();
  };
  const auto [value, grad] = ravel::value_and_grad(on_mesh, {xu.local()});
  BOOST_TEST(diff(value, ref_value) < 1e-5);
  BOOST_TEST(diff(grad[0], block(ref_grad[0], 0)) < 1e-5);
}

BOOST_AUTO_TEST_CASE(matmuls_over_split_operands) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t k = 2 * mesh.size(), m = 2 * mesh.size();
  const Tensor x = Tensor::randn({m, k}, 4), w = Tensor::randn({k, 5}, 5), v = Tensor::randn({k, k}, 6);
  // Megatron's row-parallel layer: both split on K, partial sums combined across the ranks.
  check(mesh.shard(x, 1).matmul(mesh.shard(w, 0)), x.matmul(w), std::nullopt, "row-parallel");
  check(mesh.shard(x, 1).matmul(mesh.as_replicated(w)), x.matmul(w), std::nullopt, "K-split x replicated");
  check(mesh.as_replicated(x).matmul(mesh.shard(w, 0)), x.matmul(w), std::nullopt, "replicated x K-split");
  check(mesh.shard(x, 0).matmul(mesh.as_replicated(w)), x.matmul(w), 0, "batch-split");
  check(mesh.as_replicated(x).matmul(mesh.shard(v, 1)), x.matmul(v), 1, "column-parallel");
  // Split differently: resharded, never a silent wrong answer.
  check(mesh.shard(x, 0).matmul(mesh.shard(w, 0)), x.matmul(w), 0, "batch-split x K-split");
  check(mesh.shard(x, 0).matmul(mesh.shard(v, 1)), x.matmul(v), 0, "batch-split x N-split");
  check(mesh.shard(x, 1).matmul(mesh.shard(v, 1)), x.matmul(v), std::nullopt, "K-split x N-split");
}

// A small MLP in the global view: a batch split across the ranks (layer 0, batch-parallel with a
// replicated weight), a column-parallel layer and a row-parallel (K-split) layer, the squared
// error against a split target plus a global max. The gradients of the ONE global loss equal
// the single-device gradients: replicated parameters summed over devices and ranks, split ones
// as this rank's block (Note [Global-view derivatives]).
BOOST_AUTO_TEST_CASE(mlp_gradients_equal_one_device) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t batch = 2 * mesh.size(), in = 3, hidden = 2 * mesh.size(), out = 2;
  // name, whole value, split axis across the ranks (-1: replicated)
  const std::vector<std::pair<Tensor, int64_t>> whole = {
      {Tensor::randn({in, hidden}, 21) * 0.5, -1},      // w0
      {Tensor::randn({hidden}, 22) * 0.1, -1},          // c0
      {Tensor::randn({hidden, hidden}, 23) * 0.5, 1},   // w1: column-parallel
      {Tensor::randn({hidden}, 24) * 0.1, 0},           // b1: split like w1's columns
      {Tensor::randn({hidden, out}, 25) * 0.5, 0},      // w2: K-split, row-parallel
      {Tensor::randn({out}, 26) * 0.1, -1},             // b2
      {Tensor::randn({batch, in}, 27), 0},              // x: the batch split across the ranks
  };
  const Tensor y = Tensor::randn({batch, out}, 28);
  auto reference_loss = [&](const std::vector<Tensor>& p) {
    const Tensor h0 = (p[6].matmul(p[0]) + p[1]).tanh();
    const Tensor h1 = (h0.matmul(p[2]) + p[3]).tanh();
    const Tensor d = h1.matmul(p[4]) + p[5] - y;
    return (d * d).mean() + h0.max() * 0.1;
  };
  std::vector<Tensor> ref_in;
  for (const auto& [t, axis] : whole) ref_in.push_back(t);
  const auto [ref_loss, ref_grads] = ravel::value_and_grad(reference_loss, ref_in);

  std::vector<MeshTensor> placed;
  std::vector<Tensor> parts;
  for (const auto& [t, axis] : whole) {
    placed.push_back(axis < 0 ? mesh.as_replicated(mesh.replicate(t)) : mesh.shard(t, axis));
    parts.push_back(placed.back().local());
  }
  const MeshTensor my = mesh.shard(y, 0);
  auto mesh_loss = [&](const std::vector<Tensor>& q) {
    std::vector<MeshTensor> p;
    for (size_t i = 0; i < q.size(); ++i) p.push_back(placed[i].with_local(q[i]));
    const MeshTensor h0 = (p[6].matmul(p[0]) + p[1]).tanh();           // split by batch
    const MeshTensor h1 = (h0.gathered().matmul(p[2]) + p[3]).tanh();  // split by column
    const MeshTensor d = h1.matmul(p[4]) + p[5] - my;                  // row-parallel, then split by batch
    const MeshTensor loss = (d * d).mean() + h0.max() * 0.1;
    BOOST_TEST(loss.replicated());
    return loss.local();
  };
  const auto [loss, grads] = ravel::value_and_grad(mesh_loss, parts);
  BOOST_TEST(std::abs(loss.to(kOne).item<double>() - ref_loss.item<double>()) < 1e-5);
  for (size_t i = 0; i < whole.size(); ++i) {
    const int64_t axis = whole[i].second;
    const Tensor want = axis < 0 ? ref_grads[i] : block(ref_grads[i], axis);
    BOOST_TEST(diff(grads[i], want) < 1e-5, "gradient " << i << " (" << placed[i].sharding().str() << ") differs by "
                                                        << diff(grads[i], want));
  }
}

// Gradients of gradients: the rank steps' rules are made of the steps themselves, so the second
// derivative of the global loss (a gradient-norm penalty) equals one device's too.
BOOST_AUTO_TEST_CASE(second_order_equals_one_device) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t b = 2 * mesh.size(), k = 2 * mesh.size(), n = 3;
  const Tensor x = Tensor::randn({b, k}, 81), w = Tensor::randn({k, n}, 82) * 0.5, v = Tensor::randn({n}, 83);
  const Tensor z = Tensor::randn({b, n}, 84);
  // L = sum((tanh(x w) v)^2) + sum(tanh(z v)): row-parallel (combine), and v entered by z's rows.
  const auto [gw, gv] = [&] {
    const auto g = ravel::gradients(((x.matmul(w).tanh() * v) * (x.matmul(w).tanh() * v)).sum() + (z * v).tanh().sum(),
                                    {w, v});
    return std::pair{g[0], g[1]};
  }();
  const auto want = ravel::gradients((gw * gw).sum() + (gv * gv).sum(), {w, v});

  const MeshTensor mx = mesh.shard(x, 1), mw = mesh.shard(w, 0), mv = mesh.as_replicated(mesh.replicate(v));
  const MeshTensor mz = mesh.shard(z, 0);
  const Tensor wl = mw.local(), vl = mv.local();
  const MeshTensor y = mx.matmul(mw.with_local(wl)).tanh() * mv.with_local(vl);
  const MeshTensor loss = (y * y).sum() + (mz * mv.with_local(vl)).tanh().sum();
  const auto g = ravel::gradients(loss.local(), {wl, vl});
  const MeshTensor gw_mesh = mw.with_local(g[0]), gv_mesh = mv.with_local(g[1]);
  const MeshTensor penalty = (gw_mesh * gw_mesh).sum() + (gv_mesh * gv_mesh).sum();
  const auto got = ravel::gradients(penalty.local(), {wl, vl});
  BOOST_TEST(diff(g[0], block(gw, 0)) < 1e-5);
  BOOST_TEST(diff(g[1], gv) < 1e-5);
  // Relative: the penalty's derivatives are in the thousands here (f32 sums in another order).
  const double scale =
      1.0 + std::max(diff(want[0], Tensor::zeros_like(want[0])), diff(want[1], Tensor::zeros_like(want[1])));
  BOOST_TEST(diff(got[0], block(want[0], 0)) < 1e-6 * scale,
             "d/dw differs by " << diff(got[0], block(want[0], 0)) << " of " << scale);
  BOOST_TEST(diff(got[1], want[1]) < 1e-6 * scale, "d/dv differs by " << diff(got[1], want[1]) << " of " << scale);
}

// Ties across ranks: the cotangent is shared among every element holding the maximum, as on one
// device (rows 0 and 1 lie on rank 0's first device, the last row on the last rank). Not ties
// across the local devices of one rank: the local rules share those through the pairwise fold of
// the devices' partials, another subgradient (docs/distributed.md, "Known limits").
BOOST_AUTO_TEST_CASE(max_gradient_shares_ties_across_ranks) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t n = 2 * mesh.size();
  std::vector<float> v(static_cast<size_t>(n * 2), -1.0f);
  for (int64_t row : {int64_t{0}, int64_t{1}, mesh.ranks() > 1 ? n - 1 : int64_t{1}})
    v[static_cast<size_t>(row * 2 + 1)] = 2.0f;
  v[2] = -0.5f;  // a distinct value elsewhere
  const Tensor a = Tensor::from_vector(v, {n, 2});
  for (const bool over_split : {false, true}) {
    const Tensor weight = Tensor::arange(2).cast(ravel::DType::F32) + 1.0;
    auto ref = [&](const std::vector<Tensor>& p) { return over_split ? (p[0].max(0) * weight).sum() : p[0].max(); };
    const auto [ref_value, ref_grad] = ravel::value_and_grad(ref, {a});
    const MeshTensor placed = mesh.shard(a, 0);
    const MeshTensor weights = mesh.as_replicated(weight);
    auto on_mesh = [&](const std::vector<Tensor>& p) {
      const MeshTensor x = placed.with_local(p[0]);
      return (over_split ? (x.max(0) * weights).sum() : x.max()).local();
    };
    const auto [value, grad] = ravel::value_and_grad(on_mesh, {placed.local()});
    BOOST_TEST(diff(value, ref_value) < 1e-6);
    BOOST_TEST(diff(grad[0], block(ref_grad[0], 0)) < 1e-6, "over the split axis: " << over_split);
  }
}

BOOST_AUTO_TEST_CASE(a_jit_replays_mesh_ops) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int64_t k = 2 * mesh.size();
  const MeshTensor xs = mesh.shard(Tensor::zeros({3, k}), 1), ws = mesh.shard(Tensor::zeros({k, 2}), 0);
  ravel::Jit f([&](const std::vector<Tensor>& in) {
    const MeshTensor x = xs.with_local(in[0]), w = ws.with_local(in[1]);
    return std::vector<Tensor>{x.matmul(w).to(kOne), (x * x).sum().to(kOne), x.to(kOne)};
  });
  for (int call = 0; call < 3; ++call) {
    const Tensor x = Tensor::randn({3, k}, 40 + call), w = Tensor::randn({k, 2}, 50 + call);
    const auto got = f({mesh.shard(x, 1).local(), mesh.shard(w, 0).local()});
    BOOST_TEST(diff(got[0], x.matmul(w)) < 1e-5);
    BOOST_TEST(diff(got[1], (x * x).sum()) < 1e-5);
    BOOST_TEST(diff(got[2], x) == 0.0);
  }
  BOOST_TEST(f.captures() == 1);
  BOOST_TEST(f.replays() == 2);
  // A training step's gradients: the backward pass's rank steps are captured and replayed too.
  ravel::Jit step([&](const std::vector<Tensor>& in) {
    auto [loss, g] = ravel::value_and_grad(
        [&](const std::vector<Tensor>& q) {
          const MeshTensor y = xs.with_local(in[0]).matmul(ws.with_local(q[0])).tanh();
          return (y * y).sum().local();
        },
        {in[1]});
    return std::vector<Tensor>{loss.to(kOne), g[0]};
  });
  for (int call = 0; call < 3; ++call) {
    const Tensor x = Tensor::randn({3, k}, 60 + call), w = Tensor::randn({k, 2}, 70 + call);
    auto [ref_loss, ref_g] = ravel::value_and_grad(
        [&](const std::vector<Tensor>& q) { const Tensor y = x.matmul(q[0]).tanh(); return (y * y).sum(); }, {w});
    const auto got = step({mesh.shard(x, 1).local(), mesh.shard(w, 0).local()});
    BOOST_TEST(diff(got[0], ref_loss) < 1e-5);
    BOOST_TEST(diff(got[1], block(ref_g[0], 0)) < 1e-5);
  }
  BOOST_TEST(step.captures() == 1);
  BOOST_TEST(step.replays() == 2);
}

// Bad layouts are the same typed error on every rank (the decision depends only on what every
// rank knows), and the world stays usable: nothing hangs.
BOOST_AUTO_TEST_CASE(mismatches_are_typed_errors_on_every_rank) {
  const auto local = local_devices();
  dist::Mesh mesh(local);
  const int ranks = mesh.ranks(), me = mesh.rank();
  const int64_t n = 2 * mesh.size();
  const MeshTensor a = mesh.shard(Tensor::randn({n, 3}, 1), 0);
  // Dtypes or shapes across ranks: every rank sees every rank's part.
  if (ranks > 1) {
    BOOST_CHECK_THROW(mesh.from_local_parts(Tensor::zeros({2, 3}, me == 1 ? ravel::DType::F64 : ravel::DType::F32), 0),
                      ravel::DTypeError);
    BOOST_CHECK_THROW(mesh.from_local_parts(Tensor::zeros({2, me == 1 ? 4 : 3}), 0), ravel::ShapeError);
  }
  BOOST_CHECK_THROW(a + mesh.as_replicated(Tensor::zeros({4})), ravel::ShapeError);
  BOOST_CHECK_THROW(a.matmul(mesh.as_replicated(Tensor::zeros({4, 2}))), ravel::ShapeError);
  BOOST_CHECK_THROW(a.with_local(Tensor::zeros({n + 1, 3})), ravel::ShapeError);
  BOOST_CHECK_THROW(a.sum(2), ravel::IndexError);
  BOOST_CHECK_THROW(a.permute({0}), ravel::ShapeError);
  if (local.size() > 1) {
    dist::Mesh other(std::vector<Device>{local[0]});
    BOOST_CHECK_THROW(a + other.shard(Tensor::randn({n, 3}, 1), 0), ravel::ValueError);
  }
  BOOST_TEST(dist::all_reduce(Tensor::full({1}, 1.0)).item<float>() == static_cast<float>(ranks));
}

BOOST_AUTO_TEST_SUITE_END()
