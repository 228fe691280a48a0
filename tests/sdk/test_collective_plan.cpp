// The shared plan of the GPU plugins' collectives (Note [Collective plans] in
// <ravel/lowering/collective.hpp>) run on host vectors: copies, then the folds, for n = 1..5
// devices and several counts, against backend.h's formulas written out directly. The plugins
// run the same plan on the HIP emulator and zecl (scripts/check-hip.sh, check-level-zero.sh);
// this catches a wrong offset or a missing part where no GPU toolchain is installed.
#include <boost/test/unit_test.hpp>

#include <ravel/lowering/collective.hpp>

#include <cstdint>
#include <vector>

using Kind = rvl::validate::CollectiveKind;
using Plan = rvl::lower::CollectivePlan;

namespace {

constexpr uint64_t kSize = sizeof(int64_t);

// Runs the plan with SUM (element j*1000 + i of input j: every sum names its parts); returns
// every device's output.
std::vector<std::vector<int64_t>> run(Kind kind, int32_t n, uint64_t count, bool in_place) {
  const uint64_t in_count = kind == Kind::ReduceScatter ? count * n : count;
  const uint64_t out_count = kind == Kind::AllGather ? count * n : count;
  std::vector<std::vector<int64_t>> in(n), out(n, std::vector<int64_t>(out_count, -1));
  for (int32_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < in_count; ++i) in[j].push_back(j * 1000 + static_cast<int64_t>(i) * 3 + 1);
  const Plan plan = rvl::lower::plan_collective(kind, n, count, kSize);
  BOOST_TEST_REQUIRE(plan.shares.size() == static_cast<size_t>(n));
  BOOST_TEST(plan.barrier_between == (kind == Kind::AllReduce && n > 1));
  // In place (all_reduce only): the output is the input; only safe because the plan copies
  // every input before any fold writes (barrier_between), which copying all first models.
  auto output = [&](int32_t k) -> std::vector<int64_t>& { return in_place ? in[k] : out[k]; };
  std::vector<std::vector<std::vector<int64_t>>> scratch(n);
  for (int32_t k = 0; k < n; ++k) {
    scratch[k].assign(static_cast<size_t>(plan.scratch_blocks), std::vector<int64_t>(plan.scratch_bytes / kSize, -2));
    for (const Plan::Copy& c : plan.shares[k].copies) {
      BOOST_TEST_REQUIRE(c.from_byte % kSize == 0u);
      BOOST_TEST_REQUIRE(c.to_byte % kSize == 0u);
      std::vector<int64_t>& to = c.scratch < 0 ? output(k) : scratch[k].at(static_cast<size_t>(c.scratch));
      BOOST_TEST_REQUIRE(c.from_byte + c.bytes <= in[c.from].size() * kSize);
      BOOST_TEST_REQUIRE(c.to_byte + c.bytes <= to.size() * kSize);
      for (uint64_t e = 0; e < c.bytes / kSize; ++e) to[c.to_byte / kSize + e] = in[c.from][c.from_byte / kSize + e];
    }
  }
  for (int32_t k = 0; k < n; ++k) {
    const auto& fold = plan.shares[k].fold;
    if (fold.empty()) continue;
    BOOST_TEST_REQUIRE(fold.size() == static_cast<size_t>(n));
    std::vector<int64_t> acc(count, 0);
    for (const Plan::Operand& o : fold) {
      const std::vector<int64_t>& src = o.scratch < 0 ? in[k] : scratch[k].at(static_cast<size_t>(o.scratch));
      for (uint64_t i = 0; i < count; ++i) acc[i] += src.at(static_cast<size_t>(o.element) + i);
    }
    for (uint64_t i = 0; i < count; ++i) output(k)[i] = acc[i];
  }
  if (in_place) return in;
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_kind_matches_backend_h) {
  for (Kind kind : {Kind::AllReduce, Kind::ReduceScatter, Kind::AllGather})
    for (int32_t n = 1; n <= 5; ++n)
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{3}})
        for (bool in_place : {false, true}) {
          if (in_place && kind != Kind::AllReduce) continue;  // the ABI forbids it for the others
          BOOST_TEST_CONTEXT("kind " << static_cast<int>(kind) << ", n " << n << ", count " << count << ", in place "
                                     << in_place) {
            const std::vector<std::vector<int64_t>> got = run(kind, n, count, in_place);
            auto input = [](int64_t j, uint64_t i) { return j * 1000 + static_cast<int64_t>(i) * 3 + 1; };
            for (int32_t k = 0; k < n; ++k) {
              std::vector<int64_t> want;
              if (kind == Kind::AllGather) {
                for (int32_t j = 0; j < n; ++j)
                  for (uint64_t i = 0; i < count; ++i) want.push_back(input(j, i));
              } else {
                const uint64_t base = kind == Kind::ReduceScatter ? static_cast<uint64_t>(k) * count : 0;
                for (uint64_t i = 0; i < count; ++i) {
                  int64_t s = 0;
                  for (int32_t j = 0; j < n; ++j) s += input(j, base + i);
                  want.push_back(s);
                }
              }
              const std::vector<int64_t> head(got[k].begin(), got[k].begin() + static_cast<std::ptrdiff_t>(want.size()));
              BOOST_TEST(head == want, boost::test_tools::per_element());
            }
          }
        }
}

// What each device receives from the others (Note [Collective plans]): reduce_scatter and
// all_gather move what a ring moves, (n - 1) chunks or inputs; all_reduce (n - 1) whole inputs.
BOOST_AUTO_TEST_CASE(bytes_each_device_receives) {
  for (int32_t n = 2; n <= 5; ++n)
    for (Kind kind : {Kind::AllReduce, Kind::ReduceScatter, Kind::AllGather}) {
      const Plan plan = rvl::lower::plan_collective(kind, n, 10, kSize);
      for (int32_t k = 0; k < n; ++k) {
        uint64_t from_others = 0;
        for (const Plan::Copy& c : plan.shares[k].copies)
          if (c.from != k) from_others += c.bytes;
        BOOST_TEST(from_others == static_cast<uint64_t>(n - 1) * 10 * kSize);
      }
    }
}
