#include "harness.hpp"

// GCC 12 reports -Wmaybe-uninitialized false positives inside libstdc++ <regex> (std::function)
// at -O2 with sanitizers; the code below does not own any of it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace rvl::conformance {

std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

void add_case(const std::string& group, const std::string& name, std::function<void(Measure&)> body) {
  cases().push_back(Case{group, name, std::move(body)});
}

std::string dtype_str(int32_t dt) {
  return rvl::dtype_valid(dt) ? rvl::dtype_name(dt) : "dtype" + std::to_string(dt);
}

std::string op_str(int32_t op) {
  return rvl::op_valid(op) ? rvl::op_name(op) : "op" + std::to_string(op);
}

// ---- error measure -----------------------------------------------------------------------
double threshold(Accuracy a, int32_t dt) {
  switch (a) {
    case Accuracy::Exact: return rvl::accuracy_threshold(rvl::OpAccuracy::Exact, dt);
    case Accuracy::Rounding: return rvl::accuracy_threshold(rvl::OpAccuracy::Rounding, dt);
    case Accuracy::Transcendental:
      return rvl::accuracy_threshold(rvl::OpAccuracy::Transcendental, dt);
    case Accuracy::Accumulation:
      // Halves accumulate in f32 and round once: the rounding dominates (as for Exact).
      if (rvl::dtype_is_half(dt)) return rvl::accuracy_threshold(rvl::OpAccuracy::Exact, dt);
      return dt == RVL_DTYPE_F32 ? 1e-8 : dt == RVL_DTYPE_F64 ? 1e-20 : 0;
  }
  return 0;
}

Accuracy accuracy_of(int32_t op) {
  switch (rvl::op_info(op).accuracy) {
    case rvl::OpAccuracy::Exact: return Accuracy::Exact;
    case rvl::OpAccuracy::Rounding: return Accuracy::Rounding;
    case rvl::OpAccuracy::Transcendental: return Accuracy::Transcendental;
  }
  return Accuracy::Exact;
}

namespace {
std::string fmt(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}
}  // namespace

double compare(const ref::HostBuffer& got, const ref::HostBuffer& want, double thr,
               const std::string& what) {
  if (got.dtype != want.dtype || got.bytes.size() != want.bytes.size())
    throw Failure(what + ": result buffer has the wrong size");
  const int64_t n = want.elements();
  if (n == 0) return 0;
  if (!ref::is_float(want.dtype)) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; ++i)
      if (got.get(i).i != want.get(i).i && bad++ == 0) first = i;
    if (bad)
      throw Failure(what + ": " + std::to_string(bad) + " of " + std::to_string(n) +
                    " elements differ (exact match required); first at element " +
                    std::to_string(first) + ": got " + std::to_string(got.get(first).i) +
                    ", expected " + std::to_string(want.get(first).i));
    return 0;
  }
  double err = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got.get(i).f, w = want.get(i).f;
    if (std::isnan(w) || std::isinf(w) || std::isnan(g) || std::isinf(g)) {
      const bool same = (std::isnan(w) && std::isnan(g)) || (!std::isnan(w) && g == w);
      if (!same)
        throw Failure(what + ": element " + std::to_string(i) + " is " + fmt(g) + ", expected " +
                      fmt(w) + " (NaN/Inf must match exactly)");
      continue;
    }
    err += (g - w) * (g - w);
    norm += w * w;
  }
  const double nmse = err / std::max(norm, double(n) * 1e-30);
  if (!(nmse <= thr)) {
    int64_t worst = 0;
    double worst_d = -1;
    for (int64_t i = 0; i < n; ++i) {
      const double d = std::fabs(got.get(i).f - want.get(i).f);
      if (d > worst_d) worst_d = d, worst = i;
    }
    throw Failure(what + ": normalised mean squared error " + fmt(nmse) + " exceeds " + fmt(thr) +
                  "; worst element " + std::to_string(worst) + " is " + fmt(got.get(worst).f) +
                  ", expected " + fmt(want.get(worst).f));
  }
  return nmse;
}

}  // namespace rvl::conformance
