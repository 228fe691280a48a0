// Gradient checks of every movement op (reshape, permute, transpose, expand, pad, shrink, flip,
// slice with positive and negative steps, at, select, squeeze, unsqueeze, flatten, contiguous)
// and of chains of them, in f64, against central finite differences (gradcheck.hpp explains eps
// and the tolerance). Each op is checked alone (its gradient is a pure re-indexing) and followed
// by a nonlinearity (so the cotangent reaching the op is not just the random one).
#include "gradcheck.hpp"

using namespace adtest;

namespace {

using Unary = std::function<Tensor(const Tensor&)>;
using P = std::pair<int64_t, int64_t>;

struct MoveRow {
  std::string name;
  Shape in;
  Unary op;
};

const std::vector<MoveRow>& rows() {
  static const std::vector<MoveRow> r = {
      {"reshape [2,3,4] -> [6,4]", {2, 3, 4}, [](const Tensor& x) { return x.reshape({6, 4}); }},
      {"reshape [2,3,4] -> [4,-1]", {2, 3, 4}, [](const Tensor& x) { return x.reshape({4, -1}); }},
      {"reshape [2,3,4] -> [24]", {2, 3, 4}, [](const Tensor& x) { return x.reshape({24}); }},
      {"reshape [1] -> [] ", {1}, [](const Tensor& x) { return x.reshape({}); }},
      {"permute {2,0,1}", {2, 3, 4}, [](const Tensor& x) { return x.permute({2, 0, 1}); }},
      {"permute {1,0,2}", {2, 3, 4}, [](const Tensor& x) { return x.permute({1, 0, 2}); }},
      {"transpose()", {3, 4}, [](const Tensor& x) { return x.transpose(); }},
      {"transpose(0, 2)", {2, 3, 4}, [](const Tensor& x) { return x.transpose(0, 2); }},
      {"expand [3,1] -> [3,4]", {3, 1}, [](const Tensor& x) { return x.expand({3, 4}); }},
      {"expand [4] -> [2,3,4] (new axes)", {4}, [](const Tensor& x) { return x.expand({2, 3, 4}); }},
      {"expand [1,3,1] -> [2,3,4]", {1, 3, 1}, [](const Tensor& x) { return x.expand({2, 3, 4}); }},
      {"pad {(1,2),(0,1)}", {3, 4}, [](const Tensor& x) { return x.pad({P{1, 2}, P{0, 1}}); }},
      {"pad {(0,0),(3,0),(1,1)}", {2, 3, 4}, [](const Tensor& x) { return x.pad({P{0, 0}, P{3, 0}, P{1, 1}}); }},
      {"shrink {(1,3),(0,2)}", {3, 4}, [](const Tensor& x) { return x.shrink({P{1, 3}, P{0, 2}}); }},
      {"shrink {(0,2),(1,2),(1,4)}", {2, 3, 4}, [](const Tensor& x) { return x.shrink({P{0, 2}, P{1, 2}, P{1, 4}}); }},
      {"flip all", {2, 3, 4}, [](const Tensor& x) { return x.flip(); }},
      {"flip 1", {2, 3, 4}, [](const Tensor& x) { return x.flip(1); }},
      {"flip {0,-1}", {2, 3, 4}, [](const Tensor& x) { return x.flip(Axes({0, -1})); }},
      {"slice [1:5:2]", {7, 3}, [](const Tensor& x) { return x.slice(0, 1, 5, 2); }},
      {"slice [::3]", {7, 3}, [](const Tensor& x) { return x.slice(0, std::nullopt, std::nullopt, 3); }},
      {"slice [::-1]", {7, 3}, [](const Tensor& x) { return x.slice(0, std::nullopt, std::nullopt, -1); }},
      {"slice [::-2]", {7, 3}, [](const Tensor& x) { return x.slice(0, std::nullopt, std::nullopt, -2); }},
      {"slice [5:1:-3]", {7, 3}, [](const Tensor& x) { return x.slice(0, 5, 1, -3); }},
      {"slice [-2:] on axis 1", {3, 5}, [](const Tensor& x) { return x.slice(1, -2, std::nullopt); }},
      {"slice [1::2, ::-2]", {5, 6}, [](const Tensor& x) {
         return x.slice({ravel::Slice{1, std::nullopt, 2}, ravel::Slice{std::nullopt, std::nullopt, -2}});
       }},
      {"slice [::2, 1:3, ::-1]", {5, 4, 3}, [](const Tensor& x) {
         return x.slice({ravel::Slice{std::nullopt, std::nullopt, 2}, ravel::Slice{1, 3, 1},
                         ravel::Slice{std::nullopt, std::nullopt, -1}});
       }},
      {"at(1)", {3, 4}, [](const Tensor& x) { return x.at(1); }},
      {"at(-1)", {3, 4}, [](const Tensor& x) { return x.at(-1); }},
      {"select(1, 2)", {2, 3, 4}, [](const Tensor& x) { return x.select(1, 2); }},
      {"select(-1, 0)", {2, 3, 4}, [](const Tensor& x) { return x.select(-1, 0); }},
      {"squeeze()", {1, 3, 1, 4}, [](const Tensor& x) { return x.squeeze(); }},
      {"squeeze(2)", {1, 3, 1, 4}, [](const Tensor& x) { return x.squeeze(2); }},
      {"unsqueeze(0)", {3, 4}, [](const Tensor& x) { return x.unsqueeze(0); }},
      {"unsqueeze(-1)", {3, 4}, [](const Tensor& x) { return x.unsqueeze(-1); }},
      {"flatten()", {2, 3, 4}, [](const Tensor& x) { return x.flatten(); }},
      {"flatten(1)", {2, 3, 4}, [](const Tensor& x) { return x.flatten(1); }},
      {"flatten(0, 1)", {2, 3, 4}, [](const Tensor& x) { return x.flatten(0, 1); }},
      {"contiguous of a contiguous tensor", {3, 4}, [](const Tensor& x) { return x.contiguous(); }},
      {"contiguous of a transpose", {3, 4}, [](const Tensor& x) { return x.transpose().contiguous(); }},
      {"reshape of a transpose (a copy)", {3, 4}, [](const Tensor& x) { return x.transpose().reshape({2, 6}); }},
      {"reshape of a flip of a pad", {3, 4}, [](const Tensor& x) { return x.pad({P{1, 0}, P{0, 0}}).flip(0).reshape({16}); }},
      {"expand of a slice", {4, 1}, [](const Tensor& x) { return x.slice(0, 1, std::nullopt, 2).expand({2, 5}); }},
      {"pad of an expand", {1, 3}, [](const Tensor& x) { return x.expand({2, 3}).pad({P{1, 1}, P{2, 0}}); }},
      {"chain: permute, pad, flip, slice(-2), shrink, reshape", {2, 3, 4}, [](const Tensor& x) {
         return x.permute({2, 0, 1})
             .pad({P{1, 0}, P{0, 1}, P{2, 2}})
             .flip(Axes({0, 2}))
             .slice(2, std::nullopt, std::nullopt, -2)
             .shrink({P{0, 4}, P{1, 3}, P{0, 3}})
             .reshape({4, 6});
       }},
      // Movement ops whose composition is the identity view (the result has the input's layout).
      {"identity: flip().flip()", {3, 4}, [](const Tensor& x) { return x.flip().flip(); }},
      {"identity: transpose().transpose()", {3, 4}, [](const Tensor& x) { return x.transpose().transpose(); }},
      {"identity: permute {0,1}", {3, 4}, [](const Tensor& x) { return x.permute({0, 1}); }},
      {"identity: expand to the same shape", {3, 4}, [](const Tensor& x) { return x.expand({3, 4}); }},
      {"identity: pad with zero widths", {3, 4}, [](const Tensor& x) { return x.pad({P{0, 0}, P{0, 0}}); }},
      {"identity: shrink to the full range", {3, 4}, [](const Tensor& x) { return x.shrink({P{0, 3}, P{0, 4}}); }},
      {"identity: slice [::1]", {3, 4}, [](const Tensor& x) { return x.slice(0, std::nullopt, std::nullopt); }},
      {"identity: reshape to the same shape", {3, 4}, [](const Tensor& x) { return x.reshape({3, 4}); }},
      {"identity: unsqueeze then squeeze", {3, 4}, [](const Tensor& x) { return x.unsqueeze(1).squeeze(1); }},
      {"sum of overlapping slices of one input", {6}, [](const Tensor& x) {
         return x.shrink({P{0, 4}}) + x.shrink({P{2, 6}}) + x.slice(0, std::nullopt, std::nullopt, -1).shrink({P{1, 5}});
       }},
  };
  return r;
}

BOOST_AUTO_TEST_CASE(movement_ops) {
  uint64_t seed = 10;
  for (const auto& row : rows()) {
    ++seed;
    gradcheck1(row.name, row.op, normal(row.in, seed), seed);
  }
}

BOOST_AUTO_TEST_CASE(movement_ops_then_nonlinear) {
  uint64_t seed = 500;
  for (const auto& row : rows()) {
    ++seed;
    auto op = row.op;
    gradcheck1("sin(" + row.name + ") * 2 + op^2", [op](const Tensor& x) {
      Tensor y = op(x);
      return y.sin() * 2.0 + y * y;
    }, normal(row.in, seed), seed);
    gradcheck1("exp(x) then " + row.name + ", summed", [op](const Tensor& x) { return op(x.exp()).sum(); },
               normal(row.in, seed + 1000), seed);
  }
}

}  // namespace
