// Contractions: odd sizes (1, 3, 17, 129), transposed operands through strides, batches with
// broadcasting, k == 0, every dtype, epilogues, non-contiguous C.
#include "kernel_case.hpp"

namespace rvl::conformance {
namespace {

struct Layout {
  bool ta = false, tb = false, tc = false;  // transposed storage of A, B, C
};

// A [batch..., M, K] operand stored contiguously (row-major or transposed in its last two axes);
// `broadcast` batch axes get stride 0 (and are not stored).
Input matrix(int32_t dt, const std::vector<int64_t>& batch, const std::vector<bool>& broadcast,
             int64_t rows, int64_t cols, bool transposed, uint64_t seed, Data kind) {
  std::vector<int64_t> shape = batch, strides(batch.size() + 2, 0);
  shape.push_back(rows);
  shape.push_back(cols);
  const size_t r = batch.size();
  strides[r] = transposed ? 1 : cols;
  strides[r + 1] = transposed ? rows : 1;
  int64_t s = rows * cols;
  for (size_t d = r; d-- > 0;)
    if (!broadcast[d]) strides[d] = s, s *= batch[d];
  return Input{make_data(dt, s, seed, kind), view_of(shape, strides)};
}

ContractionCase make(int32_t dt, const std::vector<int64_t>& batch, const std::vector<bool>& bcast_a,
                     int64_t m, int64_t n, int64_t k, Layout l) {
  ContractionCase c;
  c.dtype = dt;
  c.batch = batch;
  c.m = m, c.n = n, c.k = k;
  const Data kind = ref::is_float(dt) ? Data::Small : Data::Mixed;
  c.a = matrix(dt, batch, bcast_a, m, k, l.ta, 1 + m, kind);
  c.b = matrix(dt, batch, std::vector<bool>(batch.size(), false), k, n, l.tb, 2 + n, kind);
  Input cc = matrix(dt, batch, std::vector<bool>(batch.size(), false), m, n, l.tc, 3, Data::Small);
  c.c = cc.data;
  c.c_view = cc.view;
  c.threshold = threshold(Accuracy::Accumulation, dt);
  return c;
}

void add(const std::string& name, std::function<ContractionCase()> make_case) {
  add_case("contractions", name, [make_case](Measure& m) { make_case().run(m); });
}

}  // namespace

void register_contraction_cases() {
  const int64_t sizes[] = {1, 3, 17, 129};
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : sizes) {
        if (m * n * k > 129 * 129 * 17) continue;  // keep the reference quick
        const std::string name = "f32/" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
        add(name, [=] { return make(RVL_DTYPE_F32, {}, {}, m, n, k, {}); });
      }
  // The 1.7 dtypes get these two sample shapes only (CI time), not the shape matrix below.
  for (int32_t dt : {RVL_DTYPE_BOOL, RVL_DTYPE_U8, RVL_DTYPE_I32, RVL_DTYPE_I64, RVL_DTYPE_F32, RVL_DTYPE_F64,
                     RVL_DTYPE_F16, RVL_DTYPE_BF16, RVL_DTYPE_I8, RVL_DTYPE_I16, RVL_DTYPE_U16, RVL_DTYPE_U32,
                     RVL_DTYPE_U64}) {
    const std::string d = dtype_str(dt);
    add(d + "/17x3x129", [=] { return make(dt, {}, {}, 17, 3, 129, {}); });
    add(d + "/k0", [=] { return make(dt, {}, {}, 3, 17, 0, {}); });
    for (int t = 1; t < 8; ++t) {
      const Layout l{bool(t & 1), bool(t & 2), bool(t & 4)};
      const std::string ln = std::string(l.ta ? "At" : "A") + (l.tb ? "Bt" : "B") + (l.tc ? "Ct" : "C");
      add(d + "/transposed_" + ln + "/17x3x17", [=] { return make(dt, {}, {}, 17, 3, 17, l); });
    }
  }
  add("f64/batch_2x3", [] { return make(RVL_DTYPE_F64, {2, 3}, {false, false}, 3, 17, 5, {}); });
  add("f32/batch_broadcast_A", [] { return make(RVL_DTYPE_F32, {4}, {true}, 17, 3, 17, {true, false, false}); });
  add("i32/batch_broadcast_inner", [] { return make(RVL_DTYPE_I32, {2, 3}, {false, true}, 3, 3, 17, {}); });
  add("f32/batch_rank_6", [] {
    return make(RVL_DTYPE_F32, {2, 1, 2, 1, 1, 2}, {false, true, false, false, true, false}, 3, 1, 3, {});
  });
  add("f32/batch_empty", [] { return make(RVL_DTYPE_F32, {0}, {false}, 3, 3, 3, {}); });
  // Epilogues: C = max(acc * 2 + bias[n], 0) with the bias broadcast over rows.
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_I32}) {
    add(dtype_str(dt) + "/epilogue_bias_relu", [=] {
      ContractionCase c = make(dt, {2}, {false}, 17, 3, 17, {});
      const bool fp = ref::is_float(dt);
      c.epilogue_inputs = {Input{make_data(dt, 3, 77, Data::Small), view_of({2, 17, 3}, {0, 0, 1})}};
      c.epilogue = {ins(RVL_OP_ACC, dt), fp ? const_f(dt, 2.0) : const_i(dt, 2), ins(RVL_OP_MUL, dt, 0, 1),
                    load(dt, 0), ins(RVL_OP_ADD, dt, 2, 3), fp ? const_f(dt, 0.0) : const_i(dt, 0),
                    ins(RVL_OP_MAX, dt, 4, 5)};
      return c;
    });
  }
  add("f32/epilogue_padded_input", [] {
    ContractionCase c = make(RVL_DTYPE_F32, {}, {}, 5, 7, 3, {});
    rvl_view v = view_of({5, 7}, {7, 1}, -8);  // reads a 3x5 block, zeros around it
    v.valid_lo[0] = 1, v.valid_hi[0] = 4, v.valid_lo[1] = 1, v.valid_hi[1] = 6;
    c.epilogue_inputs = {Input{make_data(RVL_DTYPE_F32, 21, 5), v}};
    c.epilogue = {ins(RVL_OP_ACC, RVL_DTYPE_F32), load(RVL_DTYPE_F32, 0), ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 1)};
    return c;
  });
  // Every dtype through the shapes and layouts of the oneTBB plugin's former ABI tests (folded
  // in here so that every backend is held to them): skinny, square, K-heavy, degenerate.
  const int64_t shapes[][3] = {{1, 1, 1},    {3, 17, 129}, {129, 3, 17}, {17, 129, 3},
                               {129, 129, 129}, {1, 129, 17}, {17, 1, 1}, {3, 3, 3}};
  for (int32_t dt : {RVL_DTYPE_BOOL, RVL_DTYPE_U8, RVL_DTYPE_I32, RVL_DTYPE_I64, RVL_DTYPE_F32, RVL_DTYPE_F64}) {
    const std::string d = dtype_str(dt);
    for (const auto& sh : shapes) {
      const int64_t m = sh[0], n = sh[1], k = sh[2];
      add(d + "/shapes/" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k),
          [=] { return make(dt, {}, {}, m, n, k, {}); });
    }
    add(d + "/transposed_At/17x129x3", [=] { return make(dt, {}, {}, 17, 129, 3, {true, false, false}); });
    add(d + "/transposed_Bt/3x17x129", [=] { return make(dt, {}, {}, 3, 17, 129, {false, true, false}); });
    add(d + "/transposed_AtBt/129x17x17", [=] { return make(dt, {}, {}, 129, 17, 17, {true, true, false}); });
    // acc * 2 + bias[n] (bias broadcast over batch and rows), on broadcast batches.
    auto with_epilogue = [dt](ContractionCase c) {
      const bool fp = ref::is_float(dt), b = dt == RVL_DTYPE_BOOL;
      std::vector<int64_t> cshape = c.batch, strides(c.batch.size() + 2, 0);
      cshape.push_back(c.m);
      cshape.push_back(c.n);
      strides.back() = 1;
      c.epilogue_inputs = {Input{make_data(dt, c.n, 77, Data::Small), view_of(cshape, strides)}};
      c.epilogue = {ins(RVL_OP_ACC, dt), fp ? const_f(dt, 2.0) : const_i(dt, b ? 1 : 2),
                    ins(RVL_OP_MUL, dt, 0, 1), load(dt, 0), ins(RVL_OP_ADD, dt, 2, 3)};
      return c;
    };
    add(d + "/epilogue/batch_2x3_broadcast_A/17x3x129",
        [=] { return with_epilogue(make(dt, {2, 3}, {true, false}, 17, 3, 129, {})); });
    add(d + "/epilogue/batch_3_broadcast_A_AtBt/129x17x3",
        [=] { return with_epilogue(make(dt, {3}, {true}, 129, 17, 3, {true, true, false})); });
    add(d + "/epilogue/Bt/3x129x17", [=] { return with_epilogue(make(dt, {}, {}, 3, 129, 17, {false, true, false})); });
    add(d + "/epilogue/batch_2/1x1x1", [=] { return with_epilogue(make(dt, {2}, {false}, 1, 1, 1, {})); });
  }
  add("f32/epilogue/k0", [] {
    ContractionCase c = make(RVL_DTYPE_F32, {2}, {false}, 3, 4, 0, {});
    c.epilogue_inputs = {Input{make_data(RVL_DTYPE_F32, 4, 9), view_of({2, 3, 4}, {0, 0, 1})}};
    c.epilogue = {ins(RVL_OP_ACC, RVL_DTYPE_F32), load(RVL_DTYPE_F32, 0), ins(RVL_OP_ADD, RVL_DTYPE_F32, 0, 1)};
    return c;
  });
  register_window_contraction_cases();
}

}  // namespace rvl::conformance
