// The oneTBB plugin's evaluator on broadcast operands (plugins/tbb_cpu/evaluator.cpp, Note
// [Row-invariant loads]) and its batched dot products (gemm_small.cpp, Note [Batched dot
// products]), through the public API, against naive loops on the host.
//
// Row-invariant loads: an operand broadcast along every outer axis (a bias [C] read as [R, C])
// is filled once per scratch and blocks are a whole number of rows. The shapes below put the row
// length below, at and above the evaluator's block (1024 elements for short programs), make the
// last block partial, fuse axes (a [B, C] operand over [A, B, C]), read the row through negative
// and non-unit strides, load it twice in one program, use every element size (u8, i32, f32,
// f64; bool is excluded from the path and checked too), and put it in a contraction epilogue
// whose rows are longer than a block (blocks that start inside a row take the ordinary load).
// One value per row (x * c[:, None]: stride 0 along the row, read by fill_per_row on two-axis
// spaces) is checked on the same shapes, with negative and non-unit strides and stored bools, and
// (rows longer than a block) as one value per block (Note [One value per block]). CMake runs this also with
// RAVEL_TBB_SIMD=portable and with forced parallelism (RAVEL_TBB_INLINE_WORK=0).
#include <boost/test/unit_test.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Shape;
using ravel::Tensor;

namespace {

std::vector<double> values(int64_t n, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<double>((s >> 33) % 201) - 100.0;  // small integers: exact in every dtype
  }
  return v;
}

template <class T>
Tensor tensor(const std::vector<double>& v, Shape shape) {
  return Tensor::from_vector<T>(std::vector<T>(v.begin(), v.end()), shape);
}

template <class T>
void check(const std::string& what, const Tensor& got, const std::vector<double>& want) {
  const std::vector<T> g = got.to_vector<T>();
  BOOST_TEST_REQUIRE(g.size() == want.size(), what);
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (static_cast<double>(g[i]) != static_cast<T>(want[i])) {
      if (bad++ < 3) BOOST_ERROR(what << ": element " << i << " = " << +g[i] << ", want " << want[i]);
    }
  BOOST_TEST(bad == 0, what << ": " << bad << " wrong elements");
}

// Row lengths around the block (1024) and the makemore widths (27, 200), rows giving one, a few
// and a partial last block.
const std::vector<std::pair<int64_t, int64_t>> kShapes = {
    {1, 1},   {3, 1},    {64, 27},  {192, 27}, {64, 200}, {7, 200},  {5, 341},   {4, 1000},
    {3, 1023}, {3, 1024}, {3, 1025}, {2, 3000}, {300, 7},  {1, 5000}, {1000, 3}, {129, 64}};

