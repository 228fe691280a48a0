// Every op on sharded tensors against the same op on one device (the single-device results are
// themselves checked against the reference interpreter by tests/core), for meshes of 1, 2, 3, 4
// and 8 devices, split along each axis, with sizes that do and do not divide. Also which layout
// the result has, where the propagation rules promise one.
#include <functional>

#include "sharding_common.hpp"

using namespace stest;

namespace {

using Op = std::function<Tensor(const Tensor&)>;

struct UnaryRow {
  std::string name;
  Op op;
};

// Runs op on x sharded over every mesh and axis, compares with op(x) on one device.
void check_unary(const UnaryRow& row, const Tensor& x, double tol = 1e-5) {
  const Tensor want = row.op(x);
  for (size_t n : kMeshSizes)
    for (int64_t axis = 0; axis < x.ndim(); ++axis)
      BOOST_TEST_CONTEXT(row.name << " on " << n << " devices, split axis " << axis) {
        Tensor got = row.op(x.shard(mesh(n), axis));
        if (ravel::is_float(want.dtype())) check_close(got, want, tol);
        else check_exact(got, want);
      }
}

}  // namespace

BOOST_AUTO_TEST_CASE(elementwise_ops_run_part_by_part) {
  Tensor x = data({5, 6}, 1), y = data({5, 6}, 2);
  const std::vector<UnaryRow> rows = {
      {"exp", [](const Tensor& t) { return t.exp(); }},
      {"tanh", [](const Tensor& t) { return t.tanh(); }},
      {"relu", [](const Tensor& t) { return t.relu(); }},
      {"x*2+1", [](const Tensor& t) { return t * 2.0 + 1.0; }},
      {"x < 0.5", [](const Tensor& t) { return t < 0.5; }},
      {"cast i32", [](const Tensor& t) { return (t * 10.0).cast(DType::I32); }},
      {"where", [](const Tensor& t) { return Tensor::where(t > 0.0, t, t * -3.0); }},
      {"x + y (one device)", [&](const Tensor& t) { return t + y; }},
      {"x * row (broadcast)", [&](const Tensor& t) { return t * y.slice(0, 0, 1); }},
      {"x - column (broadcast)", [&](const Tensor& t) { return t - y.slice(1, 2, 3); }},
  };
  for (const auto& r : rows) check_unary(r, x);
  // The layout: an elementwise result is split like its split operand.
  Tensor s = x.shard(mesh(3), 1);
  BOOST_TEST(*(s.exp() + y).sharding() == s.sharding().value());
  BOOST_TEST(*(y + s).sharding() == s.sharding().value());
}

BOOST_AUTO_TEST_CASE(operands_split_differently_are_resharded_not_mixed_up) {
  Tensor x = data({6, 4}, 1), y = data({6, 4}, 2);
  const Tensor want = x * y + x;
  for (size_t n : {2u, 3u, 4u}) {
    Tensor a = x.shard(mesh(n), 0), b = y.shard(mesh(n), 1);
    check_close(a * b + a, want);
    check_close(b * a + a, want);
    check_close(a * y.replicate(mesh(n)) + x, want);
    check_close(a * y.shard(mesh(2), 0) + x, want);  // another mesh
    Tensor bounded = x.pad({{0, 3}, {0, 0}}).shard(mesh(n), 0).shrink({{0, 6}, {0, 4}});  // other bounds
    check_close(bounded * y.shard(mesh(n), 0) + x, want);
  }
}

BOOST_AUTO_TEST_CASE(movement_ops_follow_or_regather_the_split_axis) {
  Tensor x = data({4, 6, 3}, 7);
  const std::vector<UnaryRow> rows = {
      {"permute", [](const Tensor& t) { return t.permute({2, 0, 1}); }},
      {"transpose", [](const Tensor& t) { return t.transpose(0, 1).contiguous(); }},
      {"reshape merge", [](const Tensor& t) { return t.reshape({4, 18}); }},
      {"reshape split", [](const Tensor& t) { return t.reshape({2, 2, 3, 2, 3}); }},
      {"reshape flat", [](const Tensor& t) { return t.reshape({72}); }},
      {"reshape scrambled", [](const Tensor& t) { return t.reshape({9, 8}); }},
      {"expand", [](const Tensor& t) { return t.reshape({4, 6, 3, 1}).expand({2, 4, 6, 3, 5}); }},
      {"pad", [](const Tensor& t) { return t.pad({{1, 2}, {0, 3}, {2, 0}}); }},
      {"pad value", [](const Tensor& t) { return t.pad({{1, 2}, {0, 3}, {2, 0}}, -7.0); }},
      {"shrink", [](const Tensor& t) { return t.shrink({{1, 3}, {2, 5}, {0, 2}}); }},
      {"flip", [](const Tensor& t) { return t.flip(); }},
      {"slice step", [](const Tensor& t) { return t.slice({ravel::Slice{{}, {}, 2}, ravel::Slice{1, {}, 2}}); }},
      {"select", [](const Tensor& t) { return t.select(1, 4); }},
      {"concatenate", [](const Tensor& t) { return Tensor::concatenate({t, t * 2.0}, 1); }},
  };
  for (const auto& r : rows) check_unary(r, x);
  // Rules that keep the split: permute follows it, a reshape around it keeps it.
  Tensor s = x.shard(mesh(2), 1);
  BOOST_TEST(s.permute({2, 0, 1}).sharding().value().axis.value() == 2);
  BOOST_TEST(s.reshape({4, 6, 3, 1}).sharding().value().axis.value() == 1);
  BOOST_TEST(s.reshape({4, 2, 3, 3}).sharding().value().axis.value() == 1);  // 6 -> (2, 3): boundary at 3 survives
  BOOST_TEST(x.shard(mesh(2), 0).reshape({24, 3}).sharding().value().axis.value() == 0);
  BOOST_TEST(s.flip(1).sharding().value().replicated());  // flipping the split axis gathers
}

