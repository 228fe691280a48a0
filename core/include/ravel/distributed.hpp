// ravel::distributed — several processes ("ranks") computing together: collectives on tensors
// and data-parallel training (PyTorch's torch.distributed + DDP, over communicator plugins:
// sdk/include/ravel/collectives.h). docs/distributed.md has the guide.
//
//   ravel::distributed::init();   // under mpirun: joins its world; otherwise a world of one
//   Tensor total = ravel::distributed::all_reduce(x);                  // the sum over the ranks
//   ravel::distributed::DataParallel ddp(model.parameters());          // broadcast from rank 0
//   auto grads = ddp.reduce_gradients(local_grads, 1.0 / world_size()); // averaged, in buckets
//
// Every collective must be called by every rank in the same order with matching tensors (same
// dtype and shape; reduce_scatter: the same leading size). Before each one the ranks exchange a
// small header (kind, dtype, shape), so a mismatch is the same typed error (ShapeError,
// DTypeError, ValueError) on every rank, naming both ranks' arguments, instead of a hang or
// garbage. Every wait on another rank has a deadline (Options::timeout, RAVEL_DIST_TIMEOUT_S):
// a rank that never arrives is a TimeoutError, one whose process is gone a PeerLostError naming
// it. After either the world is broken (every later collective fails at once) and the process
// should exit with a non-zero status; finalize() then skips MPI_Finalize, which would wait for
// the lost rank (docs/distributed.md, "Exit after a failure").
//
// A collective realizes its input when called, stages it through host memory, communicates and
// writes the result to the tensor's device. Inside a ravel::Jit it is captured as a host
// operation between the kernels and runs again, with the new values and the argument check, at
// every replay: a whole data-parallel step is one capture (docs/distributed.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "ravel/error.hpp"
#include "ravel/tensor.hpp"

namespace ravel::distributed {

// Communication failed. rank() is this process's rank, peer() the rank to blame (-1: unknown).
class CommunicationError : public DeviceError {
 public:
  CommunicationError(const std::string& what, int rank, int peer) : DeviceError(what), rank_(rank), peer_(peer) {}
  int rank() const { return rank_; }
  int peer() const { return peer_; }

 private:
  int rank_, peer_;
};
// A deadline passed: a rank did not make the matching call in time.
class TimeoutError : public CommunicationError { using CommunicationError::CommunicationError; };
// A rank is known to be gone (its process no longer exists); peer() names it.
class PeerLostError : public CommunicationError { using CommunicationError::CommunicationError; };

enum class ReduceOp { Sum, Prod, Max, Min };  // bool: Sum/Max are or, Prod/Min and

struct Options {
  // Every wait on another rank (collectives, start-up, shut-down). RAVEL_DIST_TIMEOUT_S, else the
  // config's distributed.timeout_s, overrides the default but not a value set here explicitly.
  std::chrono::milliseconds timeout{60000};
  // Exchange a header (kind, dtype, shape) before each collective to catch mismatched calls
  // (replays of a Jit included).
  bool check_arguments = true;
  // A global-view (MeshTensor) program's entered cotangents are all-reduced in buckets of up to
  // this many bytes (DDP's first bucket's size), each begun as its cotangents are computed and
  // waited for at its first reader (docs/distributed.md; RAVEL_DIST_ENTER_BUCKET_BYTES overrides).
  size_t entered_bucket_bytes = size_t{1} << 20;
};

struct World {
  int rank = 0, size = 1;
  std::string communicator = "none";  // the plugin's name, "none" for a world of one
  std::string version;                // the plugin's version string
  std::string launcher;               // "mpirun (OMPI_COMM_WORLD_SIZE=2)", "" without one
  std::chrono::milliseconds timeout{60000};
};

// Joins the world a launcher set up (finding the communicator plugin in the runtime's plugin
// search paths), or makes a world of one when no launcher environment exists (no plugin is
// needed then). Idempotent: later calls return the same world. PluginError when a launcher is
// there but no communicator plugin could be loaded (naming each one found and why);
// CommunicationError/TimeoutError when joining fails.
const World& init(const Options& options = {});
bool initialized();
// The launcher environment found ("mpirun (OMPI_COMM_WORLD_SIZE=2)"), "" without one; joins
// nothing (ravel-info uses it).
std::string launcher();
int rank();        // init() if needed
int world_size();  // init() if needed
// Shuts the communicator down (the MPI plugin calls MPI_Finalize after a barrier under the
// deadline; not after a failure). Runs at exit on its own; explicit calls are for tests.
void finalize();

// The reduction of `t` over all ranks, on every rank (same shape, dtype and device as t).
Tensor all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
// Every rank's `t` concatenated along axis 0 in rank order ([size * n, ...]; a scalar gives [size]).
Tensor all_gather(const Tensor& t);
// `t`'s axis 0 (divisible by the world size) in size blocks; rank r gets the reduction of block r.
Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::Sum);
// Rank `root`'s `t` on every rank (every rank passes a tensor of the same shape and dtype).
Tensor broadcast(const Tensor& t, int root = 0);
// Returns once every rank has called it.
void barrier();

