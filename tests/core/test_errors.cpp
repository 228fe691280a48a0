// Error paths: each checks the exception's type and that its message names what was expected
// and what was got. Where the API docs leave the exact class open (pad/shrink/squeeze/item
// misuse could be a ShapeError or a ValueError), either is accepted and the test says so.
#include "common.hpp"

using namespace rtest;

namespace {

// Every inner list is a set of alternatives, one of which the message must contain.
using Needles = std::vector<std::vector<std::string>>;

template <class E, class E2 = E, class F>
void expect_throw(const std::string& what, F&& f, const Needles& needles) {
  BOOST_TEST_CONTEXT(what) {
    std::string msg;
    bool ok = false;
    try {
      f();
    } catch (const ravel::Error& e) {
      if (!dynamic_cast<const E*>(&e) && !dynamic_cast<const E2*>(&e)) {
        BOOST_ERROR("wrong exception type (" << typeid(e).name() << "): " << e.what());
        return;
      }
      msg = e.what(), ok = true;
    } catch (const std::exception& e) {
      BOOST_ERROR("wrong exception type (" << typeid(e).name() << "): " << e.what());
      return;
    }
    if (!ok) {
      BOOST_ERROR("no exception thrown");
      return;
    }
    for (const auto& alts : needles) {
      bool found = false;
      for (const auto& n : alts) found = found || msg.find(n) != std::string::npos;
      std::string list;
      for (const auto& n : alts) list += "'" + n + "' ";
      BOOST_TEST(found, "message \"" << msg << "\" should contain one of " << list);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(shape_errors) {
  auto a = Tensor::zeros({3, 2}), b = Tensor::zeros({4});
  expect_throw<ravel::ShapeError>("add [3, 2] + [4]", [&] { a.add(b); }, {{"[3, 2]"}, {"[4]"}});
  expect_throw<ravel::ShapeError>("reshape [2, 3] -> [4, 2]", [&] { Tensor::zeros({2, 3}).reshape({4, 2}); },
                                  {{"[4, 2]"}, {"[2, 3]", "6"}});
  expect_throw<ravel::ShapeError, ravel::ValueError>("reshape with two -1",
                                                      [&] { Tensor::zeros({2, 3}).reshape({-1, -1}); }, {{"-1"}});
  expect_throw<ravel::ShapeError>("expand [2, 3] -> [4, 3]", [&] { Tensor::zeros({2, 3}).expand({4, 3}); },
                                  {{"[2, 3]"}, {"[4, 3]"}});
  expect_throw<ravel::ShapeError>("matmul [2, 3] @ [4, 5]",
                                  [&] { Tensor::zeros({2, 3}).matmul(Tensor::zeros({4, 5})); }, {{"[2, 3]"}, {"[4, 5]"}});
  expect_throw<ravel::ShapeError>("matmul [3] @ [4]", [&] { Tensor::zeros({3}).matmul(Tensor::zeros({4})); },
                                  {{"[3]"}, {"[4]"}});
  expect_throw<ravel::ShapeError>("matmul of a 0-d operand", [&] { Tensor::scalar(1).matmul(Tensor::zeros({2})); },
                                  {{"[]"}});
  expect_throw<ravel::ShapeError>("dot [2, 2] . [2]", [&] { Tensor::zeros({2, 2}).dot(Tensor::zeros({2})); },
                                  {{"[2, 2]"}});
  expect_throw<ravel::ShapeError>("where [2] [3] [2]",
                                  [&] { Tensor::where((Tensor::zeros({2}) < 1.0), Tensor::zeros({3}), Tensor::zeros({2})); },
                                  {{"[2]"}, {"[3]"}});
  expect_throw<ravel::ShapeError>("concatenate [2, 3] with [2, 4] on axis 0",
                                  [&] { Tensor::concatenate({Tensor::zeros({2, 3}), Tensor::zeros({2, 4})}, 0); },
                                  {{"[2, 3]"}, {"[2, 4]"}});
  expect_throw<ravel::ShapeError>("stack [2] with [3]", [&] { Tensor::stack({Tensor::zeros({2}), Tensor::zeros({3})}); },
                                  {{"[2]"}, {"[3]"}});
  expect_throw<ravel::ShapeError, ravel::ValueError>(
      "from_vector of 3 values as [2, 2]", [&] { Tensor::from_vector<float>({1, 2, 3}, {2, 2}); }, {{"3"}, {"[2, 2]", "4"}});
  expect_throw<ravel::ShapeError, ravel::ValueError>("pad with negative widths",
                                                      [&] { Tensor::zeros({3}).pad({{-1, 0}}); }, {{"-1"}});
  expect_throw<ravel::ShapeError, ravel::ValueError>("pad with the wrong number of pairs",
                                                      [&] { Tensor::zeros({3}).pad({{1, 0}, {0, 1}}); }, {{"2"}, {"1"}});
  expect_throw<ravel::ShapeError, ravel::ValueError>("shrink [0, 5) of an axis of 3",
                                                      [&] { Tensor::zeros({3}).shrink({{0, 5}}); }, {{"5"}, {"3"}});
  expect_throw<ravel::ShapeError, ravel::ValueError>("shrink with lo > hi", [&] { Tensor::zeros({3}).shrink({{2, 1}}); },
                                                      {{"2"}, {"1"}});
  expect_throw<ravel::ShapeError, ravel::ValueError>("squeeze an axis of size 3",
                                                      [&] { Tensor::zeros({1, 3}).squeeze(1); }, {{"3"}});
}

BOOST_AUTO_TEST_CASE(axis_errors) {
  auto x = Tensor::zeros({2, 3});
  // AxisError is a ShapeError.
  BOOST_TEST((std::is_base_of_v<ravel::ShapeError, ravel::AxisError>));
  expect_throw<ravel::AxisError>("sum(5) of a 2-D tensor", [&] { x.sum(5); }, {{"5"}, {"2"}});
  expect_throw<ravel::AxisError>("sum(-3) of a 2-D tensor", [&] { x.sum(-3); }, {{"-3"}, {"2"}});
  expect_throw<ravel::AxisError>("max({0, 0}) repeats an axis", [&] { x.max({0, 0}); }, {{"0"}});
  expect_throw<ravel::AxisError>("permute({0, 0}) repeats an axis", [&] { x.permute({0, 0}); }, {{"0"}});
  expect_throw<ravel::AxisError>("permute({0, 2}) names axis 2 of a 2-D tensor", [&] { x.permute({0, 2}); }, {{"2"}});
  expect_throw<ravel::ShapeError>("permute({0}) has too few axes", [&] { x.permute({0}); }, {{"1", "[0]"}, {"2"}});
  expect_throw<ravel::AxisError>("transpose(0, 2)", [&] { x.transpose(0, 2); }, {{"2"}});
  expect_throw<ravel::AxisError>("flip(2)", [&] { x.flip(2); }, {{"2"}});
  expect_throw<ravel::AxisError>("select(2, 0)", [&] { x.select(2, 0); }, {{"2"}});
  expect_throw<ravel::AxisError>("unsqueeze(4) of a 2-D tensor", [&] { x.unsqueeze(4); }, {{"4"}});
  expect_throw<ravel::AxisError>("softmax(2)", [&] { x.softmax(2); }, {{"2"}});
  expect_throw<ravel::AxisError>("argmax(3)", [&] { x.argmax(3); }, {{"3"}});
  expect_throw<ravel::AxisError>("cumsum(-3)", [&] { x.cumsum(-3); }, {{"-3"}});
  expect_throw<ravel::AxisError>("size(2)", [&] { (void)x.size(2); }, {{"2"}});
  expect_throw<ravel::AxisError>("stack axis 3 of 2-D parts", [&] { Tensor::stack({x, x}, 3); }, {{"3"}});
}

BOOST_AUTO_TEST_CASE(dtype_errors) {
  auto f = Tensor::zeros({2}), g = Tensor::zeros({2}, DType::F64);
  expect_throw<ravel::DTypeError>("logical_and on f32", [&] { f.logical_and(f); }, {{"f32"}});
  expect_throw<ravel::DTypeError>("logical_or on f64", [&] { g.logical_or(g); }, {{"f64"}});
  expect_throw<ravel::DTypeError>("logical_xor on f32 with bool", [&] { f.logical_xor((f < 1.0)); }, {{"f32"}});
  std::vector<uint8_t> bv = {1, 0};
  auto b = Tensor::from_data(bv.data(), DType::Bool, {2});
  // docs/dtypes.md: neg rejects bool (use logical_not); sub of two bools is a DTypeError.
  expect_throw<ravel::DTypeError>("neg of bool", [&] { b.neg(); }, {{"bool"}});
  expect_throw<ravel::DTypeError>("sub of two bools", [&] { b.sub(b); }, {{"bool"}});
  expect_throw<ravel::DTypeError>("one_hot of f32", [&] { f.one_hot(3); }, {{"f32"}});
  expect_throw<ravel::DTypeError>("gather with an f32 index",
                                  [&] { Tensor::zeros({2, 2}).gather(0, Tensor::zeros({2, 2})); }, {{"f32"}});
}

BOOST_AUTO_TEST_CASE(value_errors) {
  Tensor undefined;
  BOOST_TEST(!undefined.defined());
  expect_throw<ravel::ValueError>("to_vector on an undefined tensor", [&] { undefined.to_vector<float>(); }, {{"undefined", "defined", "null", "empty"}});
  expect_throw<ravel::ValueError>("add with an undefined tensor", [&] { Tensor::zeros({1}).add(undefined); }, {{"undefined", "defined", "null", "empty"}});
  expect_throw<ravel::ValueError>("realize an undefined tensor", [&] { undefined.realize(); }, {{"undefined", "defined", "null", "empty"}});
  expect_throw<ravel::ValueError, ravel::ShapeError>("item() of 3 elements", [&] { Tensor::zeros({3}).item<float>(); },
                                                      {{"3"}});
  expect_throw<ravel::ValueError, ravel::ShapeError>("item() of 0 elements", [&] { Tensor::zeros({0}).item<float>(); },
                                                      {{"0"}});
  expect_throw<ravel::ValueError>("at(3) of an axis of 3", [&] { Tensor::zeros({3}).at(3); }, {{"3"}});
  expect_throw<ravel::ValueError>("at(-4) of an axis of 3", [&] { Tensor::zeros({3}).at(-4); }, {{"-4"}});
  expect_throw<ravel::ValueError>("select(1, 5) of [2, 3]", [&] { Tensor::zeros({2, 3}).select(1, 5); }, {{"5"}});
  expect_throw<ravel::ValueError>("slice step 0", [&] { Tensor::zeros({3}).slice(0, 0, 3, 0); }, {{"0"}});
  expect_throw<ravel::ValueError>("zeros with a negative size", [&] { Tensor::zeros({2, -1}); }, {{"-1"}});
  expect_throw<ravel::ValueError>("arange with step 0", [&] { Tensor::arange(0, 3, 0); }, {{"0"}});
  expect_throw<ravel::ValueError>("linspace with n = -1", [&] { Tensor::linspace(0, 1, -1); }, {{"-1"}});
  expect_throw<ravel::ValueError>("eye(-2)", [&] { Tensor::eye(-2); }, {{"-2"}});
  expect_throw<ravel::ValueError>("one_hot with 0 classes", [&] { Tensor::arange(3).one_hot(0); }, {{"0"}});
}

BOOST_AUTO_TEST_CASE(device_errors) {
  expect_throw<ravel::DeviceError>("Device::parse(\"x:y\")", [&] { ravel::Device::parse("x:y"); }, {{"x:y"}});
  expect_throw<ravel::DeviceError>("Device::parse(\"tbb_cpu:\")", [&] { ravel::Device::parse("tbb_cpu:"); },
                                   {{"tbb_cpu:"}});
  expect_throw<ravel::DeviceError>(
      "a tensor on an unknown device",
      [&] { Tensor::zeros({2}, DType::F32, ravel::Device("nosuch_backend", 0)).to_vector<float>(); },
      {{"nosuch_backend"}, {"tbb_cpu"}});
  expect_throw<ravel::DeviceError>(
      "device index out of range",
      [&] { Tensor::zeros({2}, DType::F32, ravel::Device("tbb_cpu", 99)).to_vector<float>(); }, {{"99"}});
}

// Composites name the operation the user called, not the primitive inside them (before, softmax(2)
// said "max: axis 2", min of an empty selection said "max of an empty selection").
BOOST_AUTO_TEST_CASE(composite_errors_name_the_users_operation) {
  Tensor x = Tensor::ones({2, 3});
  expect_throw<ravel::AxisError>("softmax(2)", [&] { x.softmax(2); }, {{"softmax: axis 2"}});
  expect_throw<ravel::AxisError>("log_softmax(-3)", [&] { x.log_softmax(-3); }, {{"log_softmax: axis -3"}});
  expect_throw<ravel::AxisError>("logsumexp(5)", [&] { x.logsumexp(5); }, {{"logsumexp: axis 5"}});
  expect_throw<ravel::AxisError>("min(4)", [&] { x.min(4); }, {{"min: axis 4"}});
  expect_throw<ravel::ValueError>("min of an empty selection", [&] { Tensor::ones({0, 3}).min(0); },
                                  {{"min of an empty selection"}});
}
