// ABI minor versions in both directions (backend.h, "struct sizes per version"):
//  - a plugin built as if against 1.0 (table size and abi_minor of 1.0, fills only the 1.0
//    members) loads in this 1.1 core, its devices are listed with the 1.1 members empty, and
//    data goes through its buffers; a 1.1 plugin beside it reports its 1.1 members.
//  - the other direction (a 1.0 host calling the 1.1 oneTBB plugin with 1.0 struct sizes) is in
//    tests/abi/test_tbb_abi.cpp, which talks to the plugin through the C table directly.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Runtime;
using ravel::RuntimeOptions;

namespace {
const std::string kDir = BROKEN_PLUGIN_DIR;
RuntimeOptions only(const std::vector<std::string>& dirs) {
  return RuntimeOptions{.config_path = {}, .extra_paths = dirs, .use_environment = false,
                        .use_default_paths = false, .load_plugins = true, .excluded_plugins = {}};
}
}  // namespace

BOOST_AUTO_TEST_CASE(plugin_built_against_1_0_loads_in_a_1_1_core) {
  Runtime rt(only({kDir + "/v1_0", kDir + "/kernel_fails"}));
  BOOST_TEST_REQUIRE(rt.plugins().size() == 2u);
  for (const auto& r : rt.plugins()) {
    BOOST_TEST(r.loaded, r.path << ": " << r.status);
    BOOST_TEST(r.abi_major == 1u);
  }
  const auto& old = rt.plugins()[0].name == "oldminor" ? rt.plugins()[0] : rt.plugins()[1];
  BOOST_TEST(old.name == "oldminor");
  BOOST_TEST(old.abi_minor == 0u);
  bool seen_old = false, seen_new = false;
  for (const auto& d : rt.devices()) {
    if (d.device.backend() == "oldminor") {
      seen_old = true;
      BOOST_TEST(d.name == "oldminor test device");  // 1.0 members arrive
      BOOST_TEST(d.arch.empty());                     // 1.1 members stay empty, not garbage
      BOOST_TEST(d.warp_size == 0);
      BOOST_TEST(d.details.empty());
    } else {
      seen_new = true;
      BOOST_TEST(d.arch == "test-arch");
      BOOST_TEST(d.warp_size == 1);
      BOOST_TEST(d.details == "case=5");
    }
  }
  BOOST_TEST(seen_old);
  BOOST_TEST(seen_new);
}

BOOST_AUTO_TEST_CASE(buffers_of_a_1_0_plugin_carry_data) {
  Runtime::reset(only({kDir + "/v1_0"}));
  const std::vector<float> values{1.5f, -2.0f, 3.25f};
  ravel::Tensor t = ravel::Tensor::from_vector<float>(values, {3}).to(ravel::Device("oldminor", 0));
  BOOST_TEST(t.device().str() == "oldminor:0");
  const std::vector<float> back = t.to_vector<float>();
  BOOST_TEST(back == values, boost::test_tools::per_element());
  Runtime::reset(RuntimeOptions{});
}

// ABI 1.7 dtypes on a 1.0 plugin (Note [Dtypes a device lacks] in core/src/runtime/realize.cpp):
// its mask has no f16/bf16/i8/... bits, so it holds their bytes, reads convert on the host, and
// any kernel in them is refused before anything runs, naming op, dtype and device. Expected
// values are IEEE-754 binary16 encodings (1.5 = 0x3E00, -2 = 0xC000, 65504 = 0x7BFF, +inf =
// 0x7C00) and the ABI's CAST rules (truncate toward zero, saturate).
BOOST_AUTO_TEST_CASE(dtypes_of_abi_1_7_on_a_1_0_plugin) {
  Runtime::reset(only({kDir + "/v1_0"}));
  const ravel::Device dev("oldminor", 0);
  using ravel::DType;
  using ravel::Float16;
  using ravel::Tensor;
  const Tensor h = Tensor::from_vector(std::vector<Float16>{Float16(1.5f), Float16(-2.0f), Float16(65504.0f)}, {3}, dev);
  BOOST_TEST(h.device().str() == "oldminor:0");
  BOOST_TEST(h.to_vector<float>() == (std::vector<float>{1.5f, -2.0f, 65504.0f}));
  std::vector<uint16_t> bits;
  for (const Float16& x : h.to_vector<Float16>()) bits.push_back(x.bits);
  BOOST_TEST(bits == (std::vector<uint16_t>{0x3E00, 0xC000, 0x7BFF}));
  BOOST_TEST(h.to_vector<int8_t>() == (std::vector<int8_t>{1, -2, 127}));
  const Tensor f = Tensor::from_vector(std::vector<float>{1.0f + 1.0f / 2048, 70000.0f}, {2}, dev);
  bits.clear();
  for (const Float16& x : f.to_vector<Float16>()) bits.push_back(x.bits);
  BOOST_TEST(bits == (std::vector<uint16_t>{0x3C00, 0x7C00}));  // the tie 1 + 2^-11 goes to even
  auto refused = [&](const Tensor& t, const std::string& op, const std::string& dt) {
    try {
      t.realize();
      BOOST_ERROR("no error for " << op);
    } catch (const ravel::DTypeError& e) {
      const std::string m = e.what();
      BOOST_TEST(m.find(op) != std::string::npos, m);
      BOOST_TEST(m.find(dt) != std::string::npos, m);
      BOOST_TEST(m.find("oldminor:0") != std::string::npos, m);
      BOOST_TEST(m.find("nothing was run") != std::string::npos, m);
    }
  };
  refused(h.add(h), "add", "f16");
  refused(f.cast(DType::BF16), "cast to bf16", "bf16");
  refused(h.cast(DType::F32), "cast to f32", "f16");
  refused(Tensor::from_vector(std::vector<int16_t>{1, 2}, {2}, dev).sum(), "", "i16");  // sum or its cast to i64
  BOOST_TEST(f.to_vector<float>() == (std::vector<float>{1.0f + 1.0f / 2048, 70000.0f}));  // untouched
}
