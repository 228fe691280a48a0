// Devices that lack ops (ABI 1.6 rvl_device_properties.ops; Note [Capabilities] in
// core/src/graph/ops.hpp), through the public API: RAVEL_MASK_OPS makes the runtime treat the
// oneTBB device as lacking ops, and then
//  - every op with a decomposition gives the values it gave with the op present (bit for bit
//    for the exact ones, within 2 ulps for SQRT), LOGSUMEXP (a reduction) included;
//  - an op without one (SIN) is refused with a DeviceError naming op, dtype and device, before
//    any kernel of the realization ran, even when the kernel cache holds a plan for the same
//    graph made while the op was present (the plan depends on the device's ops);
//  - a bad RAVEL_MASK_OPS is a ConfigError naming the name.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Runtime;
using ravel::RuntimeOptions;
using ravel::Tensor;

namespace {

// Sets RAVEL_MASK_OPS for one scope and starts a runtime that reads it; the default one after.
struct MaskedOps {
  explicit MaskedOps(const char* ops) {
    setenv("RAVEL_MASK_OPS", ops, 1);
    Runtime::reset(RuntimeOptions{});
  }
  ~MaskedOps() {
    unsetenv("RAVEL_MASK_OPS");
    Runtime::reset(RuntimeOptions{});
  }
};

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const std::vector<float> kA = {kNaN, kInf, -kInf, 0.0f, -0.0f, 0.5f, -0.5f, 1.5f, -2.5f, 3e38f, 1e-40f, 7.25f, 100.0f, -1e10f, 2.0f, 9.0f};
const std::vector<float> kB = {1.0f, kNaN, 2.0f, -0.0f, 0.0f, -0.5f, 0.5f, 1.5f, 8.0f, -3e38f, 1e-40f, 7.0f, kInf, -kInf, 2.0f, 3.0f};

// The results of every op with a decomposition, and of the LOGSUMEXP composites, as f64 vectors.
std::vector<std::vector<double>> evaluate() {
  Tensor a = Tensor::from_vector<float>(kA, {16}), b = Tensor::from_vector<float>(kB, {16});
  Tensor i = Tensor::from_vector<int32_t>({INT32_MIN, INT32_MAX, -1, 0, 1, 2, -7, 100}, {8});
  Tensor j = Tensor::from_vector<int32_t>({0, INT32_MIN, 5, 0, -1, 2, 9, 100}, {8});
  Tensor p = Tensor::from_vector<bool>({false, false, true, true}, {4});
  Tensor q = Tensor::from_vector<bool>({false, true, false, true}, {4});
  Tensor x = Tensor::from_vector<float>({1000, -1000, 0.5, 3, -kInf, 2, 1, 1, 1, 1, 1e-3f, 88}, {3, 4});
  std::vector<Tensor> outs = {a.sqrt(),        a.maximum(b),        a.ne(b),          a.neg(),
                              a.trunc(),       i.maximum(j),        i.ne(j),          i.neg(),
                              p.logical_and(q), p.logical_or(q),    p.logical_xor(q), p.ne(q),
                              a.relu(),        x.logsumexp({1}),    x.softmax(1),     x.log_softmax(1),
                              (a.sqrt() + b).maximum(a.neg()).ne(b)};
  std::vector<std::vector<double>> r;
  for (Tensor& t : outs) r.push_back(t.cast(ravel::DType::F64).to_vector<double>());
  return r;
}

bool close(double w, double g, double ulps) {
  if (std::isnan(w) || std::isnan(g)) return std::isnan(w) && std::isnan(g);
  if (w == g) return true;
  return std::fabs(w - g) <= ulps * std::fabs(w) * 0x1p-23;
}

}  // namespace

BOOST_AUTO_TEST_CASE(masked_ops_are_decomposed_to_the_same_values) {
  Runtime::reset(RuntimeOptions{});
  const auto want = evaluate();
  MaskedOps masked("SQRT,max,CMPNE,NEG,TRUNC,AND,OR,XOR,logsumexp");
  const auto got = evaluate();
  BOOST_TEST_REQUIRE(want.size() == got.size());
  for (size_t k = 0; k < want.size(); ++k) {
    BOOST_TEST_REQUIRE(want[k].size() == got[k].size());
    // SQRT (k == 0 and in the last expression) rounds four times; the LOGSUMEXP composites
    // (k 13..15) are another formula (max, then a sum of exponentials) with f32 rounding.
    const double ulps = k == 0 || k == 16 ? 2 : k >= 13 ? 8 : 0;
    for (size_t e = 0; e < want[k].size(); ++e)
      BOOST_TEST(close(want[k][e], got[k][e], ulps), "output " << k << " element " << e << ": " << want[k][e]
                                                                << " with the op, " << got[k][e] << " decomposed");
  }
}

BOOST_AUTO_TEST_CASE(an_op_without_decomposition_is_refused_before_anything_runs) {
  Runtime::reset(RuntimeOptions{});
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  // Two kernels: the sum, then the elementwise kernel with SIN. Made once with SIN present, so
  // the kernel cache holds this graph's plan.
  (x + x.sum(0)).sin().realize();
  MaskedOps masked("SIN");
  Tensor y = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor z = (y + y.sum(0)).sin();
  ravel::reset_stats();
  try {
    z.realize();
    BOOST_FAIL("SIN ran on a device that lacks it");
  } catch (const ravel::DeviceError& e) {
    const std::string m = e.what();
    BOOST_TEST(m.find("SIN on f32") != std::string::npos, m);
    BOOST_TEST(m.find(y.device().str()) != std::string::npos, m);  // names the device (hip:0 on the GPU machine)
  }
  BOOST_TEST(ravel::cumulative_stats().kernels() == 0);  // not even the sum ran
  // What does not use SIN still runs.
  BOOST_TEST(y.sum().item<float>() == 10.0f);
}

BOOST_AUTO_TEST_CASE(a_bad_mask_is_a_config_error) {
  for (const char* bad : {"SQRT,FOO", "LOAD"}) {
    setenv("RAVEL_MASK_OPS", bad, 1);
    try {
      Runtime::reset(RuntimeOptions{});
      BOOST_FAIL("RAVEL_MASK_OPS=" << bad << " was accepted");
    } catch (const ravel::ConfigError& e) {
      const std::string m = e.what();
      BOOST_TEST(m.find("RAVEL_MASK_OPS") != std::string::npos, m);
      BOOST_TEST(m.find(std::string(bad).substr(std::string(bad).find_last_of(',') + 1)) != std::string::npos, m);
    }
  }
  unsetenv("RAVEL_MASK_OPS");
  Runtime::reset(RuntimeOptions{});
}
