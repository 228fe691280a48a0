// DataParallel: training split over the ranks equals the single-process run on the global
// batch. Every rank also runs the single-process reference itself (it has all the data), so the
// comparison needs no communication and no stored results.
#include <string>

#include "ravel/distributed.hpp"
#include "ravel/jit.hpp"
#include "ravel/ravel.hpp"
#include "runtime/capture.hpp"
#include "test_support.hpp"

namespace dist = ravel::distributed;
namespace nn = ravel::nn;
using ravel::Tensor;

namespace {

constexpr int64_t kBatch = 8, kIn = 4, kHidden = 8, kOut = 3;
constexpr double kLr = 0.1;

struct Mlp {
  nn::Linear a, b;
  explicit Mlp(uint64_t seed) : a(kIn, kHidden, seed), b(kHidden, kOut, seed + 1) {}
  Tensor operator()(const Tensor& x) const { return b(a(x).tanh()); }
  std::vector<Tensor*> parameters() { return {&a.weight, &a.bias, &b.weight, &b.bias}; }
};

Tensor batch_x(int step) { return Tensor::randn({kBatch, kIn}, 100 + step); }
Tensor batch_y(int step) {
  std::vector<int64_t> y(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) y[i] = (i * 5 + step) % kOut;
  return Tensor::from_vector(y, {kBatch});
}

// One SGD step of `m` on rows [lo, hi) of the global batch; the loss is scaled by the shard's
// share of the batch, so the sum of the ranks' gradients is the global batch's mean gradient.
std::vector<Tensor> shard_gradients(Mlp& m, int step, int64_t lo, int64_t hi) {
  for (Tensor* p : m.parameters()) p->zero_grad();
  Tensor x = batch_x(step).slice(0, lo, hi), y = batch_y(step).slice(0, lo, hi);
  Tensor loss = nn::cross_entropy(m(x), y) * (double(hi - lo) / kBatch);
  loss.backward();
  std::vector<Tensor> g;
  for (Tensor* p : m.parameters()) g.push_back(p->grad());
  return g;
}

void sgd_update(Mlp& m, const std::vector<Tensor>& grads) {
  ravel::NoGradGuard no_grad;
  auto ps = m.parameters();
  for (size_t i = 0; i < ps.size(); ++i) ps[i]->assign(*ps[i] - grads[i] * kLr);
}

double max_difference(Mlp& a, Mlp& b) {
  double worst = 0;
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    auto va = pa[i]->to_vector<double>(), vb = pb[i]->to_vector<double>();
    for (size_t k = 0; k < va.size(); ++k) worst = std::max(worst, std::abs(va[k] - vb[k]));
  }
  return worst;
}

// This rank's lazy gradients (ravel::gradients: nothing realized yet) of its shard's scaled loss.
std::vector<Tensor> lazy_shard_gradients(Mlp& m, int step, int64_t lo, int64_t hi) {
  Tensor x = batch_x(step).slice(0, lo, hi), y = batch_y(step).slice(0, lo, hi);
  Tensor loss = nn::cross_entropy(m(x), y) * (double(hi - lo) / kBatch);
  std::vector<Tensor> ps;
  for (Tensor* p : m.parameters()) ps.push_back(*p);
  return ravel::gradients(loss, ps);
}

// Writes down, in order, what a realization runs: 'K' a kernel, 'B' a host operation's begin,
// 'E' its end.
class StepOrder final : public ravel::detail::KernelRecorder {
 public:
  void kernel_ran(const std::shared_ptr<const ravel::detail::Recipe>&, const ravel::detail::CachedKernel&,
                  const ravel::detail::BufferOf&, const ravel::detail::Node&) override {
    order += 'K';
  }
  void host_op_begun(const std::shared_ptr<ravel::detail::HostOp>&,
                     const std::vector<std::shared_ptr<ravel::detail::DeviceBuffer>>&) override {
    order += 'B';
  }
  void host_op_ended(const std::shared_ptr<ravel::detail::HostOp>&,
                     const std::vector<std::shared_ptr<ravel::detail::DeviceBuffer>>&,
                     const std::vector<ravel::Device>&) override {
    order += 'E';
  }
  std::string order;
};


// Marks every parameter of the models as needing .grad() (loss.backward() fills it).
void track_gradients(std::initializer_list<Mlp*> models) {
  for (Mlp* m : models)
    for (Tensor* p : m->parameters()) p->requires_grad_();
}

