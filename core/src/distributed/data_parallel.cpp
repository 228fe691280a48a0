// DataParallel: PyTorch DDP's scheme over the communicator.
//
// Note [Gradient buckets]
// DDP registers a hook per parameter and starts a bucket's all-reduce when the backward pass
// has produced the bucket's last gradient, overlapping communication with the rest of backward.
// Here the gradients are taken in reverse parameter order (the order backward finishes them, as
// DDP does) and cut into buckets of up to bucket_bytes (one dtype each); each bucket is a host
// operation (collective_op.hpp) and begin_host_ops realizes every gradient in one scheduling
// pass, beginning bucket b's non-blocking all-reduce right after the kernel that made its last
// gradient, between the kernels that compute the rest (Note [Host operations begun as their
// inputs are made] in runtime/host_op.cpp): no shared forward or backward intermediate is
// computed twice, and the buckets begin in index order on every rank. Each bucket's wait comes
// where its result is first read (Note [Results ended at their first reader] in
// runtime/host_op_deferred.cpp): the update of a bucket that is done runs while later buckets are
// still in flight. Gradients that are realized already (after Tensor::backward, which realizes them)
// overlap nothing but each other's packing: pass lazy ones (ravel::gradients, as backward()
// below does) to overlap the backward pass. Note [Progress between kernels] (host_op.cpp) is
// what makes a begun bucket move while the kernels run. A Jit capturing the step records the begins between the kernels and replays
// exactly this order (decision 47 in docs/architecture.md). One argument header covers the whole
// call (it includes the bucket count, so ranks configured with different bucket_bytes fail the
// check instead of exchanging different counts).
#include <cstdlib>
#include <cstring>
#include <utility>

#include "distributed/collective_op.hpp"
#include "distributed/entered_buckets.hpp"
#include "distributed/world.hpp"
#include "ravel/autodiff.hpp"
#include "ravel/error.hpp"
#include "tensor/internal.hpp"