// A communicator plugin as ravel-info lists it.
struct CommunicatorRecord {
  std::string path, name, version, status;  // status: "ok", or why it was skipped
  bool loaded = false;     // the plugin loaded and passed the checks
  bool available = false;  // its probe found a launcher environment
  uint32_t abi_major = 0, abi_minor = 0;
};
// Every communicator plugin (libravel_comm_*.so) in the runtime's plugin search paths, loaded
// and probed but not started; a plugin that fails to load is listed with the reason.
std::vector<CommunicatorRecord> find_communicators();

// Data parallelism as PyTorch's DDP does it: the same model on every rank, parameters
// broadcast from rank 0 at the start, gradients reduced over the ranks in buckets of
// bucket_bytes (DDP's 25 MiB default). Each bucket's all-reduce is started as soon as the bucket
// is staged, so the staging of the next bucket overlaps it; the gradients themselves are computed
// before (Ravel's backward is one lazy graph, not a per-parameter hook: docs/distributed.md).
// reduce_gradients may be called inside a Jit (its buckets are replayed like the collectives).
struct DataParallelConfig {
  size_t bucket_bytes = size_t{25} << 20;
};
class DataParallel {
 public:
  using Config = DataParallelConfig;
  // Broadcasts every parameter from rank 0 (assign), so all ranks start equal.
  explicit DataParallel(std::vector<Tensor*> parameters, Config config = {});

  // sum over ranks of grads[i] * scale, for every i (any dtypes and shapes, the same on every
  // rank); scale 1 / world_size() averages. One header exchange checks all of them at once.
  std::vector<Tensor> reduce_gradients(const std::vector<Tensor>& grads, double scale) const;
  // Replaces each parameter's grad() by its average over the ranks (for use with nn optimizers).
  // After loss.backward() the gradients are realized already: only the buckets' packing overlaps
  // their all-reduces. backward() below overlaps the backward pass itself.
  void average_gradients();
  // loss.backward() for data parallelism, as DDP's hooked backward: the gradients of `loss` with
  // respect to the parameters, averaged over the ranks, added to each parameter's grad() (which
  // accumulates, as Tensor::backward does). Each bucket's all-reduce begins while the rest of the
  // backward pass runs (docs/distributed.md, "Buckets during the backward pass").
  void backward(const Tensor& loss);
  int buckets_last_call() const { return buckets_; }

 private:
  std::vector<Tensor*> params_;
  Config config_;
  mutable int buckets_ = 0;
};

