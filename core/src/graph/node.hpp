// Node — one vertex of the lazy graph.
//
// A Tensor is a handle to a Node. Nodes are immutable once made, except for `buffer`, which
// realization fills in (and a collective's result, given its derivative rule before anyone else
// holds it: Note [A derivative on the result's own node] in tensor/custom_vjp.hpp). Kinds:
//   Buffer  data uploaded from the host or a host operation's result; always has `buffer`
//   Const   a scalar (shape []), e.g. the 2 in x * 2; broadcast with a View
//   View    srcs[0] (the *base*, never itself a View) seen through `view`, the composition of
//           all movement ops since the base. `parent` is the node the last movement op was
//           applied to and `move` that op, so autodiff can transpose each op (Note [Views]).
//   Copy    srcs[0] (a View) copied into a fresh contiguous buffer; inserted where a chain of
//           views cannot be one view (Note [Views])
//   Alu     an elementwise primitive over srcs of identical shape (broadcasting has already
//           been made explicit with expand views)
//   Reduce  a reduction of srcs[0] over `axes`, keeping them as size 1
//   Transfer srcs[0] (contiguous, on another device) copied to `device` (Tensor::to)
//   Multi   a tensor spread over several devices (Note [Sharded tensors] in
//           tensor/sharded.hpp): srcs are its per-device parts, in mesh order; `shard_axis` is
//           the axis they split (-1: each part is a full replica, or a partial result when
//           `shard_partial` is set) and `shard_bounds` where each part starts and ends along it. Never scheduled: every op on a Multi node is built
//           part by part, so kernels only ever see single-device nodes.
// Every node except Buffer is hash-consed (Note [Hash-consing] in node.cpp): building the same op
// on the same sources twice yields the same node, so shared work is computed once.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "graph/ops.hpp"
#include "ravel/device.hpp"
#include "ravel/dtype.hpp"
#include "graph/view.hpp"

namespace ravel::detail {

// Device memory holding a realized node. Opaque to the layers before the runtime, which defines
// it (runtime/device_buffer.hpp); they reach its contents through the Engine (graph/engine.hpp).
class DeviceBuffer;
class Node;
using NodePtr = std::shared_ptr<Node>;

enum class NodeKind : uint8_t { Buffer, Const, View, Copy, Alu, Reduce, Transfer, Multi };

// The movement op that made a View node. Identity and StopGradient are unique (never
// hash-consed) aliases: Identity marks a function argument for autodiff (so grad(f)(x, x)
// can tell its arguments apart); StopGradient blocks gradients; Custom is a composite's result
// whose gradient comes from its own rule (Note [Custom derivatives] in tensor/custom_vjp.hpp).
enum class MoveOp : uint8_t { Reshape, Permute, Expand, Pad, Shrink, Flip, Subsample, Identity, StopGradient, Custom };

// A derivative rule for MoveOp::Custom aliases; defined by the tensor layer (tensor/custom_vjp.hpp).
struct CustomRule;

// The value of a Const node, exact for every dtype.
struct Scalar {
  double f = 0;   // float dtypes
  int64_t i = 0;  // bool and integer dtypes
  bool operator==(const Scalar&) const = default;
};

class Node {
 public:
  NodeKind kind = NodeKind::Const;
  DType dtype = DType::F32;
  Shape shape;
  Device device;
  std::vector<NodePtr> srcs;
  AluOp alu = AluOp::ADD;        // Alu only
  ReduceOp reduce = ReduceOp::Sum;  // Reduce only
  uint32_t axes = 0;             // Reduce only: bit d set means axis d is reduced
  StridedView view;              // View only
  NodePtr parent;                // View only: the input of the last movement op
  MoveOp move = MoveOp::Reshape;  // View only
  std::vector<int64_t> move_args;  // View only: the op's arguments (shape, order, widths, ...)
  bool interned = true;          // false for Buffer nodes and unique aliases
  bool detached = false;         // made under a NoGradGuard: gradients do not flow through it
  // View only: some node between this view and its base is an alias or detached, so the chain
  // must be kept even where the composed view is the identity (derived from parent at creation).
  bool marked_chain = false;
  bool requires_grad = false;    // Buffer leaves only (Tensor::requires_grad_)
  NodePtr grad;                  // Buffer leaves only: the gradient backward() accumulated
  // MoveOp::Custom, or a Buffer node that is a collective's result (Note [A derivative on the
  // result's own node] in tensor/custom_vjp.hpp): the nodes the gradient flows to, and the rule
  // that computes it.
  std::vector<NodePtr> custom_inputs;
  std::shared_ptr<const CustomRule> custom_rule;
  Scalar value;                  // Const only
  int32_t shard_axis = -1;       // Multi only: the split axis, -1 when the parts are replicas
  // Multi only, when split: n + 1 offsets along shard_axis; part i holds [b[i], b[i + 1]).
  std::vector<int64_t> shard_bounds;
  // Multi only: -1, or (shard_axis -1) the ravel::CollectiveOp by which the parts combine into
  // the value: partial results (Note [Partial results] in tensor/sharded.hpp).
  int8_t shard_partial = -1;
  // Multi, partial only: the bundle of replicas combined() built from it, kept so that every
  // consumer that needs the value shares one all-reduce (set once, under buffer_mutex()).
  NodePtr shard_combined;
  // Multi only: the one-device tensor Tensor::shard split into these parts, whose parts are then
  // exactly parts_in(source, layout) (Note [Inputs split inside the step], runtime/jit_sharded.hpp).
  NodePtr shard_source;
  uint64_t id = 0;               // unique, increasing: creation order
  size_t hash = 0;

