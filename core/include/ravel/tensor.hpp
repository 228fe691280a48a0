// ravel::Tensor — a lazy, immutable handle to a node of the graph.
//
// Every op returns a new Tensor and only adds a node; nothing runs until realize(), to_vector(),
// item() or printing. Movement ops (reshape, permute, expand, pad, shrink, flip, slice, ...)
// never copy: they compose a view (see Note [Views] in core/src/graph/view.hpp). Binary and
// ternary ops broadcast with NumPy's rules and promote dtypes as docs/dtypes.md says.
//
// Threads (docs/threads.md): independent tensors on different threads are safe; realizing or
// reading a shared tensor from several threads is safe and computes it once; backward() from
// several threads into shared leaves accumulates. Mutating one tensor concurrently (assign,
// requires_grad_, optimizer steps on the same parameters) is the caller's race. Realizations
// are serialised process-wide; each kernel uses every core of its backend.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ravel/backend.h"  // RVL_OP_* codes for Tensor::apply
#include "ravel/device.hpp"
#include "ravel/dtype.hpp"
#include "ravel/error.hpp"
#include "ravel/sharding.hpp"

namespace ravel {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[3, 4]"

// A set of axes; negative axes count from the end. An empty list ({} or Axes()) is no axes, as
// NumPy's axis=(); every axis is spelled Axes::every() (or ravel::all_axes), the default of the
// reductions, flip and squeeze.
class Axes {
 public:
  Axes() = default;
  static Axes every() {
    Axes a;
    a.all_ = true;
    return a;
  }
  Axes(int64_t axis) : axes_{axis}, all_(false) {}  // NOLINT: implicit, so sum(1) works
  Axes(std::initializer_list<int64_t> axes) : axes_(axes), all_(false) {}
  Axes(std::vector<int64_t> axes) : axes_(std::move(axes)), all_(false) {}  // NOLINT
  bool all() const { return all_; }
  const std::vector<int64_t>& list() const { return axes_; }

 private:
  std::vector<int64_t> axes_;
  bool all_ = false;
};
inline const Axes all_axes = Axes::every();

// Python's slice(start, stop, step); missing bounds default as in Python (negative steps too).
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};

struct PrintOptions {
  int precision = 8;       // significant digits of floats
  bool show_meta = false;  // append "shape=[..], dtype=.., device=.."
};

