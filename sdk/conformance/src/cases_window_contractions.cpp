// Multi-axis contractions (ABI 1.8 im2col block): a convolution's window read in place, K =
// (c, kh, kw) and N = (n, oh, ow) each several strided axes of one input buffer, with odd sizes,
// strides, dilation, a grouped M on a non-contiguous A, every dtype, a batch axis and an
// epilogue. Skipped where the device's contraction_axes does not allow the groups. (Padding
// is not part of the form: the host pads a copy of the input first.)
#include "kernel_case.hpp"

namespace rvl::conformance {
namespace {

struct Window {
  int64_t n, c, h, w, o, kh, kw, stride, dilation;
  int64_t oh() const { return (h - dilation * (kh - 1) - 1) / stride + 1; }
  int64_t ow() const { return (w - dilation * (kw - 1) - 1) / stride + 1; }
};

// C[o, (n, oh, ow)] = sum_{c, kh, kw} W[o, c, kh, kw] * X[n, c, oh*s + kh*d, ow*s + kw*d].
ContractionCase window_case(int32_t dt, const Window& g, bool grouped_a, uint64_t seed) {
  ContractionCase c;
  c.dtype = dt;
  c.m = g.o;
  c.k = g.c * g.kh * g.kw;
  c.n = g.n * g.oh() * g.ow();
  const Data kind = ref::is_float(dt) ? Data::Small : Data::Mixed;
  if (grouped_a) {  // W stored [c, kh, kw, o]: M is one axis of stride 1, K three axes
    c.a = Input{make_data(dt, c.m * c.k, seed, kind), view_of({c.m, c.k}, {1, 0})};
    c.k_shape = {g.c, g.kh, g.kw};
    c.a_k = {g.kh * g.kw * g.o, g.kw * g.o, g.o};
  } else {  // W [o, c*kh*kw] row-major: the 1.0 form for A, K still a group for B
    c.a = Input{make_data(dt, c.m * c.k, seed, kind), view_of({c.m, c.k}, {c.k, 0})};
    c.k_shape = {g.c, g.kh, g.kw};
    c.a_k = {g.kh * g.kw, g.kw, 1};
  }
  c.b = Input{make_data(dt, g.n * g.c * g.h * g.w, seed + 1, kind), view_of({c.k, c.n}, {0, 0})};
  c.b_k = {g.h * g.w, g.dilation * g.w, g.dilation};
  c.n_shape = {g.n, g.oh(), g.ow()};
  c.b_n = {g.c * g.h * g.w, g.stride * g.w, g.stride};
  Input cc{make_data(dt, c.m * c.n, 3, Data::Small), view_of({c.m, c.n}, {c.n, 1})};
  c.c = cc.data;
  c.c_view = cc.view;
  c.threshold = threshold(Accuracy::Accumulation, dt);
  return c;
}

void add_window(const std::string& name, std::function<ContractionCase()> make_case) {
  add_case("contractions_multi_axis", name, [make_case](Measure& m) { make_case().run(m); });
}

}  // namespace

void register_window_contraction_cases() {
  const Window plain{2, 3, 7, 9, 5, 3, 3, 1, 1}, strided{2, 3, 9, 11, 4, 2, 3, 2, 2}, one{1, 1, 5, 5, 1, 5, 5, 1, 1};
  for (int32_t dt : {RVL_DTYPE_BOOL, RVL_DTYPE_U8, RVL_DTYPE_I32, RVL_DTYPE_I64, RVL_DTYPE_F32, RVL_DTYPE_F64}) {
    const std::string d = dtype_str(dt);
    add_window(d + "/conv_3x3", [=] { return window_case(dt, plain, false, 11); });
    add_window(d + "/conv_2x3_stride2_dilation2", [=] { return window_case(dt, strided, false, 12); });
    add_window(d + "/conv_grouped_A", [=] { return window_case(dt, strided, true, 13); });
  }
  add_window("f32/conv_kernel_covers_input", [=] { return window_case(RVL_DTYPE_F32, one, false, 14); });
  // A large N (several column tiles and slivers with runs that break at row ends).
  add_window("f32/conv_wide", [] { return window_case(RVL_DTYPE_F32, Window{3, 4, 12, 37, 7, 3, 3, 1, 1}, true, 15); });
  // A convolution's weight gradient: dW[o, (c, kh, kw)] = sum over (n, oh, ow) of dY[o, (n, oh, ow)]
  // * X[n, c, oh + kh, ow + kw]: K long (4 x 24 x 24) against a small C (plugins may split K).
  for (int32_t dt : {RVL_DTYPE_F32, RVL_DTYPE_F64, RVL_DTYPE_I32}) {
    add_window(dtype_str(dt) + "/conv_weight_gradient", [=] {
      const Window g{4, 2, 26, 26, 5, 3, 3, 1, 1};
      const int64_t p = g.oh() * g.ow();
      ContractionCase c;
      c.dtype = dt;
      c.m = g.o;
      c.n = g.c * g.kh * g.kw;
      c.k = g.n * p;
      const Data kind = ref::is_float(dt) ? Data::Small : Data::Mixed;
      // dY stored [n, o, oh, ow]: M = o (stride p), K = (n, oh, ow) with strides (o*p, ow, 1).
      c.a = Input{make_data(dt, g.n * g.o * p, 21, kind), view_of({c.m, c.k}, {p, 0})};
      c.b = Input{make_data(dt, g.n * g.c * g.h * g.w, 22, kind), view_of({c.k, c.n}, {0, 0})};
      c.k_shape = {g.n, g.oh(), g.ow()};
      c.a_k = {g.o * p, g.ow(), 1};
      c.b_k = {g.c * g.h * g.w, g.w, 1};
      c.n_shape = {g.c, g.kh, g.kw};
      c.b_n = {g.h * g.w, g.w, 1};
      Input cc{make_data(dt, c.m * c.n, 3, Data::Small), view_of({c.m, c.n}, {c.n, 1})};
      c.c = cc.data;
      c.c_view = cc.view;
      c.threshold = threshold(Accuracy::Accumulation, dt);
      return c;
    });
  }
  // M as a group too: A = [o1, o2] of a transposed W, with a batch axis over two weight sets.
  add_window("f64/batch_and_m_group_epilogue", [] {
    const Window g{2, 2, 6, 7, 6, 2, 2, 1, 1};
    ContractionCase c = window_case(RVL_DTYPE_F64, g, false, 16);
    c.batch = {2};
    c.a = Input{make_data(RVL_DTYPE_F64, 2 * c.m * c.k, 17, Data::Small), view_of({2, c.m, c.k}, {c.m * c.k, 0, 0})};
    c.m_shape = {2, 3};
    c.a_m = {1, 2};  // o = (o1, o2) stored o2-major: element (o1, o2) at o1 + 2 * o2
    c.a_k = {g.kh * g.kw * c.m, g.kw * c.m, c.m};
    c.b.view = view_of({2, c.k, c.n}, {0, 0, 0});  // the same input for both batch entries
    Input cc{make_data(RVL_DTYPE_F64, 2 * c.m * c.n, 3, Data::Small), view_of({2, c.m, c.n}, {c.m * c.n, c.n, 1})};
    c.c = cc.data;
    c.c_view = cc.view;
    c.epilogue_inputs = {Input{make_data(RVL_DTYPE_F64, c.m, 5, Data::Small), view_of({2, c.m, c.n}, {0, 1, 0})}};
    c.epilogue = {ins(RVL_OP_ACC, RVL_DTYPE_F64), load(RVL_DTYPE_F64, 0), ins(RVL_OP_ADD, RVL_DTYPE_F64, 0, 1),
                  const_f(RVL_DTYPE_F64, 0.0), ins(RVL_OP_MAX, RVL_DTYPE_F64, 2, 3)};
    return c;
  });
}

}  // namespace rvl::conformance
