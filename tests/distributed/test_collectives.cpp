// ravel::distributed collectives on tensors, run as a world of one (no launcher) and under
// `mpirun -np 2` and `-np 4` (tests/distributed/CMakeLists.txt). Each rank's data is a known
// function of its rank, so every rank computes the expected result locally, on the host, without
// communicating. Every test makes the same collectives in the same order on every rank.
#include <cstdlib>

#include "ravel/distributed.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

namespace dist = ravel::distributed;
using ravel::DType;
using ravel::Shape;
using ravel::Tensor;

namespace {

const DType kDTypes[] = {DType::Bool, DType::U8, DType::I32, DType::I64, DType::F32, DType::F64};
const dist::ReduceOp kOps[] = {dist::ReduceOp::Sum, dist::ReduceOp::Prod, dist::ReduceOp::Max, dist::ReduceOp::Min};

// Rank r's element i: small integers (products of 1, 2, -1 for Prod), so sums and products are
// exact in every dtype and the order of combination does not matter.
int64_t value(int r, int64_t i, bool prod) {
  static const int64_t kProd[3] = {1, 2, -1};
  return prod ? kProd[(i + r) % 3] : ((i * 7 + r * 13) % 23) - 11;
}

// v as `dtype` holds it, widened to int64 (u8 wraps, bool is v != 0).
int64_t as_dtype(int64_t v, DType t) {
  if (t == DType::U8) return static_cast<uint8_t>(v);
  if (t == DType::Bool) return v != 0;
  return v;
}

Tensor input(int r, const Shape& shape, DType t, bool prod) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = value(r, i, prod);
  return Tensor::from_vector(v, shape).cast(t);
}

int64_t combine(dist::ReduceOp op, int64_t a, int64_t b, DType t) {
  if (t == DType::Bool) return (op == dist::ReduceOp::Sum || op == dist::ReduceOp::Max) ? (a || b) : (a && b);
  int64_t r = 0;
  switch (op) {
    case dist::ReduceOp::Sum: r = a + b; break;
    case dist::ReduceOp::Prod: r = a * b; break;
    case dist::ReduceOp::Max: r = std::max(a, b); break;
    case dist::ReduceOp::Min: r = std::min(a, b); break;
  }
  return as_dtype(r, t);
}

std::vector<int64_t> read(const Tensor& t) { return t.to_vector<int64_t>(); }

// The launcher's variable, "" when unset (CTest's ENVIRONMENT sets it empty for the world of one).
std::string launcher_env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(distributed_collectives)

BOOST_AUTO_TEST_CASE(world_matches_the_launcher) {
  const dist::World& w = dist::init();
  const std::string size = launcher_env("OMPI_COMM_WORLD_SIZE");
  if (!size.empty()) {
    BOOST_TEST(w.size == std::stoi(size));
    BOOST_TEST(w.rank == std::stoi(launcher_env("OMPI_COMM_WORLD_RANK")));
    BOOST_TEST(w.communicator == "mpi");
    BOOST_TEST(w.launcher.find("mpirun") != std::string::npos);
  } else {
    BOOST_TEST(w.size == 1);
    BOOST_TEST(w.rank == 0);
    BOOST_TEST(w.communicator == "none");
  }
  BOOST_TEST(dist::rank() == w.rank);
  BOOST_TEST(dist::world_size() == w.size);
}

BOOST_AUTO_TEST_CASE(all_reduce_every_dtype_op_and_size) {
  const int size = dist::world_size(), me = dist::rank();
  for (const Shape& shape : std::vector<Shape>{{}, {0}, {7}, {3, 5}, {1 << 18}})
    for (DType t : kDTypes)
      for (dist::ReduceOp op : kOps) {
        const bool prod = op == dist::ReduceOp::Prod;
        guarded(std::string(ravel::dtype_name(t)) + " " + std::to_string(int(op)) + " " + std::to_string(shape.size()), [&] {
          Tensor got = dist::all_reduce(input(me, shape, t, prod), op);
          BOOST_TEST(got.shape() == shape);
          BOOST_TEST(int(got.dtype()) == int(t));
          std::vector<int64_t> g = read(got);
          for (size_t i = 0; i < g.size(); ++i) {
            int64_t want = as_dtype(value(0, i, prod), t);
            for (int r = 1; r < size; ++r) want = combine(op, want, as_dtype(value(r, i, prod), t), t);
            if (g[i] != want) {
              BOOST_ERROR("element " << i << ": " << g[i] << " != " << want);
              break;
            }
          }
        });
      }
}

