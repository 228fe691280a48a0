#include <ravel/backend.hpp>
#include <ravel/lowering/plan.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace rvl::lower {

rvl_scalar reduce_identity(int32_t reduce_op, int32_t dt) {
  rvl_scalar v{};
  const bool fl = dtype_is_float(dt);
  switch (reduce_op) {
    case RVL_REDUCE_SUM: break;  // 0 / false / +0.0
    case RVL_REDUCE_PROD: fl ? void(v.f = 1.0) : void(v.i = 1); break;
    case RVL_REDUCE_MAX:
      if (fl) v.f = -HUGE_VAL;
      else if (dt == RVL_DTYPE_I8) v.i = std::numeric_limits<int8_t>::min();
      else if (dt == RVL_DTYPE_I16) v.i = std::numeric_limits<int16_t>::min();
      else if (dt == RVL_DTYPE_I32) v.i = std::numeric_limits<int32_t>::min();
      else if (dt == RVL_DTYPE_I64) v.i = std::numeric_limits<int64_t>::min();
      break;  // unsigned and bool: 0 / false
    default:
      fail(RVL_STATUS_INTERNAL, "lowering: no identity for reduce op " + std::to_string(reduce_op));
  }
  return v;
}

Accumulator accumulator(int32_t reduce_op, int32_t out_dtype, int32_t value_dtype) {
  Accumulator a;
  a.lse = reduce_op == RVL_REDUCE_LOGSUMEXP;
  a.dtype = a.lse ? value_dtype : out_dtype;
  a.init[0] = reduce_identity(a.lse ? RVL_REDUCE_MAX : reduce_op, a.dtype);  // m starts at -inf
  a.init[1] = reduce_identity(RVL_REDUCE_SUM, a.dtype);                      // s at 0
  return a;
}

ReducePlan plan_reduction(const Space& s, int group, bool column_mode) {
  ReducePlan p;
  if (!s.reduced.empty() && s.reduced.back() && s.n_red >= 32) {
    p.kind = ReducePlan::Kind::Row;
    p.tx = 1;
    p.ty = group;
  } else if (column_mode && s.n_red >= 64 && group % 32 == 0) {
    p.kind = ReducePlan::Kind::Column;
    p.tx = 32;
    p.ty = group / 32;
  } else {
    p.kind = ReducePlan::Kind::Serial;
    p.tx = group;
    p.ty = 1;
  }
  return p;
}

const char* reduce_kind_name(ReducePlan::Kind k) {
  switch (k) {
    case ReducePlan::Kind::Serial: return "serial";
    case ReducePlan::Kind::Row: return "row";
    case ReducePlan::Kind::Column: return "column";
  }
  return "?";
}

GemmTile gemm_tile(int32_t dtype, int64_t m, int64_t n, int compute_units, bool register_blocking) {
  if (!register_blocking) return kPlainTile;
  const int64_t big_tiles = ((m + 127) / 128) * ((n + 127) / 128);
  if (dtype == RVL_DTYPE_F32 && big_tiles >= compute_units) return {128, 128, 8, 8, 8};
  return {64, 64, 8, 4, 4};
}

bool contraction_fits_32(const validate::Contraction& c, const GemmTile& t) {
  const int br = c.batch_rank;
  std::vector<int64_t> bshape(c.batch_shape, c.batch_shape + br);
  int64_t batch = 1;
  for (int64_t e : bshape) batch *= e;
  auto with = [&](int64_t x, int64_t y) { auto s = bshape; s.push_back(x); s.push_back(y); return s; };
  const long double lim = (long double)kNarrowLimit;
  bool fits = reach(c.a.offset, c.a.stride, with(c.m, c.k)) < lim &&
              reach(c.b.offset, c.b.stride, with(c.k, c.n)) < lim &&
              reach(c.epilogue.out.offset, c.epilogue.out.stride, with(c.m, c.n)) < lim &&
              c.m + t.bm < kNarrowLimit && c.n + t.bn < kNarrowLimit && c.k + t.bk < kNarrowLimit &&
              batch < kNarrowLimit;
  for (const validate::View& v : c.epilogue.inputs)
    fits = fits && (v.empty || reach(v.offset, v.stride, with(c.m, c.n)) < lim);
  return fits;
}

int vector_width(const Space& s, int32_t n_ins) {
  if (s.extent.size() != 1 || s.extent[0] < 8 || n_ins > 64) return 1;
  const SpaceView& out = s.out();
  if (out.stride[0] != 1 || out.offset % 4 != 0) return 1;
  for (const SpaceView& v : s.views) {
    if (v.empty) continue;
    if (!v.full(0, s.extent[0])) return 1;
    if (v.stride[0] != 0 && (v.stride[0] != 1 || v.offset % 4 != 0)) return 1;
  }
  return 4;
}

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string hash_name(const std::string& kind, const std::string& body) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(fnv1a(body.data(), body.size())));
  return "rvl_" + kind + "_" + buf;
}

}  // namespace rvl::lower
