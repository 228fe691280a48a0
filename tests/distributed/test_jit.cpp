// Collectives inside a ravel::Jit (Note [Host operations] in core/src/runtime/host_op.hpp): a
// capture records them between its kernels and every replay communicates again, with the new
// values, and still checks the ranks' arguments. Each rank's data is a known function of its rank
// and of the call number, so every rank computes the expected results locally.
#include "ravel/distributed.hpp"
#include "ravel/jit.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

namespace dist = ravel::distributed;
namespace nn = ravel::nn;
using ravel::DType;
using ravel::Shape;
using ravel::Tensor;

namespace {

// Rank r's input at call c: [4, 3] of small integers (exact in f32 after the sums).
std::vector<float> values(int r, int c) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = float((i * 3 + r * 5 + c * 7) % 11 - 5);
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(distributed_jit)

BOOST_AUTO_TEST_CASE(a_jit_replays_every_collective_with_the_new_values) {
  const int size = dist::world_size(), me = dist::rank();
  const int root = size - 1;
  ravel::Jit f([&](const std::vector<Tensor>& in) {
    Tensor x = in[0] * 2.0 + 1.0;  // a kernel before the collectives
    Tensor sum = dist::all_reduce(x);
    Tensor max = dist::all_reduce(x, dist::ReduceOp::Max);
    Tensor gathered = dist::all_gather(in[0]);
    Tensor from_root = dist::broadcast(in[0], root);
    Tensor scattered = dist::reduce_scatter(in[0].reshape({12}).slice(0, 0, 12 / size * size));
    return std::vector<Tensor>{sum * 0.5, max, gathered, from_root, scattered};  // and a kernel after
  });
  for (int c = 0; c < 4; ++c) {
    const std::vector<Tensor> out = f({Tensor::from_vector(values(me, c), {4, 3})});
    std::vector<float> sum(12, 0), max(12, -1e9f), gathered, scattered(12 / size, 0);
    for (int r = 0; r < size; ++r) {
      const std::vector<float> v = values(r, c);
      for (int i = 0; i < 12; ++i) sum[i] += (v[i] * 2 + 1) * 0.5f, max[i] = std::max(max[i], v[i] * 2 + 1);
      gathered.insert(gathered.end(), v.begin(), v.end());
      for (int i = 0; i < 12 / size; ++i) scattered[i] += v[me * (12 / size) + i];
    }
    BOOST_TEST(out[0].to_vector<float>() == sum, boost::test_tools::per_element());
    BOOST_TEST(out[1].to_vector<float>() == max, boost::test_tools::per_element());
    BOOST_TEST(out[2].shape() == (Shape{4 * size, 3}));
    BOOST_TEST(out[2].to_vector<float>() == gathered, boost::test_tools::per_element());
    BOOST_TEST(out[3].to_vector<float>() == values(root, c), boost::test_tools::per_element());
    BOOST_TEST(out[4].to_vector<float>() == scattered, boost::test_tools::per_element());
  }
  BOOST_TEST(f.captures() == 1);
  BOOST_TEST(f.replays() == 3);
}

BOOST_AUTO_TEST_CASE(a_replayed_collective_still_checks_the_ranks_arguments) {
  const int size = dist::world_size(), me = dist::rank();
  if (size == 1) return;
  ravel::Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{dist::all_reduce(in[0])}; });
  BOOST_TEST(f({Tensor::ones({4})})[0].to_vector<float>() == std::vector<float>(4, float(size)),
             boost::test_tools::per_element());
  // The last rank calls with another shape (a new capture) while the others replay: the replay's
  // argument check finds it, and every rank throws ShapeError instead of exchanging 4 against 5.
  BOOST_CHECK_THROW(f({Tensor::ones({me == size - 1 ? 5 : 4})}), ravel::ShapeError);
  BOOST_TEST(f.replays() == 0);  // neither the failed replay nor the failed capture counts
  // Nothing was sent: the world and the capture are still usable.
  BOOST_TEST(f({Tensor::full({4}, 2.0)})[0].to_vector<float>() == std::vector<float>(4, 2.0f * size),
             boost::test_tools::per_element());
  BOOST_TEST(f.captures() == 1);
  BOOST_TEST(f.replays() == 1);
}