BOOST_AUTO_TEST_CASE(reductions_over_the_split_axis_combine_across_devices) {
  Tensor x = data({5, 7}, 4);
  const std::vector<UnaryRow> rows = {
      {"sum all", [](const Tensor& t) { return t.sum(); }},
      {"sum 0", [](const Tensor& t) { return t.sum(0); }},
      {"sum 1 keepdim", [](const Tensor& t) { return t.sum(1, true); }},
      {"max 0", [](const Tensor& t) { return t.max(0); }},
      {"min 1", [](const Tensor& t) { return t.min(1); }},
      {"prod 0", [](const Tensor& t) { return (t * 0.5 + 1.0).prod(0); }},
      {"mean", [](const Tensor& t) { return t.mean(); }},
      {"var 0", [](const Tensor& t) { return t.var(0); }},
      {"logsumexp 1", [](const Tensor& t) { return t.logsumexp(1); }},
      {"softmax 0", [](const Tensor& t) { return t.softmax(0); }},
      {"log_softmax 1", [](const Tensor& t) { return t.log_softmax(1); }},
      {"argmax 0", [](const Tensor& t) { return t.argmax(0); }},
      {"argmin flat", [](const Tensor& t) { return t.argmin(); }},
      {"cumsum 0", [](const Tensor& t) { return t.cumsum(0); }},
      {"int sum", [](const Tensor& t) { return (t * 10.0).cast(DType::I32).sum(0); }},
      {"bool any", [](const Tensor& t) { return (t > 1.5).max(1); }},
  };
  for (const auto& r : rows) check_unary(r, x);
  // A sum or max over the split axis leaves partial results (Note [Partial results]); one over
  // another axis keeps the split.
  Tensor s = x.shard(mesh(3), 0);
  BOOST_TEST((s.sum(0).sharding().value().partial == ravel::CollectiveOp::Sum));
  BOOST_TEST((s.max(0).sharding().value().partial == ravel::CollectiveOp::Max));
  BOOST_TEST(s.sum(1).sharding().value().axis.value() == 0);
  // Replicas of a combined sum are bitwise equal (every device adds in the same order).
  std::vector<Tensor> reps = s.sum(0).replicate(mesh(3)).shards();
  BOOST_TEST(s.sum(0).replicate(mesh(3)).sharding().value().replicated());
  for (const auto& r : reps) check_exact(r, reps[0].to(r.device()));
  // Empty parts (2 rows over 3 devices) contribute nothing.
  Tensor small = data({2, 3}, 1);
  check_close(small.shard(mesh(3), 0).max(0), small.max(0));
  check_close(small.shard(mesh(3), 0).sum(), small.sum());
}

BOOST_AUTO_TEST_CASE(matmul_data_and_tensor_parallel) {
  Tensor x = data({8, 6}, 1), w = data({6, 5}, 2), b = data({5}, 3);
  const Tensor want = (x.matmul(w) + b).tanh();
  for (size_t n : {2u, 3u, 4u, 8u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      // Data parallel: batch split, weights replicated: stays split, no gather.
      Tensor dp = (x.shard(mesh(n), 0).matmul(w.replicate(mesh(n))) + b).tanh();
      BOOST_TEST(dp.sharding().value().axis.value() == 0);
      check_close(dp, want);
      // Tensor parallel (Megatron's row-parallel layer): the contraction axis split on both
      // sides gives partial sums, combined where they are consumed (here: an all-reduce).
      Tensor tp = x.shard(mesh(n), 1).matmul(w.shard(mesh(n), 0));
      // (8 devices: k = 6 leaves two parts empty, which have no partial sums: combined at once.)
      if (n <= 6) BOOST_TEST((tp.sharding().value().partial == ravel::CollectiveOp::Sum));
      else BOOST_TEST(tp.sharding().value().replicated());
      BOOST_TEST((tp + b).sharding().value().replicated());
      check_close((tp + b).tanh(), want);
      // Column parallel: weights split on the output axis.
      Tensor cp = x.replicate(mesh(n)).matmul(w.shard(mesh(n), 1));
      BOOST_TEST(cp.sharding().value().axis.value() == 1);
      check_close((cp + b).tanh(), want);
      // Batched matmul with the batch split.
      Tensor bx = data({4, 3, 6}, 5);
      check_close(bx.shard(mesh(n), 0).matmul(w), bx.matmul(w));
    }
  }
}

BOOST_AUTO_TEST_CASE(nn_layers_on_sharded_batches) {
  ravel::nn::MLP mlp({6, 8, 3}, ravel::nn::Activation::Tanh, 11);
  Tensor x = data({10, 6}, 2);
  Tensor idx = Tensor::from_vector<int64_t>({0, 2, 1, 1, 0, 2, 2, 1, 0, 0}, {10});
  const Tensor want = ravel::nn::cross_entropy(mlp(x), idx);
  for (size_t n : {2u, 3u, 4u})
    check_close(ravel::nn::cross_entropy(mlp(x.shard(mesh(n), 0)), idx.shard(mesh(n), 0)), want);
}