BOOST_AUTO_TEST_CASE(all_gather_reduce_scatter_and_broadcast_every_dtype) {
  const int size = dist::world_size(), me = dist::rank();
  for (DType t : kDTypes) {
    guarded(ravel::dtype_name(t), [&] {
      // all_gather: [3, 2] from every rank -> [3 * size, 2] in rank order; a scalar -> [size].
      Tensor g = dist::all_gather(input(me, {3, 2}, t, false));
      BOOST_TEST(g.shape() == (Shape{3 * size, 2}));
      std::vector<int64_t> gv = read(g);
      for (int r = 0; r < size; ++r)
        for (int64_t i = 0; i < 6; ++i) BOOST_TEST(gv[r * 6 + i] == as_dtype(value(r, i, false), t));
      BOOST_TEST(dist::all_gather(input(me, {}, t, false)).shape() == (Shape{size}));

      // reduce_scatter: [size * 3, 2]; rank me gets block me of the sum.
      Tensor s = dist::reduce_scatter(input(me, {size * 3, 2}, t, false), dist::ReduceOp::Sum);
      BOOST_TEST(s.shape() == (Shape{3, 2}));
      std::vector<int64_t> sv = read(s);
      for (int64_t i = 0; i < 6; ++i) {
        const int64_t at = me * 6 + i;
        int64_t want = as_dtype(value(0, at, false), t);
        for (int r = 1; r < size; ++r) want = combine(dist::ReduceOp::Sum, want, as_dtype(value(r, at, false), t), t);
        BOOST_TEST(sv[i] == want);
      }

      // broadcast from every root.
      for (int root = 0; root < size; ++root) {
        std::vector<int64_t> bv = read(dist::broadcast(input(me, {4, 3}, t, false), root));
        for (int64_t i = 0; i < 12; ++i) BOOST_TEST(bv[i] == as_dtype(value(root, i, false), t));
      }
    });
  }
  dist::barrier();
}

// An eager all-reduce reuses its idle operation for the next call of the same shape (Note [Cached
// collective operations]) and the last input's address while that buffer lives: two live inputs
// taken in turn must each be the one read.
BOOST_AUTO_TEST_CASE(a_reused_operation_reads_each_calls_own_input) {
  const int size = dist::world_size(), me = dist::rank();
  const Shape shape{257};
  const Tensor a = input(me, shape, DType::F32, false), b = input(me + 1, shape, DType::F32, false);
  for (int round = 0; round < 3; ++round) {
    for (int which = 0; which < 2; ++which) {
      BOOST_TEST_CONTEXT("round " << round << ", input " << which) {
        const std::vector<float> got = dist::all_reduce(which == 0 ? a : b).to_vector<float>();
        BOOST_REQUIRE_EQUAL(got.size(), size_t{257});
        for (int64_t i = 0; i < 257; ++i) {
          int64_t want = 0;
          for (int r = 0; r < size; ++r) want += value(r + which, i, false);
          BOOST_TEST(got[i] == float(want));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(mismatched_arguments_are_the_same_typed_error_on_every_rank) {
  const int size = dist::world_size(), me = dist::rank();
  if (size == 1) return;  // one rank cannot disagree with itself
  // Shapes differ on the last rank: every rank throws ShapeError naming both shapes.
  BOOST_CHECK_EXCEPTION(dist::all_reduce(Tensor::zeros({3, me == size - 1 ? 5 : 4})), ravel::ShapeError,
                        [](const ravel::ShapeError& e) {
                          std::string w = e.what();
                          return w.find("[3, 4]") != std::string::npos && w.find("[3, 5]") != std::string::npos;
                        });
  // Dtypes differ: DTypeError.
  BOOST_CHECK_THROW(dist::all_reduce(Tensor::zeros({6}, me == 1 ? DType::F64 : DType::F32)), ravel::DTypeError);
  // Different collectives (rank 0 broadcasts, the others all-reduce): ValueError.
  Tensor x = Tensor::zeros({6});
  BOOST_CHECK_THROW(me == 0 ? dist::broadcast(x, 0) : dist::all_reduce(x), ravel::ValueError);
  // Different reductions: ValueError.
  BOOST_CHECK_THROW(dist::all_reduce(x, me == 0 ? dist::ReduceOp::Max : dist::ReduceOp::Sum), ravel::ValueError);
  // The data operations never started, so the world is still usable.
  BOOST_TEST(dist::all_reduce(Tensor::ones({2})).to_vector<float>() == std::vector<float>(2, float(size)),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_typed_errors_before_any_communication) {
  const int size = dist::world_size();
  if (size > 1) BOOST_CHECK_THROW(dist::reduce_scatter(Tensor::zeros({size * 3 + 1})), ravel::ShapeError);
  BOOST_CHECK_THROW(dist::reduce_scatter(Tensor::scalar(1.0)), ravel::ShapeError);
  BOOST_CHECK_THROW(dist::broadcast(Tensor::zeros({2}), size), ravel::ValueError);
  BOOST_CHECK_THROW(dist::broadcast(Tensor::zeros({2}), -1), ravel::ValueError);
  BOOST_CHECK_THROW(dist::all_reduce(Tensor()), ravel::ValueError);
  dist::barrier();
}

BOOST_AUTO_TEST_CASE(communicators_are_listed) {
  // Under mpirun the MPI plugin is found and available; without a launcher it is found (when
  // built) but not used, with the reason.
  for (const auto& r : dist::find_communicators()) {
    BOOST_TEST_MESSAGE(r.path << ": " << r.status);
    if (r.name == "mpi") {
      BOOST_TEST(r.loaded);
      BOOST_TEST(r.available == !launcher_env("OMPI_COMM_WORLD_SIZE").empty());
      if (!r.available) BOOST_TEST(r.status.find("no launcher environment") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
