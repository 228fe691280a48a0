// All-reduces whose argument check travels with their data (Note [Checked all-reduces] in
// plugins/mpi/mpi_checked.cpp, Note [Checked all-reduces in the core] in
// core/src/distributed/staging.cpp) and the cached collectives of the eager path (Note [Cached
// collective operations] in core/src/distributed/collectives.cpp): sizes on both sides of the
// first message's data (3,872 bytes with the 96-byte header), of the eager pieces and of the small
// path's limit, against a sum computed locally; mismatches after many agreeing calls of the same
// call site, with remainders that must be drained, the same typed error on every rank and the world
// usable after each; a shape or dtype changing from call to call. Run as a world of one and under
// mpirun -np 2 / -np 4 (distributed_tests_np*).
#include "ravel/distributed.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

namespace dist = ravel::distributed;
using ravel::DType;
using ravel::Shape;
using ravel::Tensor;

namespace {

// Rank r's element i: 0..10, so sums over at most 4 ranks are exact in every dtype used here.
double value(int r, int64_t i) { return static_cast<double>((i * 5 + r * 3) % 11); }

Tensor input(int r, int64_t n, DType t) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = value(r, i);
  return Tensor::from_vector(v, {n}).cast(t);
}

// The sum over the ranks of element i.
double want(int64_t i, DType t) {
  int64_t s = 0;
  for (int r = 0; r < dist::world_size(); ++r) s += static_cast<int64_t>(value(r, i));
  return t == DType::U8 ? static_cast<double>(static_cast<uint8_t>(s)) : static_cast<double>(s);
}

void check_sum(int64_t n, DType t) {
  const std::vector<double> got = dist::all_reduce(input(dist::rank(), n, t)).cast(DType::F64).to_vector<double>();
  BOOST_TEST_REQUIRE(got.size() == static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != want(i, t)) {
      BOOST_ERROR("element " << i << " of " << n << " " << ravel::dtype_name(t) << ": " << got[i] << " != " << want(i, t));
      return;
    }
}

// A correct all-reduce after a mismatch: the world is usable (no message was left unmatched).
void world_still_usable() { check_sum(1024, DType::F32); }

}  // namespace

BOOST_AUTO_TEST_SUITE(distributed_checked)

BOOST_AUTO_TEST_CASE(sizes_around_the_first_message_pieces_and_the_small_limit) {
  struct Case {
    int64_t n;
    DType t;
  };
  // Bytes: 0, 8, 3,872 (the whole first message), 3,873 (one byte after it), 4,096, 16,000
  // (pieces), 16,384 (the last pieced size), 16,392 (one message after the first), 65,536 (the
  // small limit of 3 and more ranks), 65,544 (above it: MPI_Iallreduce after header-only first
  // messages), 1,048,584 (above two ranks' limit, Note [Two ranks up to 1 MiB]).
  for (const Case& c : {Case{0, DType::F32}, Case{2, DType::F32}, Case{3872, DType::U8}, Case{3873, DType::U8},
                        Case{1024, DType::F32}, Case{2000, DType::F64}, Case{4096, DType::I32}, Case{2049, DType::I64},
                        Case{16384, DType::F32}, Case{8193, DType::F64}, Case{131073, DType::F64}})
    guarded(std::to_string(c.n) + " " + ravel::dtype_name(c.t), [&] { check_sum(c.n, c.t); });
}

BOOST_AUTO_TEST_CASE(a_shape_or_dtype_changing_between_calls_of_one_call_site) {
  // The same line called with other shapes and dtypes: each call is checked and computed anew.
  for (int round = 0; round < 3; ++round)
    for (const auto& [n, t] : {std::pair{int64_t{1024}, DType::F32}, std::pair{int64_t{1000}, DType::F32},
                               std::pair{int64_t{1024}, DType::F64}, std::pair{int64_t{1024}, DType::F32}})
      guarded(std::to_string(round) + " " + std::to_string(n), [&] { check_sum(n, t); });
}

BOOST_AUTO_TEST_CASE(mismatches_after_agreeing_calls_are_the_same_typed_error_on_every_rank) {
  const int size = dist::world_size(), me = dist::rank();
  if (size == 1) return;  // one rank cannot disagree with itself
  const bool odd = me == size - 1;  // the last rank calls something else
  for (int i = 0; i < 5; ++i) check_sum(1024, DType::F32);  // the call site agreed many times
  // 4 KiB against 8 KiB: the first messages differ, and the last rank's longer remainder (and the
  // others' shorter one) must be drained.
  BOOST_CHECK_EXCEPTION(dist::all_reduce(input(me, odd ? 2048 : 1024, DType::F32)), ravel::ShapeError,
                        [](const ravel::ShapeError& e) {
                          const std::string w = e.what();
                          return w.find("[1024]") != std::string::npos && w.find("[2048]") != std::string::npos;
                        });
  world_still_usable();
  // 4 KiB against 1 MiB (2 ranks: a 1 MiB remainder to drain; more: a header-only first message).
  BOOST_CHECK_THROW(dist::all_reduce(input(me, odd ? 262144 : 1024, DType::F32)), ravel::ShapeError);
  world_still_usable();
  // The same bytes with another dtype and shape: f32 [1024] against f64 [512].
  BOOST_CHECK_THROW(dist::all_reduce(input(me, odd ? 512 : 1024, odd ? DType::F64 : DType::F32)), ravel::DTypeError);
  world_still_usable();
  // Another collective: all_gather's header-only exchange against an all-reduce's data.
  const Tensor x = input(me, 1024, DType::F32);
  BOOST_CHECK_THROW(odd ? dist::all_gather(x) : dist::all_reduce(x), ravel::ValueError);
  world_still_usable();
  // A dtype MPI cannot reduce against one it can: the headers still meet (DTypeError, not a
  // time-out).
  BOOST_CHECK_THROW(dist::all_reduce(input(me, 1024, odd ? DType::F16 : DType::F32)), ravel::DTypeError);
  world_still_usable();
  // And the call site that agreed before agrees again.
  for (int i = 0; i < 3; ++i) check_sum(1024, DType::F32);
}

BOOST_AUTO_TEST_CASE(a_result_kept_across_calls_is_not_overwritten) {
  // Cached operations reuse their result buffer only when nothing else holds it: results kept
  // alive must keep their values while the same call site runs again.
  const int me = dist::rank();
  std::vector<Tensor> kept;
  for (int i = 0; i < 4; ++i) kept.push_back(dist::all_reduce(input(me, 1024, DType::F32) * static_cast<double>(i + 1)));
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> got = kept[i].to_vector<float>();
    for (int64_t j = 0; j < 1024; ++j)
      if (got[j] != static_cast<float>(want(j, DType::F32) * (i + 1))) {
        BOOST_ERROR("result " << i << " element " << j << ": " << got[j]);
        break;
      }
  }
}

BOOST_AUTO_TEST_SUITE_END()