BOOST_AUTO_TEST_CASE(a_whole_data_parallel_step_in_one_jit_equals_the_single_process_run) {
  const int size = dist::world_size(), me = dist::rank();
  constexpr int64_t kBatch = 8;
  const int64_t lo = kBatch * me / size, hi = kBatch * (me + 1) / size;
  for (size_t bucket_bytes : {size_t{25} << 20, size_t{64}}) {
    nn::Linear ref_a(4, 8, 5), ref_b(8, 3, 6), a(4, 8, 5 + me), b(8, 3, 6 + me);  // ranks differ until the broadcast
    std::vector<Tensor*> ref_params{&ref_a.weight, &ref_a.bias, &ref_b.weight, &ref_b.bias};
    std::vector<Tensor*> params{&a.weight, &a.bias, &b.weight, &b.bias};
    dist::DataParallel ddp(params, dist::DataParallel::Config{bucket_bytes});
    auto loss_of = [](nn::Linear& l1, nn::Linear& l2, const Tensor& x, const Tensor& y) {
      return nn::cross_entropy(l2(l1(x).tanh()), y);
    };
    ravel::Jit step([&](const std::vector<Tensor>& in) {
      for (Tensor* p : params) p->zero_grad();
      Tensor loss = loss_of(a, b, in[0], in[1]) * (double(hi - lo) / kBatch);
      loss.backward();
      std::vector<Tensor> g{loss.detach()};
      for (Tensor* p : params) g.push_back(p->grad());
      for (Tensor* p : params) p->zero_grad();
      const std::vector<Tensor> summed = ddp.reduce_gradients(g, 1.0);
      ravel::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) params[i]->assign(*params[i] - summed[i + 1] * 0.1);
      return std::vector<Tensor>{summed[0]};
    }, params);
    for (int s = 0; s < 5; ++s) {
      Tensor x = Tensor::randn({kBatch, 4}, 300 + s);
      std::vector<int64_t> yv(kBatch);
      for (int64_t i = 0; i < kBatch; ++i) yv[i] = (i * 5 + s) % 3;
      Tensor y = Tensor::from_vector(yv, {kBatch});
      for (Tensor* p : ref_params) p->zero_grad();
      Tensor ref_loss = loss_of(ref_a, ref_b, x, y);
      ref_loss.backward();
      {
        ravel::NoGradGuard no_grad;
        for (Tensor* p : ref_params) p->assign(*p - p->grad() * 0.1);
      }
      const double got = step({x.slice(0, lo, hi).contiguous(), y.slice(0, lo, hi).contiguous()})[0].item<double>();
      BOOST_TEST(got == ref_loss.item<double>(), boost::test_tools::tolerance(1e-5));
    }
    BOOST_TEST(step.captures() == 1);
    BOOST_TEST(step.replays() == 4);
    double worst = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      auto va = params[i]->to_vector<double>(), vb = ref_params[i]->to_vector<double>();
      for (size_t k = 0; k < va.size(); ++k) worst = std::max(worst, std::abs(va[k] - vb[k]));
    }
    BOOST_TEST(worst < 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(ranks_with_different_bucket_sizes_are_a_typed_error) {
  const int size = dist::world_size(), me = dist::rank();
  if (size == 1) return;
  nn::Linear l(4, 8, 1);
  dist::DataParallel ddp({&l.weight, &l.bias}, dist::DataParallel::Config{me == 0 ? size_t{16} : size_t{25} << 20});
  // The same tensors, but rank 0 cuts them into more buckets: the counts would not match.
  BOOST_CHECK_EXCEPTION(ddp.reduce_gradients({Tensor::ones({8, 4}), Tensor::ones({8})}, 1.0), ravel::ValueError,
                        [](const ravel::ValueError& e) { return std::string(e.what()).find("bucket") != std::string::npos; });
  dist::barrier();
}

BOOST_AUTO_TEST_SUITE_END()
