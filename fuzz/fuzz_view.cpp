// Fuzzes the view algebra (core/src/graph/view.hpp, Note [Views]): a random chain of movement
// ops is applied both to a StridedView and to a naive map that lists, for every element of the
// current shape, which base element it is (or -1 for padding). After every op the two must agree
// on every index, and the view's invariants must hold. A reshape that cannot compose (nullopt) is
// what Tensor::reshape turns into a copy: both sides then continue from a materialized base.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "graph/view.hpp"

using ravel::detail::Range;
using ravel::detail::Shape;
using ravel::detail::StridedView;

namespace {

constexpr int64_t kMaxNumel = 256;  // small shapes reach every composition rule, and run fast
constexpr size_t kMaxRank = 6;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

[[noreturn]] void fail(const char* what, const StridedView& v) {
  std::fprintf(stderr, "view fuzzer: %s\nview: %s\n", what, v.str().c_str());
  std::abort();
}

// Calls f(multi-index, flat row-major position) for every index of `shape`.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  const int64_t n = numel(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(idx, flat);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

int64_t flat_of(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

struct Model {
  std::vector<int64_t> base;   // base buffer element -> original element id (-1: zero padding)
  Shape shape;                 // current shape
  std::vector<int64_t> elems;  // current elements (row-major) -> original id or -1

  // New elements for `new_shape`, each taken from the old index `src` gives (-1: padding).
  template <class Src>
  void remap(const Shape& new_shape, Src&& src) {
    std::vector<int64_t> out(static_cast<size_t>(numel(new_shape)));
    std::vector<int64_t> old(shape.size());
    for_each_index(new_shape, [&](const std::vector<int64_t>& j, int64_t flat) {
      out[flat] = src(j, old) ? elems[flat_of(old, shape)] : -1;
    });
    shape = new_shape;
    elems = std::move(out);
  }
};

void check(const StridedView& v, const Model& m) {
  if (v.shape != m.shape) fail("shape differs from the naive model", v);
  if (v.strides.size() != v.shape.size()) fail("strides rank != shape rank", v);
  if (v.mask) {
    if (v.mask->size() != v.shape.size()) fail("mask rank != shape rank", v);
    bool all_full = true;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      auto [lo, hi] = (*v.mask)[d];
      if (lo >= hi && !(lo == 0 && hi == 0)) fail("empty valid range not stored as (0, 0)", v);
      if (lo < 0 || hi > v.shape[d] || lo > hi) fail("valid range outside the axis", v);
      all_full = all_full && lo == 0 && hi == v.shape[d];
    }
    if (all_full) fail("mask present although every element is valid", v);
  }
  const int64_t base_n = static_cast<int64_t>(m.base.size());
  for_each_index(v.shape, [&](const std::vector<int64_t>& i, int64_t flat) {
    bool valid = true;
    int64_t addr = v.offset;
    for (size_t d = 0; d < i.size(); ++d) {
      auto [lo, hi] = v.valid(static_cast<int64_t>(d));
      valid = valid && lo <= i[d] && i[d] < hi;
      addr += i[d] * v.strides[d];
    }
    int64_t got = -1;
    if (valid) {
      if (addr < 0 || addr >= base_n) fail("a valid element addresses outside the base buffer", v);
      got = m.base[addr];
    }
    if (got != m.elems[flat]) fail("element differs from the naive index map", v);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  Shape shape(fdp.ConsumeIntegralInRange<size_t>(0, 4));
  for (auto& d : shape) d = fdp.ConsumeIntegralInRange<int64_t>(0, 5);
  Model m;
  m.shape = shape;
  m.elems.resize(static_cast<size_t>(numel(shape)));
  std::iota(m.elems.begin(), m.elems.end(), 0);
  m.base = m.elems;
  StridedView v = StridedView::contiguous(shape);
  check(v, m);
  for (int step = 0; step < 12 && fdp.remaining_bytes() > 0; ++step) {
    const size_t rank = v.shape.size();
    switch (fdp.ConsumeIntegralInRange<int>(0, 6)) {
      case 0: {  // reshape into random factors of numel (with 1s), or a zero-size shape
        const int64_t n = numel(v.shape);
        Shape s;
        int64_t left = n;
        const size_t r = fdp.ConsumeIntegralInRange<size_t>(0, kMaxRank);
        for (size_t d = 0; d + 1 < r; ++d) {
          int64_t f = fdp.ConsumeIntegralInRange<int64_t>(1, 6);
          if (left == 0) s.push_back(f - 1);  // a zero-size tensor takes any shape with a 0
          else if (left % f == 0) s.push_back(f), left /= f;
          else s.push_back(1);
        }
        if (r > 0) s.push_back(left);
        if (numel(s) != n) break;  // rank 0 needs n == 1; zero-size needs a 0 somewhere
        if (auto nv = v.reshape(s)) {
          v = *nv;
        } else {  // Tensor::reshape copies: the current elements become a new contiguous base
          m.base = m.elems;
          v = StridedView::contiguous(s);
        }
        m.shape = s;  // row-major order is unchanged by a reshape
        break;
      }
      case 1: {  // permute
        std::vector<int64_t> order(rank);
        std::iota(order.begin(), order.end(), 0);
        for (size_t d = rank; d > 1; --d) std::swap(order[d - 1], order[fdp.ConsumeIntegralInRange<size_t>(0, d - 1)]);
        Shape s(rank);
        for (size_t d = 0; d < rank; ++d) s[d] = v.shape[order[d]];
        v = v.permute(order);
        m.remap(s, [&](const auto& j, auto& old) {
          for (size_t d = 0; d < rank; ++d) old[order[d]] = j[d];
          return true;
        });
        break;
      }
      case 2: {  // expand size-1 axes
        Shape s = v.shape;
        for (auto& d : s)
          if (d == 1) d = fdp.ConsumeIntegralInRange<int64_t>(0, 4);
        if (numel(s) > kMaxNumel) break;
        v = v.expand(s);
        m.remap(s, [&](const auto& j, auto& old) {
          for (size_t d = 0; d < rank; ++d) old[d] = m.shape[d] == s[d] ? j[d] : 0;
          return true;
        });
        break;
      }
      case 3: {  // pad
        std::vector<Range> w(rank);
        Shape s = v.shape;
        for (size_t d = 0; d < rank; ++d) {
          w[d] = {fdp.ConsumeIntegralInRange<int64_t>(0, 2), fdp.ConsumeIntegralInRange<int64_t>(0, 2)};
          s[d] += w[d].first + w[d].second;
        }
        if (numel(s) > kMaxNumel) break;
        v = v.pad(w);
        m.remap(s, [&](const auto& j, auto& old) {
          for (size_t d = 0; d < rank; ++d) {
            old[d] = j[d] - w[d].first;
            if (old[d] < 0 || old[d] >= m.shape[d]) return false;
          }
          return true;
        });
        break;
      }
      case 4: {  // shrink
        std::vector<Range> r(rank);
        Shape s(rank);
        for (size_t d = 0; d < rank; ++d) {
          int64_t lo = fdp.ConsumeIntegralInRange<int64_t>(0, v.shape[d]);
          int64_t hi = fdp.ConsumeIntegralInRange<int64_t>(lo, v.shape[d]);
          r[d] = {lo, hi};
          s[d] = hi - lo;
        }
        v = v.shrink(r);
        m.remap(s, [&](const auto& j, auto& old) {
          for (size_t d = 0; d < rank; ++d) old[d] = j[d] + r[d].first;
          return true;
        });
        break;
      }
      case 5: {  // flip
        std::vector<bool> axes(rank);
        for (size_t d = 0; d < rank; ++d) axes[d] = fdp.ConsumeBool();
        Shape s = v.shape;
        v = v.flip(axes);
        m.remap(s, [&](const auto& j, auto& old) {
          for (size_t d = 0; d < rank; ++d) old[d] = axes[d] ? s[d] - 1 - j[d] : j[d];
          return true;
        });
        break;
      }
      case 6: {  // subsample: every step-th element of one axis
        if (rank == 0) break;
        const size_t axis = fdp.ConsumeIntegralInRange<size_t>(0, rank - 1);
        const int64_t st = fdp.ConsumeIntegralInRange<int64_t>(1, 4);
        Shape s = v.shape;
        s[axis] = (s[axis] + st - 1) / st;
        v = v.subsample(static_cast<int64_t>(axis), st);
        m.remap(s, [&](const auto& j, auto& old) {
          for (size_t d = 0; d < rank; ++d) old[d] = d == axis ? j[d] * st : j[d];
          return true;
        });
        break;
      }
    }
    check(v, m);
  }
  return 0;
}