namespace ravel::distributed {

using namespace ravel::detail;

namespace {

uint64_t fnv(uint64_t h, int64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xffu;
    h *= 1099511628211ull;
  }
  return h;
}

// RAVEL_DDP_OVERLAP=0 realizes every gradient before the first bucket begins (the behaviour before
// decision 47 in docs/architecture.md), so one binary measures both (docs/distributed.md).
bool overlap_backward() {
  static const bool on = [] {
    const char* v = std::getenv("RAVEL_DDP_OVERLAP");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace

DataParallel::DataParallel(std::vector<Tensor*> parameters, Config config)
    : params_(std::move(parameters)), config_(config) {
  for (size_t i = 0; i < params_.size(); ++i)
    RAVEL_CHECK(params_[i] && params_[i]->defined(), ValueError, "DataParallel: parameter ", i, " is undefined");
  RAVEL_CHECK(config_.bucket_bytes > 0, ValueError, "DataParallel: bucket_bytes must be positive");
  if (world_size() == 1) return;
  NoGradGuard no_grad;
  for (Tensor* p : params_) p->assign(broadcast(*p, 0));  // every rank starts from rank 0's values
}

std::vector<Tensor> DataParallel::reduce_gradients(const std::vector<Tensor>& grads, double scale) const {
  for (size_t i = 0; i < grads.size(); ++i)
    RAVEL_CHECK(grads[i].defined(), ValueError, "DataParallel::reduce_gradients: gradient ", i, " is undefined");
  NoGradGuard no_grad;
  auto scaled = [&](const Tensor& g) { return scale == 1.0 ? g : (g * scale).cast(g.dtype()); };
  Communicator* comm = world_communicator();
  if (comm) distributed::detail::begin_entered_buckets();  // Note [Entered gradient buckets]
  std::vector<Tensor> out(grads.size());
  if (!comm) {  // Note [World of one]
    for (size_t i = 0; i < grads.size(); ++i) out[i] = scaled(grads[i]);
    buckets_ = 0;
    return out;
  }
  // Note [Gradient buckets]: reverse order, one dtype per bucket.
  std::vector<std::vector<size_t>> buckets;
  size_t filled = 0;
  for (size_t k = grads.size(); k-- > 0;) {
    const size_t bytes = static_cast<size_t>(grads[k].numel()) * dtype_size(grads[k].dtype());
    if (buckets.empty() || grads[buckets.back().front()].dtype() != grads[k].dtype() ||
        filled + bytes > config_.bucket_bytes) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(k);
    filled += bytes;
  }
  ArgHeader h;  // Note [Argument headers]: one for the whole call, checked by the first bucket
  h.kind = kReduceGradients;
  h.count = static_cast<int32_t>(grads.size());
  uint64_t sig = 14695981039346656037ull;
  for (const Tensor& g : grads) {
    sig = fnv(fnv(sig, static_cast<int64_t>(g.dtype())), static_cast<int64_t>(g.shape().size()));
    for (int64_t d : g.shape()) sig = fnv(sig, d);
    h.dims[0] += g.numel() * dtype_size(g.dtype());
  }
  h.dims[1] = static_cast<int64_t>(buckets.size());  // ranks with other bucket_bytes would send other counts
  h.signature = sig;

  std::vector<std::shared_ptr<HostOp>> ops;
  std::vector<std::vector<Tensor>> members(buckets.size());
  std::vector<uint8_t> direct(buckets.size(), 0);
  for (size_t b = 0; b < buckets.size(); ++b) {
    BucketCall call;
    call.dtype = grads[buckets[b].front()].dtype();
    for (size_t k : buckets[b]) call.shapes.push_back(grads[k].shape()), members[b].push_back(grads[k]);
    call.slot = 2 + 2 * b;  // slots 0, 1: the tensor collectives
    call.check = b == 0 && world_options().check_arguments;
    call.header = h;
    call.device = grads[buckets[b].front()].device();
    bool one_device = true;
    for (size_t k : buckets[b]) one_device = one_device && grads[k].device() == call.device;
    call.direct = one_device && host_addressable(call.device);  // Note [Host memory without staging]
    direct[b] = call.direct;
    ops.push_back(make_bucket_op(std::move(call)));
  }
  try {
    if (!overlap_backward()) realize(grads);  // all of them first, in one pass
    begin_host_ops(ops, members);  // each bucket begins as its last gradient is made
    for (size_t b = 0; b < buckets.size(); ++b) {
      std::vector<HostOutput> outs;
      int64_t elements = 0;
      for (size_t k : buckets[b]) {
        outs.push_back(HostOutput{grads[k].dtype(), grads[k].shape(), grads[k].device()});
        elements += grads[k].numel();
      }
      // Direct: one packed output, each gradient a view of it (Note [Host memory without staging]).
      if (direct[b]) outs = {HostOutput{outs.front().dtype, {elements}, outs.front().device}};
      std::shared_ptr<HostOp> op = std::exchange(ops[b], nullptr);  // ended (or given up) from here on
      const std::vector<Tensor> summed = end_host_op_at_first_read(op, outs);  // the wait at its first reader
      int64_t at = 0;
      for (size_t i = 0; i < buckets[b].size(); ++i) {
        const Tensor& g = grads[buckets[b][i]];
        const Tensor r = direct[b] ? summed[0].slice(0, at, at + g.numel()).reshape(g.shape()) : summed[i];
        at += g.numel();
        out[buckets[b][i]] = scaled(r);
      }
    }
  } catch (...) {
    for (auto& op : ops)
      if (op) op->cancel();  // begun and not ended (cancel of one never begun does nothing)
    throw;
  }
  buckets_ = static_cast<int>(buckets.size());
  return out;
}

void DataParallel::backward(const Tensor& loss) {
  RAVEL_CHECK(loss.defined(), ValueError, "DataParallel::backward: the loss is undefined");
  std::vector<Tensor> params;
  for (Tensor* p : params_) params.push_back(*p);
  // Lazy gradients (Note [Gradient buckets]): realized by reduce_gradients' one pass.
  const std::vector<Tensor> avg = reduce_gradients(gradients(loss, params), 1.0 / world_size());
  // Over ranks each average is a bucket's result whose wait comes at its first reader (Note
  // [Results ended at their first reader]): added to grad() unrealized, the optimizer's update
  // kernels are those readers, and the update of a bucket that is done runs while later ones are
  // in flight. Parameters that are not leaves requiring grad (and a world of one, whose averages
  // are still the lazy backward graph, which a stored gradient must not keep alive) take
  // Tensor::backward: d/dp_i of sum_i sum(p_i * a_i) is exactly a_i, accumulated into grad() in
  // one realization.
  const bool lazily = world_communicator() != nullptr;
  Tensor total;
  for (size_t i = 0; i < params_.size(); ++i) {
    Node& leaf = *params_[i]->node();
    if (lazily && leaf.kind == NodeKind::Buffer && leaf.requires_grad) {
      add_to_grad_lazily(leaf, avg[i]);
      continue;
    }
    Tensor term = (*params_[i] * avg[i].detach()).sum();
    total = total.defined() ? total + term : term;
  }
  if (total.defined()) total.backward();
}

void DataParallel::average_gradients() {
  std::vector<Tensor*> with;
  std::vector<Tensor> grads;
  for (Tensor* p : params_)
    if (Tensor g = p->grad(); g.defined()) with.push_back(p), grads.push_back(g);
  // The gradients are realized (after Tensor::backward): every bucket begins at once, and its
  // wait comes at the first reader of its average (Note [Results ended at their first reader]),
  // the optimizer's update when grad() is replaced unrealized: the updates of the buckets that
  // are done run while later buckets are in flight (but nothing overlaps the backward pass:
  // DataParallel::backward does).
  const std::vector<Tensor> avg = reduce_gradients(grads, 1.0 / world_size());
  for (size_t i = 0; i < with.size(); ++i) {
    with[i]->zero_grad();
    Node& leaf = *with[i]->node();
    if (leaf.kind == NodeKind::Buffer && leaf.requires_grad) {
      add_to_grad_lazily(leaf, avg[i]);
      continue;
    }
    // Tensor has no gradient setter: d/dp sum(p * a) is exactly a, accumulated into a cleared grad.
    (*with[i] * avg[i].detach()).sum().backward();
  }
}

}  // namespace ravel::distributed
