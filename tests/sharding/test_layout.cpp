// Tensor::shard / replicate / sharding / shards / to: where parts live, how sizes split
// (numpy.array_split's rule, written out here independently), exact gathers in every dtype,
// zero-size parts, and the errors of bad meshes.
#include "../core/expect_error.hpp"
#include "sharding_common.hpp"
#include "test_support.hpp"

using namespace stest;

namespace {

// numpy.array_split(np.arange(size), n): the first size % n parts have one element more.
std::vector<int64_t> array_split_bounds(int64_t size, int64_t n) {
  std::vector<int64_t> b{0};
  for (int64_t i = 0; i < n; ++i) b.push_back(b.back() + (size / n) + (i < size % n ? 1 : 0));
  return b;
}

}  // namespace

BOOST_AUTO_TEST_CASE(shard_splits_like_array_split_and_gathers_exactly) {
  const DType dtypes[] = {DType::Bool, DType::U8, DType::I32, DType::I64, DType::F32, DType::F64};
  for (size_t n : kMeshSizes)
    for (DType dt : dtypes)
      for (int64_t rows : {0, 1, 2, 5, 8, 13})
        for (int64_t axis : {0, 1}) {
          BOOST_TEST_CONTEXT(n << " devices, " << ravel::dtype_name(dt) << ", rows " << rows << ", axis " << axis) {
            const Shape shape = axis == 0 ? Shape{rows, 3} : Shape{3, rows};
            Tensor x = data(shape, static_cast<int>(rows), dt);
            Tensor s = x.shard(mesh(n), axis);
            if (n == 1) {
              BOOST_TEST(!s.sharding().has_value());  // a mesh of one is a tensor on that device
              check_exact(s, x);
              continue;
            }
            BOOST_TEST_REQUIRE(s.sharding().has_value());
            BOOST_TEST(s.sharding().value().axis.value() == axis);
            BOOST_TEST(s.sharding().value().bounds == array_split_bounds(rows, static_cast<int64_t>(n)));
            BOOST_TEST(s.shape() == shape);
            check_parts(s);
            check_exact(s.to(mesh(n)[n - 1]), x);  // gathered on the last device
            check_exact(s, x);                      // read: gathered on the first
          }
        }
}

BOOST_AUTO_TEST_CASE(gathers_keep_negative_zero_and_nan) {
  const float nan = std::nanf("");
  Tensor x = Tensor::from_vector<float>({-0.0f, 1.0f, nan, -INFINITY, -0.0f, 0.0f}, {6});
  for (size_t n : {2u, 3u, 4u}) {
    Tensor s = x.shard(mesh(n));
    std::vector<float> got = s.to_vector<float>();
    BOOST_TEST(std::signbit(got[0]));
    BOOST_TEST(std::signbit(got[4]));
    BOOST_TEST(std::isnan(got[2]));
    BOOST_TEST(got[3] == -INFINITY);
  }
}

BOOST_AUTO_TEST_CASE(replicate_puts_the_whole_tensor_on_every_device) {
  Tensor x = data({4, 5}, 3);
  for (size_t n : {2u, 3u, 8u}) {
    Tensor r = x.replicate(mesh(n));
    BOOST_TEST_REQUIRE(r.sharding().has_value());
    BOOST_TEST(r.sharding().value().replicated());
    BOOST_TEST(r.sharding().value().devices == mesh(n));
    check_parts(r);
    for (const Tensor& p : r.shards()) check_exact(p, x);
    check_exact(r.to(mesh(n)[1]), x);
  }
}

BOOST_AUTO_TEST_CASE(resharding_moves_data_and_keeps_values) {
  Tensor x = data({6, 4}, 5);
  Tensor a = x.shard(mesh(3), 0);
  Tensor b = a.shard(mesh(3), 1);  // split along the other axis
  BOOST_TEST(b.sharding().value().axis.value() == 1);
  check_exact(b, x);
  Tensor c = b.shard(mesh(2), 0);  // onto another mesh
  BOOST_TEST(c.sharding().value().devices == mesh(2));
  check_exact(c, x);
  Tensor d = c.replicate(mesh(4));
  check_exact(d, x);
  check_exact(d.shard(mesh(4), 1), x);  // replicas are cut locally
}

BOOST_AUTO_TEST_CASE(the_sharding_describes_itself) {
  Tensor s = data({5}).shard(mesh(2));
  BOOST_TEST(s.sharding().value().str() == "split axis 0 over tbb_cpu:0 [0, 3), tbb_cpu:1 [3, 5)");
  BOOST_TEST(data({5}).replicate(mesh(2)).sharding().value().str() == "replicated over tbb_cpu:0, tbb_cpu:1");
  BOOST_TEST(s.device() == mesh(2)[0]);
  BOOST_TEST(data({5}).shards().size() == 1u);
}

BOOST_AUTO_TEST_CASE(bad_meshes_are_refused_with_what_was_wrong) {
  Tensor x = data({4, 4});
  const Device d0 = mesh(2)[0], d1 = mesh(2)[1];
  rtest::expect_error<ravel::DeviceError>("duplicate", [&] { x.shard({d0, d1, d0}); }, {"tbb_cpu:0", "twice"});
  rtest::expect_error<ravel::DeviceError>("empty", [&] { x.replicate({}); }, {"at least one device"});
  rtest::expect_error<ravel::DeviceError>("unknown", [&] { x.shard({d0, Device("tbb_cpu", 99)}); }, {"tbb_cpu:99"});
  rtest::expect_error<ravel::DeviceError>("no such backend", [&] { x.shard({d0, Device("nosuch", 0)}); }, {"nosuch"});
  rtest::expect_error<ravel::AxisError>("axis", [&] { x.shard({d0, d1}, 2); }, {"shard", "2"});
  rtest::expect_error<ravel::AxisError>("scalar", [&] { Tensor::scalar(1.0).shard({d0, d1}); }, {"shard"});
  rtest::expect_error<ravel::ValueError>("undefined", [&] { Tensor().shard({d0, d1}); }, {"shard"});
}

BOOST_AUTO_TEST_CASE(printing_files_and_dlpack_of_a_sharded_tensor) {
  Tensor x = data({4, 3});
  Tensor s = x.shard(mesh(2), 0);
  BOOST_TEST(s.to_string() == x.to_string());
  ravel::PrintOptions meta;
  meta.show_meta = true;
  BOOST_TEST(s.to_string(meta).find("device=split axis 0 over tbb_cpu:0 [0, 2), tbb_cpu:1 [2, 4)") != std::string::npos);
  const auto path = (scratch_dir() / "sharded.npy").string();
  ravel::save_npy(path, s);  // gathered
  check_exact(ravel::load_npy(path), x);
  rtest::expect_error<ravel::DeviceError>("dlpack", [&] { ravel::to_dlpack(s); }, {"to_dlpack", "sharded", "to(device)"});
}