namespace detail { class Node; }

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor; every op on it throws ValueError
  bool defined() const { return node_ != nullptr; }

  // ---- creation -------------------------------------------------------------------------
  // Row-major data with the given shape (data.size() must equal the product of shape).
  template <class T>
  static Tensor from_vector(const std::vector<T>& data, Shape shape, std::optional<Device> dev = {});
  static Tensor from_data(const void* data, DType dtype, Shape shape, std::optional<Device> dev = {});
  static Tensor scalar(double value, DType dtype = DType::F32, std::optional<Device> dev = {});
  static Tensor full(Shape shape, double value, DType dtype = DType::F32, std::optional<Device> dev = {});
  static Tensor zeros(Shape shape, DType dtype = DType::F32, std::optional<Device> dev = {});
  static Tensor ones(Shape shape, DType dtype = DType::F32, std::optional<Device> dev = {});
  static Tensor full_like(const Tensor& t, double value);
  static Tensor zeros_like(const Tensor& t);
  static Tensor ones_like(const Tensor& t);
  // [start, stop) with step, like numpy.arange; dtype I64 if all arguments are integral
  // unless given.
  static Tensor arange(double start, double stop, double step = 1.0, std::optional<DType> dtype = {},
                       std::optional<Device> dev = {});
  static Tensor arange(int64_t stop);
  // n evenly spaced values from start to stop inclusive, like numpy.linspace.
  static Tensor linspace(double start, double stop, int64_t n, DType dtype = DType::F32,
                         std::optional<Device> dev = {});
  // Identity matrix, built from movement ops (pad, reshape, expand, shrink) as in Tensorken.
  static Tensor eye(int64_t n, DType dtype = DType::F32, std::optional<Device> dev = {});
  // numpy.eye(n, m, k): n x m, ones on the k-th diagonal (k > 0 above, k < 0 below).
  static Tensor eye(int64_t n, int64_t m, int64_t k = 0, DType dtype = DType::F32, std::optional<Device> dev = {});
  // Uniform [0, 1) and standard normal numbers from Threefry-2x32 (docs/random.md): the same
  // seed gives the same numbers on every device.
  static Tensor rand(Shape shape, uint64_t seed, DType dtype = DType::F32, std::optional<Device> dev = {});
  static Tensor randn(Shape shape, uint64_t seed, DType dtype = DType::F32, std::optional<Device> dev = {});

  // ---- descriptor -------------------------------------------------------------------------
  DType dtype() const;
  const Shape& shape() const;
  int64_t ndim() const;
  int64_t numel() const;
  int64_t size(int64_t axis) const;  // negative axes count from the end
  Device device() const;
  // The view of this tensor onto its base buffer: strides in elements (0 and negative allowed),
  // offset in elements, and whether any element is padding.
  std::vector<int64_t> strides() const;
  int64_t offset() const;
  bool is_contiguous() const;  // strides row-major, offset 0, no padding

  // ---- movement (zero-copy views) ---------------------------------------------------------
  Tensor reshape(Shape shape) const;         // one -1 entry is inferred; like numpy.reshape
  Tensor permute(std::vector<int64_t> order) const;  // like numpy.transpose(x, order)
  Tensor transpose(int64_t a = -2, int64_t b = -1) const;  // swap two axes
  Tensor expand(Shape shape) const;          // broadcast size-1 axes; like numpy.broadcast_to
  // Zero padding: one (before, after) pair per axis, both >= 0; like numpy.pad.
  Tensor pad(std::vector<std::pair<int64_t, int64_t>> widths) const;
  // numpy.pad(mode="constant", constant_values=value): padding filled with `value`.
  Tensor pad(std::vector<std::pair<int64_t, int64_t>> widths, double value) const;
  // Keep [lo, hi) of each axis; like x[lo0:hi0, lo1:hi1, ...].
  Tensor shrink(std::vector<std::pair<int64_t, int64_t>> ranges) const;
  Tensor flip(Axes axes = Axes::every()) const;         // like numpy.flip
  Tensor slice(std::vector<Slice> slices) const;  // one Slice per leading axis; like x[a:b:c, ...]
  Tensor slice(int64_t axis, std::optional<int64_t> start, std::optional<int64_t> stop,
               int64_t step = 1) const;
  Tensor at(int64_t index) const;            // x[i]: drops axis 0 (negative i counts from end)
  Tensor select(int64_t axis, int64_t index) const;  // drops `axis`
  Tensor squeeze(Axes axes = Axes::every()) const;      // drop size-1 axes (all of them by default)
  Tensor unsqueeze(int64_t axis) const;      // insert a size-1 axis
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor contiguous() const;                 // a copy with row-major strides, if not already
  // The same values on `device` (a graph node: the copy runs when a consumer is realized);
  // itself if already there. Like torch.Tensor.to(device). DeviceError for an unknown device.
  Tensor to(const Device& device) const;

  // ---- many devices (ravel/sharding.hpp, docs/sharding.md) ------------------------------------
  // This tensor split along `axis` over `devices` (distinct, at least one), as jax.device_put
  // with a NamedSharding or tinygrad's Tensor.shard: every later op runs part by part. Sizes
  // that do not divide are split as numpy.array_split. A sharded tensor is re-split (the core
  // moves what has to move). DeviceError for an unknown or repeated device.
  Tensor shard(const std::vector<Device>& devices, int64_t axis = 0) const;
  // The whole tensor on every device of `devices` (parameters of data-parallel training).
  Tensor replicate(const std::vector<Device>& devices) const;
  // How this tensor is spread over devices; empty for a tensor on one device. device() of a
  // sharded tensor is the first device of its mesh; to(device) gathers it there.
  std::optional<Sharding> sharding() const;
  // Its per-device parts in mesh order (each a tensor on one device); {*this} when not sharded.
  std::vector<Tensor> shards() const;

  // ---- elementwise primitives -------------------------------------------------------------
  // Any elementwise primitive of the op table (RVL_OP_LIST in <ravel/backend.h>) by its ABI
  // code: apply(RVL_OP_SQRT) is sqrt(), apply(RVL_OP_ADD, o) is add(o). A new primitive's method
  // is one inline line here (docs/ops.md). ValueError if the op is not an elementwise one of
  // that arity; DTypeError if it does not accept the dtype (float-only ops promote ints to f32).
  Tensor apply(int32_t op) const;
  Tensor apply(int32_t op, const Tensor& other) const;
  Tensor neg() const;
  Tensor recip() const;
  Tensor sqrt() const;
  Tensor exp2() const;
  Tensor log2() const;
  Tensor sin() const;
  Tensor trunc() const;
  Tensor cast(DType dtype) const;
  // Binary primitives, broadcasting and promoting.
  Tensor add(const Tensor& o) const;
  Tensor mul(const Tensor& o) const;
  Tensor maximum(const Tensor& o) const;
  Tensor mod(const Tensor& o) const;   // C semantics: sign of the dividend; x % 0 == 0 for ints
  Tensor idiv(const Tensor& o) const;  // truncating division; x / 0 == 0 for ints
  Tensor lt(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  Tensor logical_and(const Tensor& o) const;  // bool and integer dtypes (bitwise for ints)
  Tensor logical_or(const Tensor& o) const;
  Tensor logical_xor(const Tensor& o) const;
  static Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

  // ---- elementwise composites ---------------------------------------------------------------
  Tensor sub(const Tensor& o) const;
  Tensor div(const Tensor& o) const;   // true division (ints promote to f32)
  Tensor pow(const Tensor& o) const;
  // x ** exponent with the scalar's dtype rules of docs/dtypes.md (an integral exponent keeps an
  // integer dtype, a non-integral one gives f32); a negative integral exponent on an integer
  // tensor throws ValueError (NumPy, PyTorch).
  Tensor pow(double exponent) const;
  Tensor minimum(const Tensor& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor le(const Tensor& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor eq(const Tensor& o) const;
  Tensor logical_not() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor abs() const;
  Tensor square() const;

  // ---- more elementwise and shape composites (docs/ops.md, "Composite operators") -------------
  // Built from the primitives and views above, so they run on every backend and are
  // differentiable to any order; PyTorch's semantics (ONNX's where PyTorch has none).
  // Rounding: integer and bool tensors come back unchanged; NaN, infinities and signed zeros are
  // kept; the derivative is 0 everywhere (as torch).
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;  // half to even (torch.round, numpy.round): round(2.5) == 2
  Tensor sign() const;   // -1, 0 or 1 in this dtype; NaN for NaN (NumPy, JAX; torch gives 0, pytorch#41245)
  // torch.clamp: min(max(x, min), max), so every element is `max` where min > max; a NaN in x or in
  // a bound gives NaN. The derivative passes to x where min <= x <= max, to min where x < min <
  // max, to max where x > max or max < min (torch's clamp_backward). A missing bound (nullopt, an
  // undefined tensor) is no bound; ValueError when both are missing.
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  Tensor clamp(const Tensor& min, const Tensor& max) const;
  Tensor clip(std::optional<double> min, std::optional<double> max) const { return clamp(min, max); }
  Tensor clip(const Tensor& min, const Tensor& max) const { return clamp(min, max); }
  // Floor modulo, Python's %: the result has the sign of the divisor (torch.remainder), beside
  // mod()'s C semantics; x remainder 0 is NaN for floats and 0 for integers (as mod).
  Tensor remainder(const Tensor& o) const;
  Tensor remainder(double o) const;
  // Special functions (float; integers compute in f32). Accuracy in docs/ops.md.
  Tensor erf() const;
  Tensor expm1() const;  // e^x - 1, accurate near 0
  Tensor log1p() const;  // log(1 + x), accurate near 0
  Tensor asin() const;
  Tensor acos() const;
  Tensor atan() const;
  Tensor atan2(const Tensor& x) const;  // atan2(this, x): the angle of the point (x, this), as std::atan2
  Tensor sinh() const;
  Tensor cosh() const;
  Tensor asinh() const;
  Tensor acosh() const;
  Tensor atanh() const;
  // Shape: torch.tril / torch.triu over the last two axes (ndim >= 2): keeps the elements with
  // column - row <= diagonal (tril) or >= diagonal (triu), zeros elsewhere.
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  // torch.tile / numpy.tile: reps shorter than ndim is padded with leading 1s, longer adds axes.
  Tensor tile(const std::vector<int64_t>& reps) const;
  // torch.repeat_interleave: each element `repeats` times along `axis` (of the flattened tensor
  // when no axis); a list gives each index of the axis its own count (one per index).
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> axis = {}) const;
  Tensor repeat_interleave(const std::vector<int64_t>& repeats, std::optional<int64_t> axis = {}) const;
  // torch.split: views of `size` elements along axis (the last one smaller), or of the given
  // sizes (which must sum to the axis' size). split({2}) is the list form.
  std::vector<Tensor> split(int64_t size, int64_t axis = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int64_t axis = 0) const;
  std::vector<Tensor> split(std::initializer_list<int64_t> sizes, int64_t axis = 0) const {
    return split(std::vector<int64_t>(sizes), axis);
  }
  // torch.chunk: ceil(size / chunks) elements per view, so there may be fewer than `chunks`.
  std::vector<Tensor> chunk(int64_t chunks, int64_t axis = 0) const;
  // torch.roll: elements shifted by `shifts[i]` along `axes[i]` (wrapping around); with no axes,
  // over the flattened tensor, then reshaped back.
  Tensor roll(int64_t shift, std::optional<int64_t> axis = {}) const;
  Tensor roll(const std::vector<int64_t>& shifts, const std::vector<int64_t>& axes) const;
  // torch.meshgrid: one tensor per input (1-D or 0-d), each expanded to the grid's shape;
  // indexing "ij" (matrix, the first input varies along axis 0) or "xy" (Cartesian: the first
  // two axes swapped, as numpy.meshgrid's default). Expanded views, not copies.
  static std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing = "ij");

  // ---- reductions (keepdim keeps reduced axes as size 1) ----------------------------------
  Tensor sum(Axes axes = Axes::every(), bool keepdim = false) const;   // bool sums as i64, like NumPy
  Tensor max(Axes axes = Axes::every(), bool keepdim = false) const;
  Tensor min(Axes axes = Axes::every(), bool keepdim = false) const;
  Tensor prod(Axes axes = Axes::every(), bool keepdim = false) const;
  Tensor mean(Axes axes = Axes::every(), bool keepdim = false) const;
  Tensor var(Axes axes = Axes::every(), bool keepdim = false, int64_t correction = 1) const;
  Tensor logsumexp(Axes axes = Axes::every(), bool keepdim = false) const;
  Tensor softmax(int64_t axis = -1) const;
  Tensor log_softmax(int64_t axis = -1) const;
  // Index of the first maximum (minimum) over `axis` (over the flattened tensor if none), NaN
  // counting as the maximum and as the minimum (NumPy, PyTorch). `dtype` is the index dtype:
  // i64 (the default), i32 or u8; DTypeError for another dtype or one too small for the axis.
  Tensor argmax(std::optional<int64_t> axis = {}, bool keepdim = false, DType dtype = DType::I64) const;
  Tensor argmin(std::optional<int64_t> axis = {}, bool keepdim = false, DType dtype = DType::I64) const;
  Tensor cumsum(int64_t axis = 0) const;

  // ---- linear algebra, indexing, joining ------------------------------------------------------
  // NumPy/PyTorch matmul: 1-D operands are promoted and the added axis removed again; batch
  // axes broadcast: (3,4,1,2) @ (1,2,3) -> (3,4,1,3).
  Tensor matmul(const Tensor& o) const;
  Tensor dot(const Tensor& o) const;  // 1-D inner product (like numpy.dot for vectors)
  // An integer tensor -> `dtype` (any; f32 by default) with a new last axis of num_classes,
  // like torch.nn.functional.one_hot. IndexError naming the first value outside
  // [0, num_classes) and its position (Note [Checked indices]: realizes this tensor).
  Tensor one_hot(int64_t num_classes, DType dtype = DType::F32) const;
  // Like torch.gather; IndexError for an index outside [0, size of `axis`) (realizes `index`).
  Tensor gather(int64_t axis, const Tensor& index) const;

  // ---- scatter, indexing and sorting (docs/ops.md, "Indexing, scatter and sorting") ----------
  // Composites of comparisons, selections and reductions: differentiable to any order and run by
  // every backend. Index tensors are integer; an index outside its bound is an IndexError naming
  // op, value, position, axis and size (realizes the index, as gather does). The scatters cost
  // index.numel() x size(axis) fused comparisons and refuse (ValueError) above 2^31 of them;
  // index_select, index_put, and scatters whose index is broadcast over the other axes, on
  // float tensors, are one GEMM of the one-hot rows instead.
  //
  // torch.Tensor.scatter: a copy of this tensor with out[.., index[.., j, ..], ..] = src[.., j, ..]
  // along `axis`; index has this tensor's rank and is no larger than src on any axis, nor than
  // this tensor on any other axis. A position named several times takes the value of the last
  // j that names it (PyTorch leaves which undefined). src is cast to this tensor's dtype.
  Tensor scatter(int64_t axis, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t axis, const Tensor& index, double value) const;  // src = value everywhere
  // torch.Tensor.scatter_add: repeated positions accumulate.
  Tensor scatter_add(int64_t axis, const Tensor& index, const Tensor& src) const;
  // torch.Tensor.scatter_reduce with reduce "sum", "prod", "mean", "amax" or "amin"; with
  // include_self the value already there takes part, else positions that receive something
  // forget it (untouched positions keep it either way). Integer "mean" rounds down (PyTorch).
  Tensor scatter_reduce(int64_t axis, const Tensor& index, const Tensor& src, const std::string& reduce,
                        bool include_self = true) const;
  // torch.index_select: the entries index[i] (a 1-D integer tensor, 0 <= index < size) of `axis`.
  Tensor index_select(int64_t axis, const Tensor& index) const;
  // torch.Tensor.index_put: a copy with self[indices[0], .., indices[k-1]] = values (or +=
  // with accumulate). The k <= ndim index tensors broadcast together to a shape B and index the
  // first k axes; negative indices count from the end; values broadcast to B + shape[k:]. A
  // position named several times without accumulate takes the value of the last one in
  // row-major order of B (PyTorch leaves which undefined).
  Tensor index_put(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false) const;
  // numpy.take_along_axis(self, indices, axis): indices has this tensor's rank and broadcasts
  // with it on every other axis; negative indices count from the end (NumPy). No axis: this
  // tensor is flattened and indices must be 1-D.
  Tensor take_along_axis(const Tensor& indices, std::optional<int64_t> axis) const;
  // torch.sort(stable=True): (values, indices as i64) along `axis`; equal values keep their
  // order. NaN is ordered after +inf, as NumPy does: last ascending, first descending (which
  // is also PyTorch's NaN-is-largest). A bitonic network: O(n log^2 n) compare-selects.
  std::pair<Tensor, Tensor> sort(int64_t axis = -1, bool descending = false) const;
  Tensor argsort(int64_t axis = -1, bool descending = false) const;  // sort's indices
  // torch.topk: the k largest (smallest) values along `axis` and their indices, in sorted order
  // (also when sorted = false, which PyTorch leaves unspecified); ties keep the lower index.
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t axis = -1, bool largest = true, bool sorted = true) const;

  // Joining (the linear algebra, indexing and joining section, continued).
  static Tensor concatenate(const std::vector<Tensor>& ts, int64_t axis = 0);
  static Tensor stack(const std::vector<Tensor>& ts, int64_t axis = 0);

  // ---- autograd, PyTorch style (ravel/autodiff.hpp has the functional transforms) ----------
  // Marks this tensor as a leaf whose gradient backward() accumulates. A tensor that is not
  // already a leaf is realized and becomes one (its data is shared, not copied).
  Tensor& requires_grad_(bool on = true);
  bool requires_grad() const;  // a leaf that requires grad, or computed from one
  // Accumulates d(this)/d(leaf) * cotangent into leaf.grad() for every leaf that requires grad
  // (cotangent defaults to 1 for a one-element tensor), and realizes those gradients.
  // `also`: tensors realized in the same pass (a metric, BatchNorm's running statistics), so the
  // forward pass they share with the gradients runs once, as Optimizer::step's `also`.
  void backward(const Tensor& cotangent = {}, const std::vector<Tensor>& also = {}) const;
  Tensor grad() const;        // undefined until backward() reached this leaf
  void zero_grad();           // forget the accumulated gradient
  Tensor detach() const;      // same values, no gradient (stop_gradient)
  // Replaces this tensor's value by `value` (same shape; cast to this dtype), realized, keeping
  // requires_grad: how optimizers update parameters without growing the graph. An undefined
  // tensor takes value's shape and dtype.
  Tensor& assign(const Tensor& value);

  // ---- realization --------------------------------------------------------------------------
  // Runs every kernel this tensor needs; later reads reuse the result.
  const Tensor& realize() const;
  bool is_realized() const;
  template <class T>
  std::vector<T> to_vector() const;  // row-major; casts when T's dtype differs
  template <class T>
  T item() const;  // the value of a one-element tensor
  std::string to_string(PrintOptions opts = {}) const;

  // Internal: the graph node (for the scheduler, autograd and tests of the graph).
  const std::shared_ptr<detail::Node>& node() const { return node_; }
  explicit Tensor(std::shared_ptr<detail::Node> node) : node_(std::move(node)) {}

 private:
  void read_into(void* dst, DType as) const;
  Tensor& assign_sharded(const Tensor& value);
  const detail::Node& n() const;
  std::shared_ptr<detail::Node> node_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Operators, with scalars converted to a tensor of the other operand's kind (docs/dtypes.md).