  // Realized storage: a contiguous buffer of `shape` and `dtype` on `device`.
  std::shared_ptr<DeviceBuffer> buffer;

  int64_t numel() const;
  // Moves, never copies: intern() moves its prototype into the shared node. (A declared
  // destructor suppresses the implicit move, and every node was then copied, six allocations
  // and the sources' reference counts each.) A node is an identity, so copying is not offered.
  Node() = default;
  Node(Node&&) = default;
  Node& operator=(Node&&) = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();
};

// Returns the canonical node equal to `proto` (kind, dtype, shape, device, srcs, op, axes, view,
// value), creating it if none is alive. `proto.kind` must not be Buffer.
NodePtr intern(Node&& proto);
// Registers `proto` as a new node that is never shared (not hash-consed).
NodePtr make_unique_node(Node&& proto);
// A new (never shared) Buffer node around `buffer`.
NodePtr make_buffer_node(DType dtype, Shape shape, Device device, std::shared_ptr<DeviceBuffer> buffer);
// The node a kernel reads when it reads `n` (n's base if n is a View, else n itself), and the
// view it reads it through.
struct Source {
  NodePtr base;
  StridedView view;
};
Source resolve(const NodePtr& n);
// True when a kernel reading `n` reads its base at the same index: n is not a View, or it is an
// identity View (an alias: contiguous over a base of n's own shape). Only then may the base be
// evaluated inside the reading kernel instead of loaded (Note [Fusion]).
bool reads_base_in_place(const Node& n);

// Note [Threads]
// Nodes are shared between threads: hash-consing hands two threads that build the same
// expression the same node, so an intermediate one thread realizes may be a node another thread
// is scheduling. Node::buffer is the only mutable realization state, and this one lock guards
// it: realization (schedule and execute) holds it from start to end, and so do uploads and
// downloads (which use the device's default stream, which the ABI says the host serialises).
// It is recursive so that code holding it may call back into the engine. Node creation does not
// take it (the intern table has its own mutex), so building graphs stays concurrent; what is
// serialised is the work on devices, each kernel of which uses every core of its backend.
std::recursive_mutex& buffer_mutex();

// How many nodes are alive (tests use it to check that graphs are freed).
size_t live_node_count();

}  // namespace ravel::detail
