// Buckets for a global-view program's sums over ranks: entered cotangents and combines (entered_buckets.hpp).
//
// Note [Entered gradient buckets]
// A replicated parameter used by batch-split computation is *entered* (Note [Global-view
// derivatives] in mesh_rank_steps.cpp), and its gradient is the sum over the ranks of this rank's
// cotangent. Done one entered value at a time, each sum was an eager all-reduce called from
// enter's derivative rule while autodiff built the backward graph: a realization of the backward
// graph up to that cotangent (the intermediates it shares with the next one's computed again),
// then a blocking all-reduce, per parameter. A data-parallel MLP in the global view was
// 1.4-1.55x the same step with Mesh::all_reduce's DataParallel buckets (docs/distributed.md).
// Now the rule only *registers* the cotangent, as DDP's autograd hook does, and so does combine
// (a sum over the ranks: the loss's mean over a split batch, a row-parallel product), which was a
// blocking all-reduce in the forward pass that realized the forward graph on its own (computed
// again by the backward pass's realization) and made every rank meet there:
//  - Sums go into buckets in the order they are registered (the forward's combines, then the
//    cotangents in the order autodiff reaches them: reverse order of use, as DDP's), one dtype and
//    device per bucket, a new bucket once bucket_bytes (Options::entered_bucket_bytes) would be
//    passed: a data-parallel step's loss and gradients share one all-reduce. The sum is returned
//    as a realized leaf whose buffer is pending (Note [Results ended at their first reader],
//    host_op_deferred.cpp): one EnteredMember operation per sum, whose end waits for its
//    bucket's all-reduce and copies its slice out.
//  - Nothing communicates yet. begin_entered_buckets begins every waiting bucket with
//    begin_host_ops: their inputs realized in ONE scheduling pass (the forward and backward
//    graphs once), bucket b's all-reduce started right after the kernel that made its last
//    input, while the kernels of the next buckets run (Note [Host operations begun as their inputs are made]).
//    It runs at the first of: the first reader of any result (a kernel, a read-back, a Jit
//    boundary, finalize: all go through the pending buffer), Tensor::realize of a result (which
//    begins them and does not wait: Note [Realize starts, the reader waits] in
//    runtime/host_op_deferred.cpp), or any other rank collective (each calls it first). Both happen at the same point of the program on every rank, and the
//    buckets begin in the order they were made, so every rank begins the same collectives in the
//    same order; a max/min combine's derivative (an all-reduce inside autodiff) begins the
//    buckets registered so far before its own.
//  - A sum whose input depends on a result still waiting (a combine of a value computed from an
//    earlier combine, an entered intermediate whose summed cotangent flows on into the parameters
//    before it, a second derivative) would make that pass read a result whose bucket has not
//    begun; so registering one begins the waiting buckets first (a walk of the new input's
//    graph, each node visited once per generation of buckets), and it goes into the next.
//  - The first bucket of a generation exchanges one argument header for all of them (Note
//    [Argument headers]; as DataParallel's first bucket does): not the plugin's checked
//    all-reduce, whose messages (fixed tags, a second phase posted later) must not overlap
//    another checked call's, and buckets stay in flight while other collectives run. A bucket's
//    members' ends share one wait.
//  - A Jit capturing the step records the pass's kernels, the begins between them and each
//    member's end before its first reader, and replays them in that order (the bucket's state
//    starts again at each begin).
// The result keeps combine's derivative (rank_enter of the cotangent), so second derivatives hold.
// RAVEL_DIST_ENTER_BUCKETS=0 restores one eager all-reduce per sum (before decision 75).
// Known limit: a result never read nor realized, and no collective after it, leaves its bucket
// waiting (its inputs' graph held) until the next Jit call or distributed::finalize begins it.
#include "distributed/entered_buckets.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>

#include "distributed/in_flight.hpp"
#include "distributed/staging.hpp"
#include "distributed/world.hpp"
#include "ravel/error.hpp"
#include "runtime/host_op.hpp"
#include "tensor/internal.hpp"