template <class T>
void row_broadcast_every_shape(uint64_t seed) {
  for (const auto& [r, c] : kShapes) {
    const auto xv = values(r * c, ++seed), bv = values(c, ++seed);
    const std::string sz = std::to_string(r) + "x" + std::to_string(c);
    const Tensor x = tensor<T>(xv, {r, c}), b = tensor<T>(bv, {c});
    std::vector<double> add(xv.size()), twice(xv.size()), rev(xv.size()), only(xv.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) {
        const size_t k = static_cast<size_t>(i * c + j);
        add[k] = xv[k] + bv[j];
        twice[k] = (xv[k] + bv[j]) * bv[j];
        rev[k] = xv[k] + bv[c - 1 - j];
        only[k] = bv[j] * bv[j];
      }
    check<T>(sz + " x + b", x + b, add);
    check<T>(sz + " b + x", b + x, add);
    check<T>(sz + " (x + b) * b", (x + b) * b, twice);
    check<T>(sz + " x + flip(b)", x + b.flip(), rev);  // negative stride along the row
    check<T>(sz + " b * b expanded", (b * b).expand(Shape{r, c}) + tensor<T>(std::vector<double>(xv.size(), 0.0), {r, c}), only);
    // Every other element of a twice-as-long row: stride 2 along the row.
    std::vector<double> wide(static_cast<size_t>(2 * c), 1.0);
    for (int64_t j = 0; j < c; ++j) wide[static_cast<size_t>(2 * j)] = bv[j];
    check<T>(sz + " x + b[::2]", x + tensor<T>(wide, {2 * c}).slice(0, 0, 2 * c, 2), add);
    // One value per row (stride 0 along the row): plain, flipped, every other one.
    const auto cv = values(r, ++seed);
    std::vector<double> mul(xv.size()), mulrev(xv.size()), cwide(static_cast<size_t>(2 * r), 3.0);
    for (int64_t i = 0; i < r; ++i) {
      cwide[static_cast<size_t>(2 * i)] = cv[static_cast<size_t>(i)];
      for (int64_t j = 0; j < c; ++j) {
        const size_t k = static_cast<size_t>(i * c + j);
        mul[k] = xv[k] * cv[static_cast<size_t>(i)] + bv[j];
        mulrev[k] = xv[k] - cv[static_cast<size_t>(r - 1 - i)];
      }
    }
    const Tensor col = tensor<T>(cv, {r, 1});
    check<T>(sz + " x * c[:, None] + b", x * col + b, mul);
    check<T>(sz + " x - flip(c)[:, None]", x - col.flip(), mulrev);
    check<T>(sz + " x * c[::2, None] + b", x * tensor<T>(cwide, {2 * r, 1}).slice(0, 0, 2 * r, 2) + b, mul);
    // Note [One value per block] (rows longer than a block): per-row values combined among
    // themselves (one value per block), then taken as a scalar operand (f32, f64), spread for
    // a comparison, a select and integer ops, and as the program's last instruction.
    std::vector<double> sq(xv.size()), sel(xv.size()), negx(xv.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) {
        const size_t k = static_cast<size_t>(i * c + j);
        const double ci = cv[static_cast<size_t>(i)];
        sq[k] = ci * ci;
        sel[k] = xv[k] < ci ? xv[k] : ci * ci;
        negx[k] = (ci + ci) * xv[k] - ci;
      }
    check<T>(sz + " (c + c)[:, None] * x - c[:, None]", (col + col) * x - col, negx);
    check<T>(sz + " where(x < c, x, c * c)", Tensor::where(x.lt(col), x, col * col), sel);
    check<T>(sz + " (c * c) expanded", (col * col).expand(Shape{r, c}), sq);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(row_broadcast_f32) { row_broadcast_every_shape<float>(100); }
BOOST_AUTO_TEST_CASE(row_broadcast_f64) { row_broadcast_every_shape<double>(200); }
BOOST_AUTO_TEST_CASE(row_broadcast_i32) { row_broadcast_every_shape<int32_t>(300); }

BOOST_AUTO_TEST_CASE(row_broadcast_u8_and_bool) {
  uint64_t seed = 400;
  for (const auto& [r, c] : kShapes) {
    const std::string sz = std::to_string(r) + "x" + std::to_string(c);
    auto xv = values(r * c, ++seed), bv = values(c, ++seed);
    for (double& v : xv) v = std::abs(v);
    for (double& v : bv) v = std::abs(v);
    std::vector<double> add(xv.size()), any(xv.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) {
        const size_t k = static_cast<size_t>(i * c + j);
        add[k] = static_cast<uint8_t>(static_cast<uint8_t>(xv[k]) + static_cast<uint8_t>(bv[j]));
        any[k] = (static_cast<int64_t>(xv[k]) % 2 != 0) || (static_cast<int64_t>(bv[j]) % 3 == 0);
      }
    check<uint8_t>(sz + " u8 x + b", tensor<uint8_t>(xv, {r, c}) + tensor<uint8_t>(bv, {c}), add);
    // bool rows are not row-invariant loads (stored bytes are normalised): the ordinary path.
    std::vector<double> xo(xv.size()), b3(bv.size());
    for (size_t k = 0; k < xv.size(); ++k) xo[k] = static_cast<int64_t>(xv[k]) % 2 != 0;
    for (size_t j = 0; j < bv.size(); ++j) b3[j] = static_cast<int64_t>(bv[j]) % 3 == 0;
    const Tensor xb = tensor<uint8_t>(xo, {r, c}).cast(ravel::DType::Bool), bb = tensor<uint8_t>(b3, {c}).cast(ravel::DType::Bool);
    xb.realize(), bb.realize();  // stored bools, loaded by the program below
    check<uint8_t>(sz + " bool x | b", xb.logical_or(bb).cast(ravel::DType::U8), any);
    // Stored bools, one per row (stride 0 along the row): read through the per-row fill.
    std::vector<double> rb(static_cast<size_t>(r)), rowor(xv.size());
    for (int64_t i = 0; i < r; ++i) rb[static_cast<size_t>(i)] = i % 3 == 1;
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) rowor[static_cast<size_t>(i * c + j)] = xo[static_cast<size_t>(i * c + j)] != 0 || i % 3 == 1;
    const Tensor rbt = tensor<uint8_t>(rb, {r, 1}).cast(ravel::DType::Bool);
    rbt.realize();
    check<uint8_t>(sz + " bool x | r[:, None]", xb.logical_or(rbt).cast(ravel::DType::U8), rowor);
    // u8 one value per row.
    std::vector<double> radd(xv.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        radd[static_cast<size_t>(i * c + j)] = static_cast<uint8_t>(static_cast<uint8_t>(xv[static_cast<size_t>(i * c + j)]) + static_cast<uint8_t>(bv[static_cast<size_t>(i % c)]));
    std::vector<double> rv(static_cast<size_t>(r));
    for (int64_t i = 0; i < r; ++i) rv[static_cast<size_t>(i)] = bv[static_cast<size_t>(i % c)];
    check<uint8_t>(sz + " u8 x + r[:, None]", tensor<uint8_t>(xv, {r, c}) + tensor<uint8_t>(rv, {r, 1}), radd);
  }
}

BOOST_AUTO_TEST_CASE(fused_outer_axes_and_column_broadcast) {
  uint64_t seed = 500;
  for (const auto& [a, b, c] : std::vector<std::array<int64_t, 3>>{{4, 3, 27}, {3, 5, 200}, {2, 2, 700}, {5, 64, 3}}) {
    const std::string sz = std::to_string(a) + "x" + std::to_string(b) + "x" + std::to_string(c);
    const auto xv = values(a * b * c, ++seed), rv = values(b * c, ++seed), cv = values(a * b, ++seed),
               vv = values(c, ++seed);
    std::vector<double> plane(xv.size()), col(xv.size()), both(xv.size());
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t k = 0; k < c; ++k) {
          const size_t n = static_cast<size_t>((i * b + j) * c + k);
          plane[n] = xv[n] + rv[static_cast<size_t>(j * c + k)];              // [B, C] over [A, B, C]
          col[n] = xv[n] * cv[static_cast<size_t>(i * b + j)];                // one value per row
          both[n] = cv[static_cast<size_t>(i * b + j)] - vv[static_cast<size_t>(k)];  // outer product
        }
    const Tensor x = tensor<float>(xv, {a, b, c});
    check<float>(sz + " x + plane", x + tensor<float>(rv, {b, c}), plane);
    check<float>(sz + " x * column", x * tensor<float>(cv, {a, b, 1}), col);
    check<float>(sz + " column - row", tensor<float>(cv, {a, b, 1}) - tensor<float>(vv, {c}), both);
    // Broadcast along the middle axis only: stride 0 on axis 1, not on axis 0 (not invariant).
    std::vector<double> mid(xv.size());
    const auto mv = values(a * c, ++seed);
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t k = 0; k < c; ++k)
          mid[static_cast<size_t>((i * b + j) * c + k)] =
              xv[static_cast<size_t>((i * b + j) * c + k)] + mv[static_cast<size_t>(i * c + k)];
    check<float>(sz + " x + middle broadcast", x + tensor<float>(mv, {a, 1, c}), mid);
  }
}

