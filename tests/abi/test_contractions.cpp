// Contractions: sizes 1/3/17/129, every dtype, transposed operands via strides, batch
// broadcasting (batch stride 0), and an epilogue acc*2 + bias with a stride-0 bias view.
#include "common.hpp"

#include <memory>

using namespace abitest;

namespace {

struct Operand {
  HostBuf host;
  rvl_view view;
};

// Contiguous [batch.., rows, cols] operand, or column-major in the last two axes (transposed).
Operand make_operand(int32_t dt, const std::vector<int64_t>& batch, int64_t rows, int64_t cols,
                     bool transposed, bool broadcast_batch0, uint64_t seed) {
  std::vector<int64_t> shape = batch;
  shape.push_back(rows);
  shape.push_back(cols);
  const int rank = int(shape.size());
  std::vector<int64_t> strides(rank);
  int64_t st = 1;
  if (transposed) {
    strides[rank - 2] = 1;
    strides[rank - 1] = rows;
  } else {
    strides[rank - 1] = 1;
    strides[rank - 2] = cols;
  }
  st = rows * cols;
  for (int d = rank - 3; d >= 0; --d) {
    if (d == 0 && broadcast_batch0) { strides[d] = 0; continue; }
    strides[d] = st;
    st *= shape[d];
  }
  Operand o;
  o.host = filled(dt, st, [&](int64_t i) {
    const uint64_t h = (uint64_t(i) + seed) * 0x9E3779B97F4A7C15ull >> 41;
    if (dt == RVL_DTYPE_BOOL) return I(h % 3 == 0);
    if (dt == RVL_DTYPE_U8) return I(h % 6);
    if (is_float(dt)) return F(double(h % 7) - 3);  // small integers: exact in any order
    return I(int64_t(h % 7) - 3);
  });
  o.view = make_view(rank, shape, strides);
  return o;
}

void run_contraction(int32_t dt, const std::vector<int64_t>& batch, int64_t M, int64_t N, int64_t K,
                     bool ta, bool tb, bool bcast, bool epilogue) {
  const std::string ctx = "contraction dt " + std::to_string(dt) + " M" + std::to_string(M) + " N" +
                          std::to_string(N) + " K" + std::to_string(K) + (ta ? " At" : "") +
                          (tb ? " Bt" : "") + (bcast ? " bcast" : "") + (epilogue ? " epi" : "");
  Operand A = make_operand(dt, batch, M, K, ta, bcast, 1);
  Operand B = make_operand(dt, batch, K, N, tb, false, 2);
  Operand C = make_operand(dt, batch, M, N, false, false, 3);  // initial contents = sentinel
  const int rank = int(batch.size()) + 2;
  HostBuf bias = filled(dt, N, [&](int64_t i) { return is_float(dt) ? F(double(i % 5) - 2) : I(i % 2); });
  std::vector<int64_t> cshape = batch;
  cshape.push_back(M);
  cshape.push_back(N);
  std::vector<int64_t> bias_strides(rank, 0);
  bias_strides[rank - 1] = 1;
  const rvl_view bias_view = make_view(rank, cshape, bias_strides);

  DevBuf da(A.host), db(B.host), dc(C.host), dbias(bias);
  std::vector<rvl_operand> epi_in = {operand(dbias.get(), dt, bias_view)};
  std::vector<rvl_instruction> epi = {ins(RVL_OP_ACC, dt),
                                      is_float(dt) ? cnst_f(dt, 2.0) : cnst_i(dt, 2),
                                      ins(RVL_OP_MUL, dt, 0, 1), load(dt, 0),
                                      ins(RVL_OP_ADD, dt, 2, 3)};
  rvl_contraction c{};
  c.struct_size = sizeof(c);
  c.dtype = dt;
  c.batch_rank = int32_t(batch.size());
  for (size_t d = 0; d < batch.size(); ++d) c.batch_shape[d] = batch[d];
  c.m = M; c.n = N; c.k = K;
  c.a = operand(da.get(), dt, A.view);
  c.b = operand(db.get(), dt, B.view);
  c.c = operand(dc.get(), dt, C.view);
  if (epilogue) {
    c.n_epilogue_inputs = 1;
    c.epilogue_inputs = epi_in.data();
    c.n_epilogue = int32_t(epi.size());
    c.epilogue = epi.data();
  }
  ok(api().execute_contraction(0, nullptr, &c), ctx);

  // Reference: the SDK interpreter (ACC = naive dot product, then the epilogue per element).
  HostBuf want = C.host;
  std::vector<const HostBuf*> epi_hosts;
  if (epilogue) epi_hosts.push_back(&bias);
  rvl::ref::run_contraction(c, A.host, B.host, epi_hosts, want);
  check_same(dc.read(dt), want, ctx);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(contractions)

BOOST_AUTO_TEST_CASE(sizes_and_dtypes) {
  const int64_t sizes[][3] = {{1, 1, 1}, {3, 17, 129}, {129, 3, 17}, {17, 129, 3},
                              {129, 129, 129}, {1, 129, 17}, {17, 1, 1}, {3, 3, 3}};
  for (int32_t dt = 0; dt < RVL_DTYPE_COUNT_; ++dt)
    for (const auto& s : sizes) run_contraction(dt, {}, s[0], s[1], s[2], false, false, false, false);
}

BOOST_AUTO_TEST_CASE(transposed_operands) {
  for (int32_t dt = 0; dt < RVL_DTYPE_COUNT_; ++dt) {
    run_contraction(dt, {}, 17, 129, 3, true, false, false, false);
    run_contraction(dt, {}, 3, 17, 129, false, true, false, false);
    run_contraction(dt, {}, 129, 17, 17, true, true, false, false);
  }
}

BOOST_AUTO_TEST_CASE(batches_broadcast_and_epilogue) {
  for (int32_t dt = 0; dt < RVL_DTYPE_COUNT_; ++dt) {
    run_contraction(dt, {2, 3}, 17, 3, 129, false, false, true, true);
    run_contraction(dt, {3}, 129, 17, 3, true, true, true, true);
    run_contraction(dt, {}, 3, 129, 17, false, true, false, true);
    run_contraction(dt, {2}, 1, 1, 1, false, false, false, true);
  }
  // Degenerate: K = 0 (accumulator is 0, epilogue still runs), and an empty batch.
  run_contraction(RVL_DTYPE_F32, {2}, 3, 4, 0, false, false, false, true);
  run_contraction(RVL_DTYPE_I32, {0}, 3, 4, 5, false, false, false, true);
}

BOOST_AUTO_TEST_SUITE_END()