namespace ravel::distributed::detail {

using namespace ravel::detail;

namespace {

constexpr size_t kEnteredSlotBase = 64;  // staging slots: 0, 1 the tensor collectives, 2.. DataParallel's buckets
std::atomic<int> g_enabled{-1};          // set_entered_buckets: -1 none, else 0 or 1
std::atomic<size_t> g_cap_override{0};
std::atomic<size_t> g_begun{0};

uint64_t entered_bytes_of(const Shape& s, DType t) {
  uint64_t n = 1;
  for (int64_t d : s) n *= static_cast<uint64_t>(d);
  return n * dtype_size(t);
}

uint64_t entered_fnv(uint64_t h, int64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xffu;
    h *= 1099511628211ull;
  }
  return h;
}

Communicator& entered_comm() {
  Communicator* c = world_communicator();
  if (c == nullptr || c->handle() == nullptr)
    throw CommunicationError("distributed: MeshTensor bucket all_reduce: the world was finalized (a Jit replayed a "
                             "collective after distributed::finalize())", c ? c->rank() : 0, -1);
  return *c;
}

// One bucket: the all-reduce (sum) of its members' inputs packed end to end. Begun by
// begin_host_ops (or a Jit replay); ended by its members (EnteredMember), the first of which waits.
class EnteredBucket final : public HostOp {
 public:
  EnteredBucket(DType dtype, Device device, size_t slot) : dtype_(dtype), device_(std::move(device)), slot_(slot) {}
  std::string label() const override { return label_; }

  size_t add(const Tensor& g) {
    const size_t i = shapes_.size();
    shapes_.push_back(g.shape());
    offsets_.push_back(total_);
    total_ += entered_bytes_of(g.shape(), dtype_);
    inputs_.push_back(g);
    return i;
  }
  uint64_t bytes() const { return total_; }
  const DType& dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  // Registration is over: the label, once; the inputs go to the pass that begins it. The members'
  // dtype and shapes are added to `h`, the generation's header.
  std::vector<Tensor> close(ArgHeader& h) {
    label_ = "MeshTensor bucket all_reduce (" + std::to_string(shapes_.size()) + " tensors, " +
             std::to_string(total_) + " bytes)";
    h.count += static_cast<int32_t>(shapes_.size());
    h.dims[0] += static_cast<int64_t>(total_);
    h.dims[1] += 1;
    for (const Shape& s : shapes_) {
      h.signature = entered_fnv(entered_fnv(h.signature, static_cast<int64_t>(dtype_)), static_cast<int64_t>(s.size()));
      for (int64_t d : s) h.signature = entered_fnv(h.signature, d);
    }
    return std::move(inputs_);
  }
  // The first bucket of a generation checks every rank's header of the whole generation first.
  void check_first(const ArgHeader& h) {
    check_ = true;
    header_ = h;
    check_label_ = label_ + " (argument check)";
  }

  void begin(const std::vector<const DeviceBuffer*>& in) override {
    Communicator& comm = entered_comm();
    error_ = nullptr;
    try {
      // Note [Entered gradient buckets]: one blocking header exchange for the generation, not the
      // plugin's checked all-reduce, whose messages may not overlap another checked call's.
      if (check_ && world_options().check_arguments)
        check_headers(comm, header_, "MeshTensor gradients", check_label_);
      f_.send = comm.staging(slot_, total_);
      f_.recv = comm.staging(slot_ + 1, total_);
      for (size_t i = 0; i < in.size(); ++i)  // packed back to back: one message per bucket
        in[i]->read(f_.send->data() + offsets_[i], entered_bytes_of(shapes_[i], dtype_));
      void* s = f_.send->data();
      void* r = f_.recv->data();
      const uint64_t n = total_ / dtype_size(dtype_);
      const auto& api = comm.plugin().api();
      f_.start(comm, [&](rvl_coll_request** q) {
        return api.all_reduce(comm.handle(), s, r, n, abi_dtype(dtype_), RVL_COLL_SUM, q);
      }, label_);
    } catch (...) {
      f_.release();  // nothing in flight: the buffers go back
      throw;
    }
    begun_ = true;
    waited_ = false;
    ended_ = 0;
    g_begun.fetch_add(1, std::memory_order_relaxed);
  }
  // Never recorded: each member ends itself (EnteredMember).
  void end(const std::vector<DeviceBuffer*>&) override {
    throw InternalError("ravel: " + label_ + ": ended as a whole (please report it)");
  }
  void cancel() noexcept override {
    f_.cancel();
    begun_ = false;
  }
  bool progress() noexcept override { return f_.progress(); }
  // A member realized (Note [Realize starts, the reader waits]): every waiting bucket begins, in
  // the order they were made, as at a first reader; nothing waits.
  void start() {
    if (!begun_ && !error_) begin_entered_buckets();
    if (error_) std::rethrow_exception(error_);
  }