Tensor operator-(const Tensor& a);
#define RAVEL_DECLARE_BINARY_OPERATOR(op)                 \
  Tensor operator op(const Tensor& a, const Tensor& b);   \
  Tensor operator op(const Tensor& a, double b);          \
  Tensor operator op(double a, const Tensor& b);
RAVEL_DECLARE_BINARY_OPERATOR(+)
RAVEL_DECLARE_BINARY_OPERATOR(-)
RAVEL_DECLARE_BINARY_OPERATOR(*)
RAVEL_DECLARE_BINARY_OPERATOR(/)
RAVEL_DECLARE_BINARY_OPERATOR(<)
RAVEL_DECLARE_BINARY_OPERATOR(>)
RAVEL_DECLARE_BINARY_OPERATOR(<=)
RAVEL_DECLARE_BINARY_OPERATOR(>=)
RAVEL_DECLARE_BINARY_OPERATOR(==)
RAVEL_DECLARE_BINARY_OPERATOR(!=)
#undef RAVEL_DECLARE_BINARY_OPERATOR

// Realizes several tensors in one scheduling pass (shared work is computed once).
void realize(const std::vector<Tensor>& tensors);

// Throws IndexError unless every element of the integer tensor `index` is in [0, bound) or
// equals `ignore`, naming the first that is not (value and position), the bound, and `what` is
// indexed, after `op`: "gather: index 5 at position [1, 0] is out of bounds for axis 1 (size 3)
// (expected 0 <= index < 3)". Realizes `index`. gather, one_hot, nn::Embedding and
// nn::cross_entropy call it (Note [Checked indices] in core/src/tensor/indices.cpp; docs/abi.md).
void check_index_bounds(const Tensor& index, int64_t bound, const std::string& op, const std::string& what,
                        std::optional<int64_t> ignore = {});

// The shape two shapes broadcast to under NumPy's rules; ShapeError naming both otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace ravel