// One mesh over ranks x local devices (JAX's multi-controller model): every rank runs the same
// program over its own local devices (RAVEL_TBB_DEVICES=2 gives two tbb_cpu devices), and the
// mesh's devices are the (rank, local device) pairs, rank-major. A tensor laid out on it is, on
// each rank, an ordinary tensor sharded (or replicated) over that rank's local devices; the ranks
// hold the other parts. Data parallelism over it:
//
//   distributed::Mesh mesh(local_devices);            // collective: every rank, same count
//   p.assign(mesh.replicate(p));                       // rank 0's values on every device
//   Tensor x = mesh.shard_batch(global_x);             // this rank's rows, split over its devices
//   Tensor loss = nn::cross_entropy(model(x), mesh.shard_batch(global_y)) * mesh.batch_share();
//   auto [l, g] = value_and_grad(...);                 // g: summed over local devices (docs/sharding.md)
//   g = mesh.all_reduce(g);                            // ... then over ranks: hierarchical all-reduce
//
// docs/distributed.md ("One mesh over ranks and local devices"). Tensors split *across* the
// ranks, with the core placing the collectives, are MeshTensors (shard() below, decision 69).
class MeshTensor;  // ravel/mesh_tensor.hpp (included at the end)
struct MeshDevice {
  int rank = 0;
  Device device;
};
class Mesh {
 public:
  // Collective (every rank calls it, in the same order as its other collectives): the ranks
  // exchange their local device counts, which must be equal (a ShapeError on every rank naming
  // both counts otherwise). Devices must be distinct (DeviceError otherwise).
  explicit Mesh(std::vector<Device> local_devices, DataParallelConfig config = {});
  int ranks() const { return ranks_; }
  int rank() const { return rank_; }
  const std::vector<Device>& local_devices() const { return local_; }
  int64_t size() const { return static_cast<int64_t>(ranks_) * static_cast<int64_t>(local_.size()); }
  std::vector<MeshDevice> devices() const;  // rank-major: (0, d0), (0, d1), (1, d0), ...
  std::string str() const;                  // "2 ranks x [tbb_cpu:0, tbb_cpu:1]"

  // This rank's rows of `global` (the whole batch, the same on every rank) split over its local
  // devices: rank r holds rows [r n / R, (r + 1) n / R) along `axis`. Every device of the mesh
  // gets the same number of rows: ShapeError naming the axis size and the mesh size otherwise.
  Tensor shard_batch(const Tensor& global, int64_t axis = 0) const;
  // The fraction of the global batch on this rank (1 / ranks): a loss that is a mean over this
  // rank's rows times it sums over the ranks to the global batch's mean.
  double batch_share() const { return 1.0 / ranks_; }
  // Rank 0's `t` on every local device of every rank (a broadcast over the ranks, then replicas).
  Tensor replicate(const Tensor& t) const;
  // The hierarchical all-reduce of gradients: each tensor is replicated over this rank's local
  // devices (or on one device) and already holds the sum over them, as autodiff gives for a
  // replicated parameter; the result is scale times the sum over the ranks, replicated over the
  // local devices. One replica per tensor crosses ranks, in DataParallel's buckets.
  std::vector<Tensor> all_reduce(const std::vector<Tensor>& local_sums, double scale = 1.0) const;

  // ---- the global view (ravel/mesh_tensor.hpp, decision 69) ----------------------------------
  // `global` (the same on every rank) split along `axis` across the ranks as numpy.array_split
  // splits it (sizes the ranks do not divide: the first ranks one longer), each rank's block over
  // its local devices (split the same way). No communication.
  MeshTensor shard(const Tensor& global, int64_t axis = 0) const;
  // Collective: each rank's `local` part is its block along `axis` (blocks may differ in size
  // along it). The ranks exchange their shapes: different ranks, dtypes, axes or sizes of the
  // other axes are the same ShapeError / DTypeError on every rank, naming both ranks' shapes.
  MeshTensor from_local_parts(const Tensor& local, int64_t axis = 0) const;
  // `t`, the same value on every rank (computed identically, or from replicate()), as a
  // replicated MeshTensor. Not checked and no communication.
  MeshTensor as_replicated(const Tensor& t) const;

 private:
  std::vector<Device> local_;
  int ranks_ = 1, rank_ = 0;
  DataParallel buckets_;
};

}  // namespace ravel::distributed

#include "ravel/mesh_tensor.hpp"  // Mesh::shard's result
