#include <ravel/lowering/collective.hpp>

namespace rvl::lower {

CollectivePlan plan_collective(validate::CollectiveKind kind, int32_t n, uint64_t count, uint64_t element_size) {
  using Kind = validate::CollectiveKind;
  const uint64_t bytes = count * element_size;  // one chunk (reduce_scatter), one input (the others)
  CollectivePlan plan;
  plan.shares.resize(static_cast<size_t>(n));
  if (n == 1) {
    plan.shares[0].copies.push_back({0, 0, -1, 0, bytes});
    return plan;
  }
  if (kind == Kind::AllGather) {
    for (int32_t k = 0; k < n; ++k)
      for (int32_t j = 0; j < n; ++j) plan.shares[k].copies.push_back({j, 0, -1, static_cast<uint64_t>(j) * bytes, bytes});
    return plan;
  }
  // Note [Collective plans]: the two reductions; reduce_scatter reads chunk k, all_reduce all.
  const bool scatter = kind == Kind::ReduceScatter;
  plan.scratch_bytes = bytes;
  plan.scratch_blocks = n - 1;
  plan.barrier_between = !scatter;
  for (int32_t k = 0; k < n; ++k) {
    const uint64_t chunk = scatter ? static_cast<uint64_t>(k) : 0;
    CollectivePlan::Share& s = plan.shares[k];
    for (int32_t j = 0; j < n; ++j) {
      if (j == k) {
        s.fold.push_back({-1, static_cast<int64_t>(chunk * count)});
        continue;
      }
      const auto block = static_cast<int32_t>(s.copies.size());
      s.copies.push_back({j, chunk * bytes, block, 0, bytes});
      s.fold.push_back({block, 0});
    }
  }
  return plan;
}

}  // namespace rvl::lower
