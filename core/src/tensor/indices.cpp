// Index tensors checked against their bound before an op uses them (Note [Checked indices]).
#include "graph/engine.hpp"
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

// Note [Checked indices]
// gather, one_hot, nn::Embedding and nn::cross_entropy are composites: they compare the index
// tensor with a range of its bound (gather is sum_c x[.., c, ..] * (index == c)), so no kernel ever
// addresses memory with a user's value, and an index outside the bound used to select nothing
// (zeros, silently). The check therefore lives in the core, before the graph is built: the index
// tensor is realized and its values compared with the bound, and the first one outside it is
// named with its position. Backends never receive user indices, so they need no way to report
// one (docs/abi.md, "Indices"). What it costs, per call:
//  - realizing the index: nothing runs when it is host data already uploaded (the usual case:
//    batches of token ids), else the kernels that compute it, which the op needed anyway;
//  - up to kHostCheck elements: one download of the index and a scan on the host (makemore:
//    192 and 64 int64 values per step, a few microseconds);
//  - more: a min and a max reduction on the index's device and two scalars read back; the whole
//    index is read only when those fall outside the bound (to name the offender) or an ignored
//    value is present (cross_entropy's ignore_index).
// It also makes these ops synchronous in their index (the op waits for the index's value), which
// is what PyTorch's CPU kernels do; on a GPU PyTorch instead asserts inside the kernel.
namespace {
constexpr int64_t kHostCheck = int64_t{1} << 16;

std::string position_str(int64_t flat, const Shape& shape) {
  Shape pos(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    pos[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(pos);
}
}  // namespace

void check_index_bounds(const Tensor& index, int64_t bound, const std::string& op, const std::string& what,
                        std::optional<int64_t> ignore) {
  check_defined(index, op.c_str());
  RAVEL_CHECK(!is_float(index.dtype()), DTypeError, op, " expects an integer index tensor, got ",
              dtype_name(index.dtype()));
  if (index.numel() == 0) return;
  const Tensor i64 = index.cast(DType::I64);
  if (index.numel() > kHostCheck) {
    Tensor lo = i64.min(), hi = i64.max();
    realize({lo, hi});
    if (lo.item<int64_t>() >= 0 && hi.item<int64_t>() < bound) return;
  }
  const std::vector<int64_t> values = i64.to_vector<int64_t>();
  for (size_t k = 0; k < values.size(); ++k) {
    const int64_t v = values[k];
    if ((v >= 0 && v < bound) || (ignore && v == *ignore)) continue;
    throw IndexError(concat(op, ": index ", v, " at position ", position_str(static_cast<int64_t>(k), index.shape()),
                            " is out of bounds for ", what, " (expected 0 <= index < ", bound,
                            ignore ? concat(", or the ignored value ", *ignore) : std::string(), ")"));
  }
}

}  // namespace ravel
