// Gradients of many bundles at once, the replicated ones summed across devices in one bucket
// (Note [Replica gradient buckets]).
#include <map>
#include <utility>

#include "tensor/internal.hpp"
#include "tensor/sharded.hpp"

namespace ravel::detail {

// Note [Replica gradient buckets] (across the devices of one process; across processes:
// Note [Gradient buckets] in distributed/data_parallel.cpp)
// The gradient of a replicated parameter is the sum of its replicas' gradients, an all-reduce
// (Note [Sharded gradients]). Done parameter by parameter, a data-parallel step moves every
// gradient between devices on its own and adds it on its own: for makemore over two devices, ten
// transfers and ten adds, a third of the step's kernels, each a few microseconds of launch. Like
// PyTorch DDP's buckets, the gradients of the replicated parameters with one mesh and dtype are
// laid end to end on each device (one kernel per device), all-reduced once, and each parameter's
// gradient is a view of the sum. Each element is the same sum of the same values in the same
// order as before, so the result is bitwise the one parameter-by-parameter reduction gives.
// Only small gradients go in a bucket: laying a gradient end to end with others is a pass over
// its bytes (read and written again) that the all-reduce itself does not need, and from
// kBucketMaxElements its own all-reduce's launch is small against that pass and goes to the
// plugin's in-place collective where there is one (Note [Plugin all-reduce], same threshold).
// The MLP step's bucket of 670k floats took 0.73-0.85 ms per device to lay out on one core, a
// fifth of the 2-device step (docs/performance.md §6, 2026-12-07); makemore's gradients are
// all below it and stay in one bucket.
constexpr int64_t kBucketMaxElements = 16 * 1024;

std::vector<Tensor> sharded_gradients(const std::vector<Tensor>& xs,
                                      const std::function<Tensor(const Tensor&)>& part_gradient) {
  std::vector<Tensor> out(xs.size());
  // Replicated bundles grouped by mesh and dtype; the rest are assembled one by one.
  std::map<std::pair<std::string, DType>, std::vector<size_t>> buckets;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!is_multi(xs[i])) continue;
    const Layout l = layout_of(xs[i]);
    if (l.axis >= 0 || l.partial) {  // a partial's gradient is not a sum over its parts
      out[i] = sharded_gradient(xs[i], part_gradient);
      continue;
    }
    if (xs[i].numel() >= kBucketMaxElements) {
      out[i] = sharded_gradient(xs[i], part_gradient);
      continue;
    }
    std::string mesh;
    for (const auto& d : l.devices) mesh += d.str() + ",";
    buckets[{mesh, xs[i].dtype()}].push_back(i);
  }
  for (const auto& [key, members] : buckets) {
    if (members.size() == 1) {
      out[members[0]] = sharded_gradient(xs[members[0]], part_gradient);
      continue;
    }
    const Layout l = layout_of(xs[members[0]]);
    const size_t n = l.devices.size();
    int64_t total = 0;
    std::vector<int64_t> offset;
    for (size_t i : members) offset.push_back(total), total += xs[i].numel();
    std::vector<Tensor> flat(n);  // per device: every member's part gradient, end to end
    for (size_t k = 0; k < n; ++k) {
      std::vector<Tensor> pieces;
      for (size_t i : members) {
        const Tensor p = parts_of(xs[i])[k];
        Tensor g = part_gradient(p);
        g = g.defined() ? g.cast(p.dtype()) : Tensor::zeros_like(p);
        pieces.push_back(g.reshape({p.numel()}));
      }
      flat[k] = join(pieces, 0, {total}, l.devices[k]);
    }
    std::vector<std::pair<int64_t, Shape>> pieces;
    for (size_t m = 0; m < members.size(); ++m) pieces.emplace_back(offset[m], xs[members[m]].shape());
    // Each parameter's sum on its own (Note [Summed in pieces]): it fuses into the update.
    const std::vector<std::vector<Tensor>> summed = combine_across_in_pieces(flat, pieces, ReduceOp::Sum);
    for (size_t m = 0; m < members.size(); ++m) {
      std::vector<Tensor> parts;
      for (size_t k = 0; k < n; ++k) parts.push_back(summed[m][k]);
      out[members[m]] = make_multi(std::move(parts), l);
    }
  }
  return out;
}

}  // namespace ravel::detail