// The single-process reference's SGD step on the whole batch, then this rank's mean loss on its
// shard of the same batch (the model's gradients zeroed first): DDP averages the shards' gradients.
Tensor reference_step_then_shard_loss(Mlp& reference, nn::SGD& ref_opt, Mlp& model, nn::SGD& opt, int step) {
  const int64_t n = kBatch / dist::world_size(), me = dist::rank();
  ref_opt.zero_grad();
  nn::cross_entropy(reference(batch_x(step)), batch_y(step)).backward();
  ref_opt.step();
  opt.zero_grad();
  return nn::cross_entropy(model(batch_x(step).slice(0, me * n, (me + 1) * n)), batch_y(step).slice(0, me * n, (me + 1) * n));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(distributed_data_parallel)

// Note [Gradient buckets]: with lazy gradients the buckets' all-reduces begin between the kernels
// of the one realization of the backward pass, the first right after the last layer's gradients
// are made, long before the last kernel; and the training still equals the single-process run.
BOOST_AUTO_TEST_CASE(bucket_all_reduces_begin_while_the_backward_pass_runs) {
  const int size = dist::world_size(), me = dist::rank();
  Mlp reference(5), model(5 + me);
  dist::DataParallel ddp(model.parameters(), dist::DataParallel::Config{64});  // about a bucket per tensor
  const int64_t lo = kBatch * me / size, hi = kBatch * (me + 1) / size;
  for (int step = 0; step < 4; ++step) {
    sgd_update(reference, shard_gradients(reference, step, 0, kBatch));
    StepOrder rec;
    std::vector<Tensor> g;
    {
      ravel::detail::RecordingScope scope(&rec);
      g = ddp.reduce_gradients(lazy_shard_gradients(model, step, lo, hi), 1.0);
    }
    BOOST_TEST_MESSAGE("rank " << me << " step " << step << ": " << rec.order);
    if (size > 1) {
      const size_t last_kernel = rec.order.rfind('K'), first_begin = rec.order.find('B');
      BOOST_TEST(ddp.buckets_last_call() >= 3);
      BOOST_TEST(std::count(rec.order.begin(), rec.order.end(), 'B') == ddp.buckets_last_call());
      BOOST_TEST(first_begin != std::string::npos);
      BOOST_TEST(first_begin < last_kernel);  // begun while kernels of the backward pass remain
      // Every bucket but the last (the first layer's, made by the last kernels) begins before the
      // last kernel, each after at least one kernel more than the one before it.
      size_t before_last = 0;
      for (size_t i = 0; i < last_kernel; ++i) before_last += rec.order[i] == 'B';
      BOOST_TEST(before_last >= static_cast<size_t>(ddp.buckets_last_call()) - 1);
      BOOST_TEST(rec.order.find("BB") == std::string::npos);
      // No wait in the backward pass: each comes at its bucket's first reader (the update below).
      BOOST_TEST(rec.order.find('E') == std::string::npos);
    }
    sgd_update(model, g);
  }
  BOOST_TEST(max_difference(model, reference) < 1e-5);
}

// The same step inside a Jit: the capture records the begins between the kernels, and every replay
// gives the gradients bit for bit as the eager call does on the same parameters and data.
BOOST_AUTO_TEST_CASE(a_jit_replays_the_overlapped_step_bit_for_bit) {
  const int size = dist::world_size(), me = dist::rank();
  Mlp model(9);
  dist::DataParallel ddp(model.parameters(), dist::DataParallel::Config{64});
  const int64_t lo = kBatch * me / size, hi = kBatch * (me + 1) / size;
  ravel::Jit step([&](const std::vector<Tensor>& in) {
    Tensor loss = nn::cross_entropy(model(in[0]), in[1]) * (double(hi - lo) / kBatch);
    std::vector<Tensor> ps;
    for (Tensor* p : model.parameters()) ps.push_back(*p);
    return ddp.reduce_gradients(ravel::gradients(loss, ps), 1.0);
  });
  for (int s = 0; s < 4; ++s) {
    Tensor x = batch_x(s).slice(0, lo, hi).contiguous().realize(), y = batch_y(s).slice(0, lo, hi).contiguous().realize();
    const std::vector<Tensor> jitted = step({x, y});
    const std::vector<Tensor> eager = ddp.reduce_gradients(lazy_shard_gradients(model, s, lo, hi), 1.0);
    BOOST_REQUIRE(jitted.size() == eager.size());
    for (size_t i = 0; i < eager.size(); ++i)
      BOOST_TEST(jitted[i].to_vector<float>() == eager[i].to_vector<float>(), boost::test_tools::per_element());
  }
  BOOST_TEST(step.captures() == 1);
  BOOST_TEST(step.replays() == 3);
}

BOOST_AUTO_TEST_CASE(data_parallel_training_equals_the_single_process_run) {
  const int size = dist::world_size(), me = dist::rank();
  for (size_t bucket_bytes : {size_t{25} << 20, size_t{64}}) {  // one bucket; one per tensor or so
    Mlp reference(7);
    Mlp model(7 + 10 * me);  // different on every rank until DataParallel broadcasts rank 0's
    dist::DataParallel ddp(model.parameters(), dist::DataParallel::Config{bucket_bytes});
    BOOST_TEST(max_difference(model, reference) == 0.0);
    const int64_t lo = kBatch * me / size, hi = kBatch * (me + 1) / size;
    for (int step = 0; step < 5; ++step) {
      sgd_update(reference, shard_gradients(reference, step, 0, kBatch));
      sgd_update(model, ddp.reduce_gradients(shard_gradients(model, step, lo, hi), 1.0));
    }
    BOOST_TEST_MESSAGE("bucket_bytes " << bucket_bytes << ": " << ddp.buckets_last_call() << " buckets");
    if (size > 1) BOOST_TEST(ddp.buckets_last_call() >= (bucket_bytes == 64 ? 3 : 1));
    BOOST_TEST(max_difference(model, reference) < 1e-5);
  }
}

// With many buckets, each bucket's wait comes at the optimizer's update that reads it (Note
// [Results ended at their first reader]): update kernels run between the waits.
BOOST_AUTO_TEST_CASE(average_gradients_feeds_an_nn_optimizer) {
  const int size = dist::world_size(), me = dist::rank();
  if (kBatch % size != 0) return;
  for (size_t bucket_bytes : {size_t{25} << 20, size_t{64}}) {
    Mlp reference(3), model(3);
    dist::DataParallel ddp(model.parameters(), dist::DataParallel::Config{bucket_bytes});
    nn::SGD ref_opt(reference.parameters(), kLr), opt(model.parameters(), kLr);
    for (int step = 0; step < 3; ++step) {
      reference_step_then_shard_loss(reference, ref_opt, model, opt, step).backward();
      StepOrder rec;
      {
        ravel::detail::RecordingScope scope(&rec);
        ddp.average_gradients();
        opt.step();
      }
      if (size > 1 && bucket_bytes == 64) {
        BOOST_TEST_MESSAGE("average_gradients, rank " << me << ": " << rec.order);
        const std::string& o = rec.order;
        BOOST_TEST(std::count(o.begin(), o.end(), 'E') == ddp.buckets_last_call());
        BOOST_TEST(std::count(o.begin() + o.find('E'), o.begin() + o.rfind('E'), 'K') >= 1);
      }
    }
    BOOST_TEST(max_difference(model, reference) < 1e-5);
  }
}

// DataParallel::backward, DDP's hooked loss.backward(): averaged gradients accumulated into
// grad() for an nn optimizer, the buckets begun during the backward pass.
BOOST_AUTO_TEST_CASE(backward_averages_into_grad_while_the_backward_pass_runs) {
  const int size = dist::world_size();
  if (kBatch % size != 0) return;
  Mlp reference(4), model(4);
  track_gradients({&reference, &model});
  dist::DataParallel ddp(model.parameters(), dist::DataParallel::Config{64});
  nn::SGD ref_opt(reference.parameters(), kLr), opt(model.parameters(), kLr);
  for (int step = 0; step < 3; ++step) {
    Tensor loss = reference_step_then_shard_loss(reference, ref_opt, model, opt, step);
    StepOrder rec;
    {
      ravel::detail::RecordingScope scope(&rec);
      ddp.backward(loss);
    }
    if (size > 1) {
      const std::string reduce = rec.order.substr(0, rec.order.find('E'));  // before the first wait
      BOOST_TEST(reduce.find('B') < reduce.rfind('K'));  // a bucket begun before the last backward kernel
    }
    opt.step();
  }
  BOOST_TEST(max_difference(model, reference) < 1e-5);
}

// Note [Results ended at their first reader]: DataParallel::backward leaves every bucket's wait
// to the first reader of its result, so nn::SGD's one realization of the updates (the last
// parameter's first: the first bucket's) runs update kernels before later buckets' waits; the
// training still equals the single-process run.
BOOST_AUTO_TEST_CASE(each_bucket_is_waited_for_at_the_update_that_reads_it) {
  const int size = dist::world_size(), me = dist::rank();
  if (kBatch % size != 0) return;
  Mlp reference(6), model(6);
  track_gradients({&reference, &model});
  dist::DataParallel ddp(model.parameters(), dist::DataParallel::Config{64});
  nn::SGD ref_opt(reference.parameters(), kLr), opt(model.parameters(), kLr);
  for (int step = 0; step < 3; ++step) {
    Tensor loss = reference_step_then_shard_loss(reference, ref_opt, model, opt, step);
    StepOrder rec;
    size_t backward_end = 0;
    {
      ravel::detail::RecordingScope scope(&rec);
      ddp.backward(loss);
      backward_end = rec.order.size();
      opt.step();
    }
    BOOST_TEST_MESSAGE("rank " << me << " step " << step << ": " << rec.order.substr(0, backward_end) << " | "
                               << rec.order.substr(backward_end));
    if (size > 1) {
      const std::string update = rec.order.substr(backward_end);
      BOOST_TEST(rec.order.substr(0, backward_end).find('E') == std::string::npos);  // no wait in backward
      BOOST_TEST(std::count(update.begin(), update.end(), 'E') == ddp.buckets_last_call());
      BOOST_TEST(ddp.buckets_last_call() >= 3);
      // An update kernel between the first wait and the last: a bucket's update ran while a later
      // bucket was still in flight.
      BOOST_TEST(std::count(update.begin() + update.find('E'), update.begin() + update.rfind('E'), 'K') >= 1);
    }
  }
  BOOST_TEST(max_difference(model, reference) < 1e-5);
}

// The whole step, updates included, inside a Jit: the capture records each wait before the update
// kernel that reads it, and every replay gives the parameters bit for bit as the same step run
// eagerly on a twin model.
BOOST_AUTO_TEST_CASE(a_jit_of_the_step_with_waits_at_the_update_equals_eager_bit_for_bit) {
  const int size = dist::world_size(), me = dist::rank();
  Mlp jitted(8), eager(8);
  dist::DataParallel ddp_j(jitted.parameters(), dist::DataParallel::Config{64});
  dist::DataParallel ddp_e(eager.parameters(), dist::DataParallel::Config{64});
  const int64_t lo = kBatch * me / size, hi = kBatch * (me + 1) / size;
  auto step = [&](Mlp& m, dist::DataParallel& ddp, const Tensor& x, const Tensor& y) {
    Tensor loss = nn::cross_entropy(m(x), y) * (double(hi - lo) / kBatch);
    std::vector<Tensor> ps;
    for (Tensor* p : m.parameters()) ps.push_back(*p);
    const std::vector<Tensor> g = ddp.reduce_gradients(ravel::gradients(loss, ps), 1.0);
    ravel::NoGradGuard no_grad;
    std::vector<Tensor> next;
    for (size_t i = 0; i < ps.size(); ++i) next.push_back(ps[i] - g[i] * kLr);
    ravel::realize(next);  // one realization of the updates, each wait at its reader
    for (size_t i = 0; i < ps.size(); ++i) m.parameters()[i]->assign(next[i]);
  };
  ravel::Jit jit([&](const std::vector<Tensor>& in) {
    step(jitted, ddp_j, in[0], in[1]);
    return std::vector<Tensor>{};
  }, jitted.parameters());
  for (int s = 0; s < 4; ++s) {
    Tensor x = batch_x(s).slice(0, lo, hi).contiguous().realize(), y = batch_y(s).slice(0, lo, hi).contiguous().realize();
    jit({x, y});
    step(eager, ddp_e, x, y);
    auto pj = jitted.parameters(), pe = eager.parameters();
    for (size_t i = 0; i < pj.size(); ++i)
      BOOST_TEST(pj[i]->to_vector<float>() == pe[i]->to_vector<float>(), boost::test_tools::per_element());
  }
  BOOST_TEST(jit.captures() == 1);
  BOOST_TEST(jit.replays() == 3);
}

BOOST_AUTO_TEST_CASE(mismatched_gradient_lists_are_a_typed_error_on_every_rank) {
  const int size = dist::world_size(), me = dist::rank();
  if (size == 1) return;
  Mlp model(1);
  dist::DataParallel ddp(model.parameters());
  std::vector<Tensor> grads{Tensor::ones({2, 2}), Tensor::ones({3})};
  if (me == size - 1) grads.pop_back();  // one rank has a gradient fewer
  BOOST_CHECK_THROW(ddp.reduce_gradients(grads, 1.0), ravel::ValueError);
  if (me == size - 1) grads.push_back(Tensor::ones({4}));  // the same count, another shape
  BOOST_CHECK_THROW(ddp.reduce_gradients(grads, 1.0), ravel::ShapeError);
  dist::barrier();
}

BOOST_AUTO_TEST_SUITE_END()
