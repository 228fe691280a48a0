// Collectives and DataParallel buckets as host operations (collective_op.hpp).
//
// Staging (Note [Reused staging buffers] in communicator.cpp): the input is read from its device
// buffer straight into the communicator's reused send buffer and the result written from the
// receive buffer straight into the output's device buffer: one copy each way, no temporary
// vectors. The buffers are taken from the communicator at begin and handed back at end, so an
// operation holds none between calls (a slot whose buffer is still held elsewhere is replaced).
//
// Note [Fixed cost per call]
// A 4 KiB all-reduce on 2 ranks of one host moves its bytes in 1-2 µs, so everything the core
// does per call around it shows: a profile (perf, docs/distributed.md "The tensor path's fixed
// cost") found shared_ptrs and a vector per argument check, a std::function per started request,
// a keep-alive pair per wait and formatted strings in the plugin. Per call the core now reuses
// what it can (the header buffer, the keep-alive pair below, the staging buffers) and builds
// message text only for errors; anything reused is replaced when a timed-out request parked it.
//
// Note [Host memory without staging]
// The MPI plugin reads and writes host memory, and a CPU device's buffers are host memory
// (buffer_address, ABI 1.2; LoadedPlugin::DeviceCaps::host_addressable). There a tensor
// collective needs neither staging copy: the plugin sends straight from the input's buffer and
// receives into the output's, which the operation allocates in begin and hands over with
// HostOp::take_outputs. At 64 KiB on 2 ranks the two copies were most of what the tensor path
// added over the plugin alone (25 against 8 us; without them 10 us, docs/distributed.md), more
// than two 64 KiB memcpys cost on one rank (~2.5 us): probably because the copy in leaves the
// send buffer's lines dirty in this core's cache for the peer to pull across.
// The input must stay alive and unchanged until the end: realized buffers are never written
// again (a deferred end writes its buffers before anyone can reach them), and HostOp::hold_inputs
// keeps it alive, parked with the request if a deadline passes (a Jit replay frees an input after
// its last reader, the begin). The device is synchronized before the input is read (a queued
// kernel may still be writing it). Broadcast stays staged (in place: only the root's values are
// read, into the buffer every rank receives in). DataParallel's buckets: the plugin receives a
// bucket into one packed output buffer, of which DataParallel hands out each gradient as a view,
// and sends a bucket of one gradient from its buffer; a bucket of several is still packed by a
// copy in.
#include "distributed/collective_op.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "distributed/in_flight.hpp"
#include "distributed/world.hpp"
#include "ravel/error.hpp"
#include "ravel/runtime.hpp"
#include "runtime/capture.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/loaded_plugin.hpp"
#include "tensor/internal.hpp"

