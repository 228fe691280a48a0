// Shape composites: tril/triu, tile, repeat_interleave, split/chunk, roll, meshgrid. Views where
// the result is one (split, chunk, meshgrid, and the expand of tile and repeat_interleave),
// slices joined by concatenate where it is not (roll, repeat_interleave with a list), and a mask
// from two aranges for tril/triu; their derivatives come from the movement ops' rules.
#include <numeric>

#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

namespace {
// The lower (tril) or upper (triu) triangle over the last two axes: column - row <= or >= k.
Tensor triangle_of(const Tensor& x, int64_t k, bool lower, const char* op) {
  check_defined(x, op);
  RAVEL_CHECK(x.ndim() >= 2, ShapeError, op, " expects a tensor of at least 2 dimensions (the matrix axes last), got shape ",
              shape_str(x.shape()));
  const int64_t n = x.size(-2), m = x.size(-1);
  Tensor rows = Tensor::arange(0, double(n), 1, DType::I64, x.device()).reshape({n, 1});
  Tensor cols = Tensor::arange(0, double(m), 1, DType::I64, x.device()).reshape({1, m});
  Tensor diag = cols.sub(rows), kk = Tensor::full({}, double(k), DType::I64, x.device());
  Tensor keep = lower ? diag.le(kk) : diag.ge(kk);
  return Tensor::where(keep, x, Tensor::zeros({}, x.dtype(), x.device()));
}
}  // namespace

Tensor Tensor::tril(int64_t diagonal) const { return triangle_of(*this, diagonal, true, "tril"); }
Tensor Tensor::triu(int64_t diagonal) const { return triangle_of(*this, diagonal, false, "triu"); }

// Note [Tile and repeat as expand]
// tile puts a new axis of size r before each axis and expands it: [1, s0, 1, s1] -> [r0, s0, r1,
// s1] -> reshape [r0 s0, r1 s1] (the whole tensor repeated); repeat_interleave puts it after the
// axis: [s, 1] -> [s, r] -> [s r] (each element repeated). The expand is a stride-0 view; the
// reshape that merges it materialises the result once, and the derivative sums over the new axis.
Tensor Tensor::tile(const std::vector<int64_t>& reps) const {
  check_defined(*this, "tile");
  for (int64_t r : reps)
    RAVEL_CHECK(r >= 0, ValueError, "tile: repetitions must be >= 0, got ", r, " in reps of length ", reps.size());
  const size_t d = std::max(reps.size(), size_t(ndim()));
  Shape s(d - size_t(ndim()), 1);
  s.insert(s.end(), shape().begin(), shape().end());
  std::vector<int64_t> r(d - reps.size(), 1);
  r.insert(r.end(), reps.begin(), reps.end());
  Shape interleaved, expanded, out;
  for (size_t a = 0; a < d; ++a) {
    interleaved.push_back(1), interleaved.push_back(s[a]);
    expanded.push_back(r[a]), expanded.push_back(s[a]);
    out.push_back(r[a] * s[a]);
  }
  return reshape(interleaved).expand(expanded).reshape(out);
}

Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> axis) const {
  check_defined(*this, "repeat_interleave");
  RAVEL_CHECK(repeats >= 0, ValueError, "repeat_interleave: repeats must be >= 0, got ", repeats);
  if (!axis) return flatten().repeat_interleave(repeats, int64_t{0});
  const int64_t a = normalize_axis(*axis, ndim(), "repeat_interleave");
  Shape expanded = shape(), out = shape();
  expanded.insert(expanded.begin() + a + 1, repeats);
  out[a] *= repeats;
  return unsqueeze(a + 1).expand(expanded).reshape(out);
}

// A count per index of the axis (or one count for all, as torch): index i's slice expanded to
// repeats[i] copies, the pieces concatenated in order.
Tensor Tensor::repeat_interleave(const std::vector<int64_t>& repeats, std::optional<int64_t> axis) const {
  check_defined(*this, "repeat_interleave");
  if (!axis) return flatten().repeat_interleave(repeats, int64_t{0});
  const int64_t a = normalize_axis(*axis, ndim(), "repeat_interleave");
  if (repeats.size() == 1) return repeat_interleave(repeats[0], a);
  RAVEL_CHECK(int64_t(repeats.size()) == size(a), ShapeError, "repeat_interleave: ", repeats.size(),
              " repeats for axis ", a, " of size ", size(a), " (expected one per index, or a single count)");
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < repeats.size(); ++i) {
    RAVEL_CHECK(repeats[i] >= 0, ValueError, "repeat_interleave: repeats must be >= 0, got ", repeats[i], " at index ", i);
    if (repeats[i] == 0) continue;
    Shape s = shape();
    s[a] = repeats[i];
    pieces.push_back(slice(a, int64_t(i), int64_t(i) + 1).expand(s));
  }
  if (pieces.empty()) return slice(a, 0, 0);
  return pieces.size() == 1 ? pieces[0] : concatenate(pieces, a);
}