BOOST_AUTO_TEST_CASE(bias_in_contraction_epilogue) {
  // (A @ B + bias): the bias runs in the contraction's epilogue; with N above the block, the
  // epilogue's later blocks start inside a row. Integer-valued operands: exact sums in f32.
  uint64_t seed = 600;
  for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{{64, 30, 200}, {5, 7, 27}, {3, 4, 1500}, {2, 3, 2049}}) {
    auto av = values(m * k, ++seed), bv = values(k * n, ++seed), cv = values(n, ++seed);
    for (double& v : av) v = std::fmod(v, 8.0);
    for (double& v : bv) v = std::fmod(v, 8.0);
    std::vector<double> want(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) s += av[static_cast<size_t>(i * k + q)] * bv[static_cast<size_t>(q * n + j)];
        want[static_cast<size_t>(i * n + j)] = std::max(0.0, s + cv[static_cast<size_t>(j)]);
      }
    check<float>(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) + " relu(A@B+bias)",
                 (tensor<float>(av, {m, k}).matmul(tensor<float>(bv, {k, n})) + tensor<float>(cv, {n})).relu(), want);
  }
}

BOOST_AUTO_TEST_CASE(batched_dot_products_match_the_tiled_kernel_bitwise) {
  // N == 1 takes the dot-product path; the same B as the first of two columns takes the tiled
  // micro-kernel. The dot path promises the same rounding as one lane of the kernel, so the
  // column must agree bitwise (non-integer values: rounding happens). Also checked against a
  // double reference, with batch broadcast and transposed operands and an epilogue.
  uint64_t seed = 700;
  for (const auto& [bs, m, k] : std::vector<std::array<int64_t, 3>>{
           {64, 1, 27}, {1, 1, 1}, {9, 13, 21}, {3, 7, 300}, {1, 200, 64}, {130, 2, 5}, {2, 1100, 3}}) {
    const std::string sz = std::to_string(bs) + "x" + std::to_string(m) + "x" + std::to_string(k);
    auto av = values(bs * m * k, ++seed), bv = values(bs * k, ++seed), ov = values(bs * k, ++seed);
    for (double& v : av) v /= 37.0;
    for (double& v : bv) v /= 29.0;
    std::vector<double> b2(static_cast<size_t>(bs * k * 2));
    for (int64_t i = 0; i < bs * k; ++i) b2[static_cast<size_t>(2 * i)] = bv[static_cast<size_t>(i)], b2[static_cast<size_t>(2 * i + 1)] = ov[static_cast<size_t>(i)];
    const Tensor a = tensor<float>(av, {bs, m, k});
    const std::vector<float> dot = a.matmul(tensor<float>(bv, {bs, k, 1})).to_vector<float>();
    const std::vector<float> two = a.matmul(tensor<float>(b2, {bs, k, 2})).to_vector<float>();
    BOOST_TEST_REQUIRE(dot.size() * 2 == two.size(), sz);
    int64_t bad = 0;
    for (size_t i = 0; i < dot.size(); ++i)
      if (dot[i] != two[2 * i] && bad++ < 3) BOOST_ERROR(sz << ": dot " << i << " = " << dot[i] << ", tiled " << two[2 * i]);
    BOOST_TEST(bad == 0, sz << ": dot path differs from the tiled kernel");
    // Against double: batch-broadcast A (stride 0), transposed A, and an epilogue (relu(x + 1)).
    std::vector<double> want(static_cast<size_t>(bs * m)), want0(want.size());
    for (int64_t b = 0; b < bs; ++b)
      for (int64_t i = 0; i < m; ++i) {
        double s = 0, s0 = 0;
        for (int64_t q = 0; q < k; ++q) {
          s += static_cast<float>(av[static_cast<size_t>((b * m + i) * k + q)]) * static_cast<double>(static_cast<float>(bv[static_cast<size_t>(b * k + q)]));
          s0 += static_cast<float>(av[static_cast<size_t>(i * k + q)]) * static_cast<double>(static_cast<float>(bv[static_cast<size_t>(b * k + q)]));
        }
        want[static_cast<size_t>(b * m + i)] = std::max(0.0, s + 1.0);
        want0[static_cast<size_t>(b * m + i)] = s0;
      }
    auto close = [&](const std::string& what, const Tensor& got, const std::vector<double>& w) {
      const std::vector<float> g = got.to_vector<float>();
      BOOST_TEST_REQUIRE(g.size() == w.size(), what);
      int64_t wrong = 0;
      for (size_t i = 0; i < g.size(); ++i)
        if (!(std::abs(g[i] - w[i]) <= 1e-5 * (k + 1) * 8) && wrong++ < 3) BOOST_ERROR(what << ": " << i << " = " << g[i] << ", want " << w[i]);
      BOOST_TEST(wrong == 0, what);
    };
    std::vector<double> at(av.size());  // each A matrix transposed, read back through strides
    for (int64_t b = 0; b < bs; ++b)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t q = 0; q < k; ++q) at[static_cast<size_t>((b * k + q) * m + i)] = av[static_cast<size_t>((b * m + i) * k + q)];
    const Tensor b1 = tensor<float>(bv, {bs, k, 1});
    close(sz + " relu(A@b + 1)", (a.matmul(b1) + 1.0f).relu().reshape({bs * m}), want);
    close(sz + " A^T^T@b", tensor<float>(at, {bs, k, m}).transpose(-2, -1).matmul(b1).reshape({bs * m}),
          [&] { auto w = want; for (size_t i = 0; i < w.size(); ++i) { double s = 0; int64_t b = static_cast<int64_t>(i) / m, r = static_cast<int64_t>(i) % m; for (int64_t q = 0; q < k; ++q) s += static_cast<float>(av[static_cast<size_t>((b * m + r) * k + q)]) * static_cast<double>(static_cast<float>(bv[static_cast<size_t>(b * k + q)])); w[i] = s; } return w; }());
    std::vector<double> a0(av.begin(), av.begin() + m * k);
    close(sz + " broadcast A", tensor<float>(a0, {1, m, k}).expand(Shape{bs, m, k}).matmul(b1).reshape({bs * m}), want0);
  }
}
