// Every view kind: broadcast (stride 0), flips (negative strides), offsets, padding through
// validity ranges, non-contiguous and reversed outputs, rank 0 up to RVL_MAX_RANK, empty spaces.
#include "kernel_case.hpp"

namespace rvl::conformance {
namespace {

struct ViewSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t in_elems;
  rvl_view in;
};

// Input views over a [5, 7] iteration space (the input buffer's size varies per view).
std::vector<ViewSpec> input_views() {
  const std::vector<int64_t> s{5, 7};
  std::vector<ViewSpec> v;
  v.push_back({"contiguous", s, 35, contiguous(s)});
  v.push_back({"offset", s, 40, contiguous(s, 5)});
  v.push_back({"transposed", s, 35, view_of(s, {1, 5})});
  v.push_back({"row_broadcast", s, 7, view_of(s, {0, 1})});
  v.push_back({"column_broadcast", s, 5, view_of(s, {1, 0})});
  v.push_back({"scalar_broadcast", s, 1, view_of(s, {0, 0})});
  v.push_back({"flip_rows", s, 35, view_of(s, {-7, 1}, 28)});
  v.push_back({"flip_both", s, 35, view_of(s, {-7, -1}, 34)});
  v.push_back({"flip_transposed", s, 35, view_of(s, {-1, -5}, 34)});
  v.push_back({"gapped", s, 5 * 16, view_of(s, {16, 2}, 1)});
  {  // padding: one row and two columns of zeros on each side, no copy
    rvl_view p = view_of(s, {3, 1}, -3 - 2);
    p.valid_lo[0] = 1, p.valid_hi[0] = 4, p.valid_lo[1] = 2, p.valid_hi[1] = 5;
    v.push_back({"padding", s, 9, p});
  }
  {  // padding at the low end only, with a flip
    rvl_view p = view_of(s, {-7, 1}, 35);  // rows 1..4 read rows 4..1; row 0 is padding
    p.valid_lo[0] = 1;
    v.push_back({"padding_flipped", s, 35, p});
  }
  {  // empty validity: everything reads 0
    v.push_back({"all_padding", s, 1, view_of(s, {0, 0})});
    v.back().in.valid_lo[1] = 4, v.back().in.valid_hi[1] = 4;
  }
  {
    rvl_view p = contiguous(s);
    p.valid_lo[0] = -3, p.valid_hi[0] = 99;  // wider than the space: clamps, all valid
    v.push_back({"validity_beyond_space", s, 35, p});
  }
  return v;
}

void add_dtypes(const std::string& name, const std::function<void(int32_t, Measure&)>& body) {
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_I32, RVL_DTYPE_U8, RVL_DTYPE_F64})
    add_case("views", name + "/" + dtype_str(dt), [=](Measure& m) { body(dt, m); });
}

}  // namespace

void register_view_cases() {
  for (const ViewSpec& vs : input_views()) {
    add_dtypes("input_" + vs.name, [vs](int32_t dt, Measure& m) {
      simple_program(vs.shape, {{make_data(dt, vs.in_elems, 3), vs.in}}, {load(dt, 0)},
                     threshold(Accuracy::Exact, dt)).run(m);
    });
  }
  // Two differently viewed inputs combined.
  add_dtypes("mixed_views_add", [](int32_t dt, Measure& m) {
    const std::vector<int64_t> s{6, 4};
    simple_program(s, {{make_data(dt, 24, 4), view_of(s, {1, 6})}, {make_data(dt, 4, 5), view_of(s, {0, -1}, 3)}},
                   {load(dt, 0), load(dt, 1), ins(RVL_OP_ADD, dt, 0, 1)},
                   threshold(Accuracy::Exact, dt)).run(m);
  });
  // Outputs: non-contiguous, transposed, reversed, offset.
  struct OutSpec { std::string name; int64_t elems; rvl_view v; };
  const std::vector<int64_t> s{4, 6};
  const std::vector<OutSpec> outs = {
      {"output_offset", 30, contiguous(s, 6)},
      {"output_gapped", 4 * 13 + 2, view_of(s, {13, 2}, 1)},
      {"output_transposed", 24, view_of(s, {1, 4})},
      {"output_reversed", 24, view_of(s, {-6, -1}, 23)},
      {"output_flip_transposed", 24, view_of(s, {-1, 4}, 3)},
  };
  for (const OutSpec& os : outs)
    add_dtypes(os.name, [os, s](int32_t dt, Measure& m) {
      ProgramCase pc = simple_program(s, {{make_data(dt, 24, 6), contiguous(s)}},
                                      {load(dt, 0)}, threshold(Accuracy::Exact, dt));
      pc.out = make_data(dt, os.elems, 7, Data::Small);
      pc.out_view = os.v;
      pc.run(m);
    });
  // Ranks 0 .. RVL_MAX_RANK, with a permuted/broadcast input.
  for (int rank = 0; rank <= RVL_MAX_RANK; ++rank)
    add_case("views", "rank_" + std::to_string(rank), [rank](Measure& m) {
      std::vector<int64_t> shape(rank);
      for (int d = 0; d < rank; ++d) shape[d] = 1 + (d % 3);  // 1, 2, 3, 1, 2, ...
      const int64_t n = count(shape);
      rvl_view in = contiguous(shape);
      if (rank >= 1) {  // flip the last axis
        in.offset += (shape[rank - 1] - 1) * in.strides[rank - 1];
        in.strides[rank - 1] = -in.strides[rank - 1];
      }
      simple_program(shape, {{make_data(RVL_DTYPE_F32, n, 8), in}, {make_data(RVL_DTYPE_F32, n, 9), contiguous(shape)}},
                     {load(RVL_DTYPE_F32, 0), load(RVL_DTYPE_F32, 1), ins(RVL_OP_MUL, RVL_DTYPE_F32, 0, 1)},
                     threshold(Accuracy::Exact, RVL_DTYPE_F32)).run(m);
    });
  // Empty iteration spaces: nothing is stored, the output stays as it was.
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0}, std::vector<int64_t>{3, 0, 2}})
    add_case("views", "empty_space_rank" + std::to_string(shape.size()), [shape](Measure& m) {
      ProgramCase pc = simple_program(shape, {{make_data(RVL_DTYPE_F32, 1, 10), view_of(shape, {0, 0, 0})}},
                                      {load(RVL_DTYPE_F32, 0)}, 0);
      pc.out = make_data(RVL_DTYPE_F32, 4, 11);
      pc.out_view = view_of(shape, {0, 0, 0});
      pc.run(m);
    });
  // A long 1-D kernel (several blocks / work-groups) with an odd length.
  add_case("views", "long_1d_odd", [](Measure& m) {
    const int64_t n = 100003;
    simple_program({n}, {{make_data(RVL_DTYPE_F32, n, 12), contiguous({n})}, {make_data(RVL_DTYPE_F32, n, 13), view_of({n}, {-1}, n - 1)}},
                   {load(RVL_DTYPE_F32, 0), load(RVL_DTYPE_F32, 1), ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 1)},
                   threshold(Accuracy::Exact, RVL_DTYPE_F32)).run(m);
  });
}

}  // namespace rvl::conformance