std::vector<Tensor> Tensor::split(int64_t size_, int64_t axis) const {
  check_defined(*this, "split");
  RAVEL_CHECK(size_ > 0, ValueError, "split: the size of the parts must be > 0, got ", size_);
  const int64_t a = normalize_axis(axis, ndim(), "split"), d = size(a);
  std::vector<Tensor> parts;
  for (int64_t start = 0; start < d; start += size_) parts.push_back(slice(a, start, std::min(start + size_, d)));
  if (parts.empty()) parts.push_back(*this);  // an empty axis: one empty part (torch)
  return parts;
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int64_t axis) const {
  check_defined(*this, "split");
  const int64_t a = normalize_axis(axis, ndim(), "split"), d = size(a);
  int64_t total = 0;
  for (int64_t s : sizes) {
    RAVEL_CHECK(s >= 0, ValueError, "split: sizes must be >= 0, got ", s);
    total += s;
  }
  RAVEL_CHECK(total == d, ShapeError, "split: sizes sum to ", total, " but axis ", a, " of shape ", shape_str(shape()),
              " has size ", d, " (expected sizes summing to ", d, ")");
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    parts.push_back(slice(a, start, start + s));
    start += s;
  }
  return parts;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t axis) const {
  check_defined(*this, "chunk");
  RAVEL_CHECK(chunks > 0, ValueError, "chunk: the number of chunks must be > 0, got ", chunks);
  const int64_t d = size(normalize_axis(axis, ndim(), "chunk"));
  return split(std::max<int64_t>((d + chunks - 1) / chunks, 1), axis);
}

Tensor Tensor::roll(int64_t shift, std::optional<int64_t> axis) const {
  check_defined(*this, "roll");
  if (!axis) return flatten().roll(std::vector<int64_t>{shift}, std::vector<int64_t>{0}).reshape(shape());
  return roll(std::vector<int64_t>{shift}, std::vector<int64_t>{*axis});
}

// Shifting by s along an axis of size d is the last s elements followed by the first d - s.
Tensor Tensor::roll(const std::vector<int64_t>& shifts, const std::vector<int64_t>& axes) const {
  check_defined(*this, "roll");
  RAVEL_CHECK(shifts.size() == axes.size() && !shifts.empty(), ValueError, "roll: ", shifts.size(), " shifts for ",
              axes.size(), " axes (expected one shift per axis, at least one)");
  Tensor y = *this;
  for (size_t i = 0; i < shifts.size(); ++i) {
    const int64_t a = normalize_axis(axes[i], ndim(), "roll"), d = size(a);
    if (d == 0) continue;
    const int64_t s = ((shifts[i] % d) + d) % d;
    if (s == 0) continue;
    y = concatenate({y.slice(a, d - s, d), y.slice(a, 0, d - s)}, a);
  }
  return y;
}

std::vector<Tensor> Tensor::meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  RAVEL_CHECK(indexing == "ij" || indexing == "xy", ValueError, "meshgrid: indexing must be \"ij\" or \"xy\", got \"",
              indexing, "\"");
  if (tensors.empty()) return {};
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_defined(tensors[i], "meshgrid");
    RAVEL_CHECK(tensors[i].ndim() <= 1, ShapeError, "meshgrid: input ", i, " has shape ", shape_str(tensors[i].shape()),
                " (expected 0-d or 1-d tensors)");
    RAVEL_CHECK(tensors[i].dtype() == tensors[0].dtype(), DTypeError, "meshgrid: input ", i, " is ",
                dtype_name(tensors[i].dtype()), " but input 0 is ", dtype_name(tensors[0].dtype()),
                " (expected one dtype, as torch.meshgrid)");
  }
  // The axis each input varies along: its position, with the first two swapped for "xy".
  const size_t n = tensors.size();
  std::vector<size_t> axis_of(n);
  std::iota(axis_of.begin(), axis_of.end(), size_t{0});
  if (indexing == "xy" && n >= 2) std::swap(axis_of[0], axis_of[1]);
  Shape grid(n);
  for (size_t i = 0; i < n; ++i) grid[axis_of[i]] = tensors[i].numel();
  std::vector<Tensor> out;
  for (size_t i = 0; i < n; ++i) {
    Shape s(n, 1);
    s[axis_of[i]] = tensors[i].numel();
    out.push_back(tensors[i].reshape(s).expand(grid));
  }
  return out;
}

}  // namespace ravel
