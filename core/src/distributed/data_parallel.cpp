// DataParallel: PyTorch DDP's scheme over the communicator.
//
// Note [Gradient buckets]
// DDP registers a hook per parameter and starts a bucket's all-reduce when the backward pass
// has produced the bucket's last gradient, overlapping communication with the rest of backward.
// Ravel's backward builds one lazy graph and realizes every gradient in one scheduling pass, so
// there is no moment at which "the first bucket is ready" while later ones are still being
// computed. What overlaps here is the rest: gradients are taken in reverse parameter order (the
// order backward finishes them, as DDP does), packed bucket by bucket into host memory, and each
// bucket's non-blocking all-reduce starts as soon as it is packed, while the next bucket is
// read back and packed; the waits come after the last one started. Overlap with the backward
// pass itself needs gradients that are realized per bucket (a later change: the scheduler
// would have to emit them in bucket order). One argument header covers the whole call.
#include <cstring>

#include "distributed/staging.hpp"
#include "distributed/world.hpp"
#include "ravel/autodiff.hpp"
#include "ravel/error.hpp"

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

struct Bucket {
  std::vector<size_t> members;  // indices into grads
  std::shared_ptr<Bytes> data;    // reused staging buffers (Note [Reused staging buffers]):
  std::shared_ptr<Bytes> result;  // out of place (collectives.cpp says why)
  rvl_coll_request* request = nullptr;
};

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
  std::vector<Tensor> out(grads.size());
  if (!comm) {  // Note [World of one]
    for (size_t i = 0; i < grads.size(); ++i) out[i] = scaled(grads[i]);
    buckets_ = 0;
    return out;
  }
  if (world_options().check_arguments) {
    ArgHeader h;
    h.kind = kReduceGradients;
    h.count = static_cast<int32_t>(grads.size());
    uint64_t sig = 14695981039346656037ull;
    for (const Tensor& g : grads) {
      sig = fnv(fnv(sig, static_cast<int64_t>(g.dtype())), static_cast<int64_t>(g.shape().size()));
      for (int64_t d : g.shape()) sig = fnv(sig, d);
      h.dims[0] += g.numel() * dtype_size(g.dtype());
    }
    h.signature = sig;
    check_headers(*comm, h, "DataParallel::reduce_gradients");
  }
  realize(grads);  // one scheduling pass for all of them (the backward graph is shared)

  // Note [Gradient buckets]: reverse order, one dtype per bucket, started as soon as packed.
  std::vector<Bucket> buckets;
  // Starts a staged bucket's non-blocking all-reduce (a full bucket at once, the last one after
  // the loop).
  auto start = [&](Bucket& b) {
    const Tensor& first = grads[b.members.front()];
    const uint64_t n = b.data->size() / dtype_size(first.dtype());
    b.result->resize(b.data->size());
    b.request = comm->start([&](rvl_coll_request** r) {
      return comm->plugin().api().all_reduce(comm->handle(), b.data->data(), b.result->data(), n,
                                             abi_dtype(first.dtype()), RVL_COLL_SUM, r);
    }, "DataParallel bucket all_reduce");
  };
  for (size_t k = grads.size(); k-- > 0;) {
    const Tensor& g = grads[k];
    const size_t bytes = static_cast<size_t>(g.numel()) * dtype_size(g.dtype());
    const bool fits = !buckets.empty() && grads[buckets.back().members.front()].dtype() == g.dtype() &&
                      buckets.back().data->size() + bytes <= config_.bucket_bytes;
    if (!fits) {
      if (!buckets.empty() && buckets.back().request == nullptr) {  // start the full bucket
        start(buckets.back());
      }
      buckets.emplace_back();
      const size_t slot = 2 * buckets.size();  // slots 0, 1: the tensor collectives
      buckets.back().data = comm->staging(slot, 0);
      buckets.back().result = comm->staging(slot + 1, 0);
    }
    buckets.back().members.push_back(k);
    append_host(g, *buckets.back().data);
  }
  size_t next_wait = 0;
  try {
    for (Bucket& b : buckets) {
      if (!b.request) start(b);
    }
    for (; next_wait < buckets.size(); ++next_wait) {
      Bucket& b = buckets[next_wait];
      rvl_coll_request* r = b.request;
      b.request = nullptr;
      comm->wait(r, "DataParallel bucket all_reduce (" + std::to_string(b.data->size()) + " bytes)",
                 std::make_shared<std::pair<std::shared_ptr<Bytes>, std::shared_ptr<Bytes>>>(b.data, b.result));
      size_t at = 0;
      for (size_t k : b.members) {
        const Tensor& g = grads[k];
        out[k] = scaled(from_host(b.result->data() + at, g.dtype(), g.shape(), g.device()));
        at += static_cast<size_t>(g.numel()) * dtype_size(g.dtype());
      }
    }
  } catch (...) {
    for (Bucket& b : buckets)
      if (b.request)
        comm->abandon(b.request, std::make_shared<std::pair<std::shared_ptr<Bytes>, std::shared_ptr<Bytes>>>(b.data, b.result));
    throw;
  }
  buckets_ = static_cast<int>(buckets.size());
  return out;
}

void DataParallel::average_gradients() {
  std::vector<Tensor*> with;
  std::vector<Tensor> grads;
  for (Tensor* p : params_)
    if (Tensor g = p->grad(); g.defined()) with.push_back(p), grads.push_back(g);
  const std::vector<Tensor> avg = reduce_gradients(grads, 1.0 / world_size());
  for (size_t i = 0; i < with.size(); ++i) {
    // Tensor has no gradient setter: d/dp sum(p * a) is exactly a, accumulated into a cleared grad.
    with[i]->zero_grad();
    (*with[i] * avg[i].detach()).sum().backward();
  }
}

}  // namespace ravel::distributed