  // Member i's end: the bucket's wait (the first member's), then its slice into `out`.
  void end_member(size_t i, DeviceBuffer* out) {
    if (!begun_ && !error_) begin_entered_buckets();  // its first reader came before any other collective
    if (error_) std::rethrow_exception(error_);
    RAVEL_CHECK(begun_, InternalError, label_, ": a result was read before its bucket began (please report it)");
    if (!waited_) {
      try {
        f_.wait(label_);
      } catch (...) {
        error_ = std::current_exception();  // every other member rethrows it
        f_.release();
        begun_ = false;
        throw;
      }
      waited_ = true;
    }
    out->write(f_.recv->data() + offsets_[i], entered_bytes_of(shapes_[i], dtype_));
    if (++ended_ == shapes_.size()) {  // all written: the staging buffers go back
      f_.release();
      begun_ = false;
    }
  }
  // The pass that was to begin it failed: its members rethrow why.
  void fail(std::exception_ptr why) noexcept {
    if (begun_) cancel();
    error_ = std::move(why);
  }

 private:
  DType dtype_;
  Device device_;
  size_t slot_;
  std::vector<Shape> shapes_;
  std::vector<uint64_t> offsets_;
  uint64_t total_ = 0;
  std::vector<Tensor> inputs_;  // until closed
  std::string label_ = "MeshTensor bucket all_reduce", check_label_;
  ArgHeader header_;      // the generation's, when check_
  bool check_ = false;
  bool begun_ = false, waited_ = false;
  size_t ended_ = 0;
  std::exception_ptr error_;
  InFlight f_;
};

// One member's sum: the end whose output is the pending result bucketed_rank_sum returns.
class EnteredMember final : public HostOp {
 public:
  EnteredMember(std::shared_ptr<EnteredBucket> bucket, size_t index) : bucket_(std::move(bucket)), index_(index) {}
  std::string label() const override { return bucket_->label() + " (member " + std::to_string(index_) + ")"; }
  void begin(const std::vector<const DeviceBuffer*>&) override {
    throw InternalError("ravel: " + label() + ": begun alone (please report it)");
  }
  void end(const std::vector<DeviceBuffer*>& out) override { bucket_->end_member(index_, out.at(0)); }
  void cancel() noexcept override {}  // the bucket is cancelled by whoever began it
  bool progress() noexcept override { return bucket_->progress(); }
  void start() override { bucket_->start(); }

 private:
  std::shared_ptr<EnteredBucket> bucket_;
  size_t index_;
};

// The buckets registered and not yet begun (one generation), guarded by buffer_mutex().
struct Waiting {
  std::vector<std::shared_ptr<EnteredBucket>> buckets;  // the last one is open
  std::unordered_set<const DeviceBuffer*> results;      // their members' pending outputs
  std::unordered_set<NodePtr> clean;  // nodes known not to read any of `results` (created before them or checked)
};
Waiting& waiting() {
  static auto* w = new Waiting();  // never freed: finalize runs from a static destructor
  return *w;
}
std::atomic<size_t> g_waiting{0};

// Whether g's value reads a result still waiting (its graph: sources and view parents).
bool reads_waiting(const Tensor& g, Waiting& w) {
  if (w.results.empty()) return false;
  std::vector<NodePtr> stack;
  stack.push_back(g.node());  // not `stack{g.node()}`: GCC 12 warns (-Wfree-nonheap-object) on that form here
  while (!stack.empty()) {
    NodePtr n = std::move(stack.back());
    stack.pop_back();
    if (!n || !w.clean.insert(n).second) continue;
    if (n->buffer) {
      if (w.results.count(n->buffer.get())) return true;
      continue;
    }
    for (const NodePtr& s : n->srcs) stack.push_back(s);
    if (n->parent) stack.push_back(n->parent);
  }
  return false;
}


size_t bucket_cap() {
  static const size_t env = [] {
    const char* v = std::getenv("RAVEL_DIST_ENTER_BUCKET_BYTES");
    return v ? bucket_bytes_from_environment(v) : size_t{0};
  }();
  if (const size_t o = g_cap_override.load(std::memory_order_relaxed)) return o;
  return env ? env : world_options().entered_bucket_bytes;
}

}  // namespace