namespace ravel::detail {

namespace {

// RAVEL_DIST_STAGE=1 stages through host buffers even where the direct path applies, so the
// staged path (every device that is not host memory) stays tested on CPU-only machines
// (distributed_tests_np2_staged).
bool forced_staging() {
  static const bool on = [] {
    const char* v = std::getenv("RAVEL_DIST_STAGE");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

uint64_t bytes_of(const Shape& s, DType t) {
  uint64_t n = 1;
  for (int64_t d : s) n *= static_cast<uint64_t>(d);
  return n * dtype_size(t);
}

Communicator& comm_for(const std::string& what) {
  Communicator* c = world_communicator();
  // A world of one never makes these operations; one that finalized since a capture has none.
  if (c == nullptr || c->handle() == nullptr)
    throw distributed::CommunicationError("distributed: " + what + ": the world was finalized (a Jit replayed a "
                                          "collective after distributed::finalize())", c ? c->rank() : 0, -1);
  return *c;
}

class CollectiveOp final : public HostOp {
 public:
  explicit CollectiveOp(CollectiveCall c) : c_(std::move(c)) {
    header_ = ArgHeader{};
    header_.kind = c_.kind;
    header_.op = c_.kind == kAllReduce || c_.kind == kReduceScatter ? static_cast<int32_t>(c_.op) : -1;
    header_.root = c_.root;
    header_.dtype = static_cast<int32_t>(c_.dtype);
    header_.ndim = static_cast<int32_t>(c_.in_shape.size());
    for (size_t i = 0; i < c_.in_shape.size(); ++i) header_.dims[i] = c_.in_shape[i];
    check_label_ = c_.what + " (argument check)";
    // Note [Host memory without staging]: the plugin must read host memory (all do: the MPI
    // plugin reads nothing else, and RVL_COLL_DEVICE_HOST is what the core stages through).
    plugin_ = Runtime::get().plugin_for(c_.device);
    direct_ = c_.kind != kBroadcast && !forced_staging() && plugin_->caps(c_.device.index()).host_addressable;
  }
  std::string label() const override { return "distributed::" + c_.what; }
  void hold_inputs(const std::vector<std::shared_ptr<DeviceBuffer>>& in) override {
    if (direct_) f_.direct = in;
  }
  // Note [Cached collective operations]: whether this operation is the one for `k`.
  bool is_for(const CollectiveKey& k, const LoadedPlugin* plugin) const {
    return c_.kind == k.kind && c_.op == k.op && c_.root == k.root && c_.dtype == k.dtype && c_.device == k.device &&
           c_.in_shape == k.in_shape && c_.out_shape == k.out_shape && plugin_.get() == plugin;
  }
  std::vector<std::shared_ptr<DeviceBuffer>> take_outputs() override {
    if (!out_) return {};
    return {std::exchange(out_, nullptr)};
  }

  void begin(const std::vector<const DeviceBuffer*>& in) override {
    Communicator& comm = comm_for(c_.what);
    // Note [Checked all-reduces in the core]: the header goes with the data; compared at end.
    checked_ = c_.kind == kAllReduce && world_options().check_arguments && checks_in_plugin(comm);
    if (world_options().check_arguments && !checked_) {
      try {
        check_headers(comm, header_, c_.what, check_label_);
      } catch (...) {
        f_.release();  // the input hold_inputs kept
        throw;
      }
    }
    const uint64_t in_bytes = bytes_of(c_.in_shape, c_.dtype), out_bytes = bytes_of(c_.out_shape, c_.dtype);
    const rvl_dtype dt = abi_dtype(c_.dtype);
    const auto& api = comm.plugin().api();
    void* s = nullptr;
    void* r = nullptr;
    if (direct_) {
      try {
        const rvl_backend_api& dev = plugin_->api();
        const int32_t index = c_.device.index();
        static const std::string synchronize = "synchronize", buffer_address = "buffer_address";  // once
        plugin_->check(dev.synchronize(index), synchronize);  // kernels writing the input are over
        // Note [Cached collective operations]: the last input's address while that buffer lives
        // (a buffer's address does not change; the weak pointer tells a new buffer at the same
        // memory from the old one).
        rvl_buffer* const in_handle = in[0]->handle();  // ends a pending operation writing it
        if (const std::shared_ptr<DeviceBuffer> last = last_in_.lock(); last && last.get() == in[0]) {
          s = last_in_address_;
        } else {
          plugin_->check(dev.buffer_address(in_handle, &s), buffer_address);
          if (!f_.direct.empty() && f_.direct[0].get() == in[0]) last_in_ = f_.direct[0], last_in_address_ = s;
        }
        // Note [Cached collective operations]: the last result's buffer again once nothing else
        // holds it (its tensor was dropped); the plugin writes every byte of it. Not while a Jit
        // records: it counts the buffers its function keeps alive, and this one would count.
        const bool recording = active_recorder() != nullptr;
        if (!recording && spare_out_ && spare_out_.use_count() == 1) {
          out_ = spare_out_;
          r = spare_address_;  // its address does not change
        } else {
          out_ = std::make_shared<DeviceBuffer>(plugin_, index, out_bytes);
          plugin_->check(dev.buffer_address(out_->handle(), &r), buffer_address);
        }
        if (!recording && out_bytes <= kReusedOutputBytes) spare_out_ = out_, spare_address_ = r;
        else spare_out_.reset();
        f_.direct.push_back(out_);
      } catch (...) {
        out_.reset();
        f_.release();
        throw;
      }
    } else if (c_.kind == kBroadcast) {  // in place; only the root's values are read
      f_.send = f_.recv = comm.staging(0, in_bytes);
      if (comm.rank() == c_.root) in[0]->read(f_.send->data(), in_bytes);
    } else {
      // Out of place: Open MPI 4.1's MPI_IN_PLACE all-reduce of 64 MiB took 1.7 s where the same
      // bytes out of place took 0.16 s (2 ranks, bench/distributed).
      f_.send = comm.staging(0, in_bytes);
      in[0]->read(f_.send->data(), in_bytes);
      f_.recv = comm.staging(1, out_bytes);
    }
    if (!direct_) s = f_.send->data(), r = f_.recv->data();
    const uint64_t n = bytes_of(c_.in_shape, c_.dtype) / dtype_size(c_.dtype);
    const int size = comm.size();
    try {
      f_.start(comm, [&](rvl_coll_request** q) -> rvl_coll_error* {
        if (checked_) {
          f_.headers = comm.header_staging(sizeof(ArgHeader) * static_cast<size_t>(size));
          return api.all_reduce_checked(comm.handle(), &header_, sizeof header_, f_.headers->data(), s, r, n, dt, c_.op, q);
        }
        switch (c_.kind) {
          case kAllReduce: return api.all_reduce(comm.handle(), s, r, n, dt, c_.op, q);
          case kAllGather: return api.all_gather(comm.handle(), s, r, n, dt, q);
          case kReduceScatter: return api.reduce_scatter(comm.handle(), s, r, n / static_cast<uint64_t>(size), dt, c_.op, q);
          default: return api.broadcast(comm.handle(), s, n, dt, c_.root, q);
        }
      }, c_.what);
    } catch (...) {
      out_.reset();
      f_.release();  // nothing in flight: the buffers go back
      throw;
    }
  }

  void end(const std::vector<DeviceBuffer*>& out) override {
    try {
      f_.wait(c_.what);
      if (checked_) {
        Communicator& comm = comm_for(c_.what);
        compare_headers(reinterpret_cast<const ArgHeader*>(f_.headers->data()), comm.size(), comm.rank(), c_.what);
      }
    } catch (...) {
      f_.release();
      throw;
    }
    // Direct: the plugin wrote out[0] itself (it is the buffer take_outputs handed over).
    if (!direct_) out[0]->write(f_.recv->data(), bytes_of(c_.out_shape, c_.dtype));
    f_.release();
  }
  void cancel() noexcept override {
    out_.reset();
    f_.cancel();
  }
  bool progress() noexcept override { return f_.progress(); }

  // Note [One eager collective, begun and ended in place]: begin and end on `in` (the input's own
  // contiguous buffer), the result as a realized leaf; what begin_host_op and end_host_op do for
  // one input outside a Jit capture, under one lock and without their argument lists.
  Tensor run_now(std::shared_ptr<DeviceBuffer> in) {
    thread_local std::vector<std::shared_ptr<DeviceBuffer>> held(1);
    thread_local std::vector<const DeviceBuffer*> ins(1);
    thread_local std::vector<DeviceBuffer*> outs(1);
    held[0] = std::move(in);
    ins[0] = held[0].get();
    try {
      hold_inputs(held);
      begin(ins);  // gives up by itself if it throws
    } catch (...) {
      held[0].reset();
      throw;
    }
    held[0].reset();  // the operation holds what it still reads (hold_inputs)
    std::shared_ptr<DeviceBuffer> out = std::exchange(out_, nullptr);  // direct: made in begin
    if (!out) {
      try {
        out = std::make_shared<DeviceBuffer>(plugin_, c_.device.index(), bytes_of(c_.out_shape, c_.dtype));
      } catch (...) {
        cancel();  // could not even allocate: the operation must not stay in flight
        throw;
      }
    }
    outs[0] = out.get();
    end(outs);
    outs[0] = nullptr;
    return Tensor(make_buffer_node(c_.dtype, c_.out_shape, c_.device, std::move(out)));
  }

 private:
  CollectiveCall c_;
  ArgHeader header_;
  std::string check_label_;
  std::shared_ptr<LoadedPlugin> plugin_;  // of c_.device
  bool direct_ = false;                   // Note [Host memory without staging]
  bool checked_ = false;                  // Note [Checked all-reduces in the core]
  std::shared_ptr<DeviceBuffer> out_;     // direct: made in begin, until take_outputs
  std::shared_ptr<DeviceBuffer> spare_out_;  // the last result's, if small (Note [Cached collective operations])
  void* spare_address_ = nullptr;            // ...and its host address
  std::weak_ptr<DeviceBuffer> last_in_;      // direct: the last input's buffer...
  void* last_in_address_ = nullptr;          // ...and its host address
  static constexpr uint64_t kReusedOutputBytes = 64 << 10;
  InFlight f_;
};

class BucketOp final : public HostOp {
 public:
  explicit BucketOp(BucketCall c) : c_(std::move(c)) {
    for (const Shape& s : c_.shapes) total_ += bytes_of(s, c_.dtype);
    label_ = "DataParallel bucket all_reduce (" + std::to_string(total_) + " bytes)";  // once, not per start and wait
    if (c_.direct) plugin_ = Runtime::get().plugin_for(c_.device);
  }
  std::string label() const override { return label_; }
  void hold_inputs(const std::vector<std::shared_ptr<DeviceBuffer>>& in) override {
    if (c_.direct && in.size() == 1) f_.direct = in;  // sent from its own buffer
  }
  std::vector<std::shared_ptr<DeviceBuffer>> take_outputs() override {
    if (!out_) return {};
    return {std::exchange(out_, nullptr)};
  }

  void begin(const std::vector<const DeviceBuffer*>& in) override {
    Communicator& comm = comm_for("DataParallel::reduce_gradients");
    try {
      if (c_.check)
        check_headers(comm, c_.header, "DataParallel::reduce_gradients", "DataParallel::reduce_gradients (argument check)");
      void* send = nullptr;
      void* recv = nullptr;
      if (c_.direct) {  // Note [Host memory without staging]: the result straight into one packed output
        const rvl_backend_api& dev = plugin_->api();
        const int32_t index = c_.device.index();
        plugin_->check(dev.synchronize(index), "synchronize");  // kernels writing the inputs are over
        if (in.size() == 1) plugin_->check(dev.buffer_address(in[0]->handle(), &send), "buffer_address");
        out_ = std::make_shared<DeviceBuffer>(plugin_, index, total_);
        plugin_->check(dev.buffer_address(out_->handle(), &recv), "buffer_address");
        f_.direct.push_back(out_);
      } else {
        f_.recv = comm.staging(c_.slot + 1, total_);
        recv = f_.recv->data();
      }
      if (send == nullptr) {
        f_.send = comm.staging(c_.slot, total_);
        send = f_.send->data();
        size_t at = 0;
        for (size_t i = 0; i < in.size(); ++i) {  // packed back to back: one message per bucket
          const uint64_t b = bytes_of(c_.shapes[i], c_.dtype);
          in[i]->read(f_.send->data() + at, b);
          at += b;
        }
      }
      const uint64_t n = total_ / dtype_size(c_.dtype);
      const auto& api = comm.plugin().api();
      f_.start(comm, [&](rvl_coll_request** q) {
        return api.all_reduce(comm.handle(), send, recv, n, abi_dtype(c_.dtype), RVL_COLL_SUM, q);
      }, label_);
    } catch (...) {
      out_.reset();
      f_.release();  // nothing in flight: the buffers go back
      throw;
    }
  }

  void end(const std::vector<DeviceBuffer*>& out) override {
    try {
      f_.wait(label_);
    } catch (...) {
      f_.release();
      throw;
    }
    if (!c_.direct) {  // direct: the plugin wrote the packed output (take_outputs) itself
      size_t at = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        const uint64_t b = bytes_of(c_.shapes[i], c_.dtype);
        out[i]->write(f_.recv->data() + at, b);
        at += b;
      }
    }
    f_.release();
  }
  void cancel() noexcept override {
    out_.reset();
    f_.cancel();
  }
  bool progress() noexcept override { return f_.progress(); }

 private:
  BucketCall c_;
  uint64_t total_ = 0;
  std::string label_;
  std::shared_ptr<LoadedPlugin> plugin_;  // of c_.device, when direct
  std::shared_ptr<DeviceBuffer> out_;     // direct: made in begin, until take_outputs
  InFlight f_;
};

}  // namespace

// Note [Cached collective operations]
// An eager all-reduce made a new CollectiveOp per call (its strings, shapes and check label), and
// a new result buffer: with the argument check in the data's messages (Note [Checked all-reduces
// in the core], staging.cpp) these allocations were most of what the core still added to a 4 KiB
// all-reduce on 2 ranks (docs/distributed.md, "The small path's fixed cost, 2026-12-07"). So the
// eager path keeps its last few operations and reuses one whose collective, op, root, dtype,
// shapes, device and device plugin (a Runtime::reset loads new ones) are the call's, when
// nothing else holds it: a Jit capture that recorded it keeps it for its replays (its use count
// then says so, and a new one is made), and an operation in flight is held by its caller. A
// reused operation checks its arguments again on every call, as a new one would: the cache saves
// allocations, never a check. Its result buffer (up to 64 KiB) is reused the same way, once the
// tensor of the last result is gone. The cache is process-wide under a lock (one thread's
// operations are not another's), never freed (finalize runs from a static destructor), and
// small: kCachedOps operations.
namespace {
constexpr size_t kCachedOps = 8;
struct OpCache {
  std::mutex mutex;
  std::shared_ptr<CollectiveOp> ops[kCachedOps];
  size_t next = 0;  // the slot the next new operation takes when none is idle
};
OpCache& op_cache() {
  static auto* cache = new OpCache();  // never freed, by design (see above)
  return *cache;
}
}  // namespace

std::shared_ptr<HostOp> find_collective_op(const CollectiveKey& key) {
  const std::shared_ptr<LoadedPlugin> plugin = Runtime::get().plugin_for(key.device);
  OpCache& cache = op_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (const auto& op : cache.ops)
    if (op && op.use_count() == 1 && op->is_for(key, plugin.get())) return op;
  return nullptr;
}

void keep_collective_op(const std::shared_ptr<HostOp>& op) {
  auto c = std::dynamic_pointer_cast<CollectiveOp>(op);
  if (!c) return;
  OpCache& cache = op_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (auto& slot : cache.ops)  // an empty slot first, else the oldest
    if (!slot) {
      slot = std::move(c);
      return;
    }
  cache.ops[cache.next] = std::move(c);
  cache.next = (cache.next + 1) % kCachedOps;
}

bool host_addressable(const Device& device) {
  return !forced_staging() && Runtime::get().plugin_for(device)->caps(device.index()).host_addressable;
}

std::shared_ptr<HostOp> make_collective_op(CollectiveCall call) { return std::make_shared<CollectiveOp>(std::move(call)); }

// Note [One eager collective, begun and ended in place]
// The generic eager path (begin_host_op, end_host_op: any number of inputs, views, constants,
// a Jit recorder) cost a 4 KiB all-reduce about eight allocations of argument lists and views
// (resolve() builds a StridedView, two vectors, each time it is asked: three times per call) and
// three takings of the buffer lock: most of what the core still added to the plugin's time
// (docs/distributed.md, "The small path's fixed cost"). The common case, one input that is its
// own contiguous buffer (a leaf from upload or a kernel's realized result, as the Jit's inputs
// are read in jit.cpp) outside a capture, takes this path instead: one lock, the buffer itself,
// reused lists. Anything else (a view, a constant, a lazy input, a sharded one, a capture that
// must record both phases) takes the generic path. The operation's steps and errors are the
// same: begin checks the arguments on every call; a pending input buffer (a bucket's result)
// ends its operation when begin reads it.
Tensor run_collective_now(const std::shared_ptr<HostOp>& op, const Tensor& t) {
  if (active_recorder() != nullptr) return {};
  const NodePtr& n = t.node();
  const NodeKind k = n->kind;
  const bool own = k == NodeKind::Buffer || k == NodeKind::Copy || k == NodeKind::Alu || k == NodeKind::Reduce ||
                   k == NodeKind::Transfer;
  if (!own) return {};
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());  // Note [Threads] in graph/node.hpp
  if (!n->buffer) return {};
  return static_cast<CollectiveOp&>(*op).run_now(n->buffer);  // make_collective_op makes only these
}
std::shared_ptr<HostOp> make_bucket_op(BucketCall call) { return std::make_shared<BucketOp>(std::move(call)); }

}  // namespace ravel::detail
