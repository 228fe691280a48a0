// Permuting copies on the oneTBB plugin (Note [Permuting copies], plugins/tbb_cpu/permute_copy.cpp):
// one LOAD through a view that walks a non-innermost axis contiguously. The expected output is
// a naive index loop written here, compared bit for bit (NaN payloads included), and elements
// of the output buffer outside the view must keep their sentinel. test_tbb_abi_portable_gemm
// runs these again with RAVEL_TBB_PERMUTE_PORTABLE=1 (the non-AVX tile kernel).
#include "common.hpp"

#include <cstring>
#include <memory>

using namespace abitest;

namespace {

// Bit patterns of 4- or 8-byte elements: distinct per index, with NaNs (several payloads) and
// infinities mixed in when the element is a float.
template <class U>
std::vector<U> permute_pattern(int64_t n) {
  std::vector<U> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<U>(0x3f800000u + 977u * static_cast<uint64_t>(i));  // finite f32 bits
    if (i % 11 == 3) v[i] = static_cast<U>(0x7fc00000u + i);                 // NaN with a payload
    if (i % 13 == 5) v[i] = static_cast<U>(0xff800000u);                     // -inf
  }
  return v;
}

template <class U>
HostBuf as_host(int32_t dtype, const std::vector<U>& v) {
  HostBuf h;
  h.dtype = dtype;
  h.bytes.resize(v.size() * sizeof(U));
  std::memcpy(h.bytes.data(), v.data(), h.bytes.size());
  return h;
}

// out (a buffer of out_n elements, sentinel-filled) through out_view over `shape`, from src
// through in_view; the expectation is computed by a naive loop over every index.
template <class U>
void check_permute(int32_t dtype, const std::vector<int64_t>& shape, int64_t src_n, const rvl_view& in_view,
                   int64_t out_n, const rvl_view& out_view, const std::string& ctx) {
  const int rank = static_cast<int>(shape.size());
  const std::vector<U> src = permute_pattern<U>(src_n);
  const U sentinel = static_cast<U>(0x12345678u);
  std::vector<U> want(out_n, sentinel);
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  for (int64_t lin = 0; lin < total; ++lin) {
    int64_t rest = lin, si = in_view.offset, so = out_view.offset;
    bool valid = true;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t i = rest % shape[d];
      rest /= shape[d];
      si += i * in_view.strides[d];
      so += i * out_view.strides[d];
      valid = valid && i >= in_view.valid_lo[d] && i < in_view.valid_hi[d];
    }
    want[so] = valid ? src[si] : U{0};
  }
  DevBuf din(as_host(dtype, src));
  DevBuf dout(as_host(dtype, std::vector<U>(out_n, sentinel)));
  rvl_instruction code[1] = {load(dtype, 0)};
  rvl_operand in_op = operand(din.get(), dtype, in_view);
  rvl_program p{};
  p.struct_size = sizeof(rvl_program);
  p.rank = rank;
  for (int d = 0; d < rank; ++d) p.shape[d] = shape[d];
  p.n_inputs = 1;
  p.inputs = &in_op;
  p.n_instructions = 1;
  p.instructions = code;
  p.reduce_op = RVL_REDUCE_NONE;
  p.output = operand(dout.get(), dtype, out_view);
  ok(api().execute_program(0, nullptr, &p), ctx);
  const HostBuf got = dout.read(dtype);
  std::vector<U> g(out_n);
  std::memcpy(g.data(), got.bytes.data(), g.size() * sizeof(U));
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < out_n; ++i)
    if (g[i] != want[i]) first = first < 0 ? i : first, ++bad;
  BOOST_TEST(bad == 0, ctx << ": " << bad << " elements differ, first at " << first);
}

// out[i][j] = A[j][i] for A of [cols, rows] (row-major): the plain 2-D transpose.
template <class U>
void check_transpose(int32_t dtype, int64_t rows, int64_t cols) {
  const std::vector<int64_t> shape{rows, cols};
  const int64_t sh[2] = {rows, cols};
  check_permute<U>(dtype, shape, rows * cols, make_view(2, shape, {1, rows}), rows * cols, contiguous(2, sh),
                   "transpose " + std::to_string(rows) + "x" + std::to_string(cols) + " dtype " + std::to_string(dtype));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tbb_permuting_copies)

BOOST_AUTO_TEST_CASE(transposes_of_odd_and_tile_multiple_sizes_match_the_index_loop) {
  for (auto [r, c] : {std::pair<int64_t, int64_t>{67, 131}, {128, 64}, {197, 77}, {9, 300}, {300, 9}})
    check_transpose<uint32_t>(RVL_DTYPE_F32, r, c);
  check_transpose<uint32_t>(RVL_DTYPE_I32, 100, 65);
  check_transpose<uint64_t>(RVL_DTYPE_F64, 45, 70);
  check_transpose<uint64_t>(RVL_DTYPE_I64, 64, 96);
  check_transpose<uint8_t>(RVL_DTYPE_U8, 70, 90);  // 1-byte elements: the ordinary tiled path
}

BOOST_AUTO_TEST_CASE(three_axis_permutes_flips_offsets_and_strided_outputs) {
  // [B, R, C] from a contiguous [B, C, R]: a batch of transposes (the batch axis outermost).
  check_permute<uint32_t>(RVL_DTYPE_F32, {3, 37, 41}, 3 * 41 * 37, make_view(3, {3, 37, 41}, {41 * 37, 1, 37}),
                          3 * 37 * 41, make_view(3, {3, 37, 41}, {37 * 41, 41, 1}), "batched");
  // [R, B, C] from a contiguous [C, B, R]: the other axis sits between the permuted ones.
  check_permute<uint32_t>(RVL_DTYPE_F32, {37, 3, 41}, 41 * 3 * 37, make_view(3, {37, 3, 41}, {1, 37, 111}),
                          37 * 3 * 41, make_view(3, {37, 3, 41}, {123, 41, 1}), "middle axis");
  // A flipped source (negative stride on the innermost axis) at an offset.
  const int64_t R = 70, C = 83;
  check_permute<uint32_t>(RVL_DTYPE_F32, {R, C}, R * C + 5, make_view(2, {R, C}, {1, -R}, 5 + (C - 1) * R), R * C,
                          make_view(2, {R, C}, {C, 1}), "flipped source");
  // Output rows wider than the view (a slice of a [R, C + 9] buffer at an offset): the gaps keep
  // the sentinel.
  check_permute<uint64_t>(RVL_DTYPE_F64, {R, C}, R * C, make_view(2, {R, C}, {1, R}), R * (C + 9) + 4,
                          make_view(2, {R, C}, {C + 9, 1}, 4), "strided output");
}

BOOST_AUTO_TEST_CASE(padded_sources_fall_back_and_read_zeros) {
  // valid_hi short of the shape on both axes: the invalid elements read as 0 (not a plain copy).
  rvl_view in = make_view(2, {96, 80}, {1, 96});
  in.valid_hi[0] = 90;
  in.valid_lo[1] = 3;
  const int64_t sh[2] = {96, 80};
  check_permute<uint32_t>(RVL_DTYPE_F32, {96, 80}, 96 * 80, in, 96 * 80, contiguous(2, sh), "padded");
}

BOOST_AUTO_TEST_SUITE_END()