size_t bucket_bytes_from_environment(const std::string& v) {
  size_t used = 0;
  unsigned long long x = 0;
  try {
    x = v.empty() || v[0] < '0' || v[0] > '9' ? 0 : std::stoull(v, &used);  // no sign, no blank
  } catch (const std::exception&) {
    used = 0;
  }
  RAVEL_CHECK(used == v.size() && x > 0, ConfigError, "RAVEL_DIST_ENTER_BUCKET_BYTES=", v,
              " is not a positive number of bytes");
  return static_cast<size_t>(x);
}

bool entered_buckets_enabled() {
  static const bool env = [] {
    const char* v = std::getenv("RAVEL_DIST_ENTER_BUCKETS");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  const int o = g_enabled.load(std::memory_order_relaxed);
  return o < 0 ? env : o == 1;
}

void set_entered_buckets(bool on, size_t bucket_bytes) {
  g_enabled.store(on ? 1 : 0, std::memory_order_relaxed);
  g_cap_override.store(bucket_bytes, std::memory_order_relaxed);
}

size_t entered_buckets_begun() { return g_begun.load(std::memory_order_relaxed); }

void begin_entered_buckets() {
  if (g_waiting.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
  Waiting& w = waiting();
  if (w.buckets.empty()) return;
  std::vector<std::shared_ptr<EnteredBucket>> buckets = std::move(w.buckets);
  w.buckets.clear();
  w.results.clear();
  w.clean.clear();
  g_waiting.store(0, std::memory_order_relaxed);
  std::vector<std::shared_ptr<HostOp>> ops;
  std::vector<std::vector<Tensor>> inputs;
  ArgHeader h;  // Note [Argument headers]: one for the generation, checked by its first bucket
  h.kind = kReduceGradients;
  h.signature = 14695981039346656037ull;
  for (const auto& b : buckets) ops.push_back(b), inputs.push_back(b->close(h));
  buckets.front()->check_first(h);
  try {
    begin_host_ops(ops, inputs);  // each bucket begins as its last cotangent is made
  } catch (...) {
    for (const auto& b : buckets) b->fail(std::current_exception());
    throw;
  }
}

Tensor bucketed_rank_sum(const Tensor& g) {
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
  Waiting& w = waiting();
  if (reads_waiting(g, w)) begin_entered_buckets();  // Note [Entered gradient buckets]: into the next generation
  const uint64_t bytes = entered_bytes_of(g.shape(), g.dtype());
  std::shared_ptr<EnteredBucket> open = w.buckets.empty() ? nullptr : w.buckets.back();
  if (!open || open->dtype() != g.dtype() || open->device() != g.device() || open->bytes() + bytes > bucket_cap()) {
    open = std::make_shared<EnteredBucket>(g.dtype(), g.device(), kEnteredSlotBase + 2 * w.buckets.size());
    w.buckets.push_back(open);
  }
  const size_t index = open->add(g);
  g_waiting.store(w.buckets.size(), std::memory_order_relaxed);
  Tensor out = end_host_op_at_first_read(std::make_shared<EnteredMember>(open, index),
                                         {HostOutput{g.dtype(), g.shape(), g.device()}})[0];
  w.results.insert(resolve(out.node()).base->buffer.get());
  return out;
}

}  // namespace ravel::distributed::detail
