// Host-side helpers of the ABI suite. The reference evaluator is the SDK's (Ravel::reference,
// <ravel/conformance/reference.hpp>), which shares no code with any plugin.
#include "common.hpp"

#include <cmath>

namespace abitest {

HostBuf make_buf(int32_t dtype, const std::vector<Val>& vals) {
  HostBuf h(dtype, static_cast<int64_t>(vals.size()));
  for (size_t i = 0; i < vals.size(); ++i) h.set(static_cast<int64_t>(i), vals[i]);
  return h;
}

HostBuf filled(int32_t dtype, int64_t n, const std::function<Val(int64_t)>& f) {
  HostBuf h(dtype, n);
  for (int64_t i = 0; i < n; ++i) h.set(i, f(i));
  return h;
}

void check_same(const HostBuf& got, const HostBuf& want, const std::string& ctx, double rel) {
  BOOST_REQUIRE_EQUAL(got.bytes.size(), want.bytes.size());
  int reported = 0;
  for (int64_t i = 0; i < want.elements() && reported < 5; ++i) {
    const Val g = got.get(i), w = want.get(i);
    bool same;
    if (is_float(want.dtype)) {
      same = (std::isnan(g.f) && std::isnan(w.f)) || g.f == w.f ||
             (rel > 0 && std::fabs(g.f - w.f) <= rel * std::fabs(w.f));
    } else {
      same = g.i == w.i;
    }
    if (!same) {
      ++reported;
      BOOST_ERROR(ctx << ": element " << i << " is " << (is_float(want.dtype) ? g.f : double(g.i))
                      << " (i=" << g.i << "), expected "
                      << (is_float(want.dtype) ? w.f : double(w.i)) << " (i=" << w.i << ")");
    }
  }
}

}  // namespace abitest
